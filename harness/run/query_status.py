"""Where a running query is in its micro-batch, read from outside it: Spark's status REST API and the checkpoint.

A kill that means to land where exactly-once bugs live must know what the query is doing *now*, for any connector
and without its cooperation. Spark tells two things from outside the driver:

- the **checkpoint** (:mod:`~streamcert.harness.run.checkpoint`): ``offsets/N`` written when batch N is planned,
  ``commits/N`` once its sink committed it;
- the driver's **status REST API** (``/api/v1/applications/<app>/jobs`` and ``.../stages?status=active``): the
  jobs of batch N (their description ends ``batch = N``), their stages and how many tasks of each run or finished.

Why the REST API rather than a listener or the event log: it is Spark's own interface for exactly this question,
answers from outside the driver's JVM (nothing of ours runs in the query: a connector cannot tell it is watched),
works the same for ``local[N,F]``, ``local-cluster`` and standalone masters, and is current to the last listener
event (``spark.ui.liveUpdate.period`` 0). The event log buffers task events until a stage ends; a listener would
have to run inside the driver under test. :data:`STATUS_SPARK_CONF` turns the UI on (loopback only, a port the
kernel picks) for the runs whose faults read it.

The moments of a batch (:data:`MOMENTS`), from what is observed:

``planning``          batch N pending (``offsets/N`` written), no task of it started
``reading``           tasks of the batch's first stage (the source's scan) run, none of them finished
``read_done``         a task of the scan stage finished and the write stage has not finished a task: some of the
                      input was read (and, where one stage reads and writes, written) while the batch is uncommitted;
                      also every job of the batch finished with ``commits/N`` absent (with ``commit_in_flight``):
                      the whole batch was read and none of it is committed
``writing``           tasks of the batch's last stage (the sink's write) run
``commit_in_flight``  every job of the batch finished, ``commits/N`` absent: the sink's driver-side commit (or
                      Spark's own commit) is under way
``output_visible``    one of the three before, and the run's output (read back as its users read it, straight
                      from the server) grew since the batch was first seen: the sink made (part of) the batch
                      visible and Spark has not committed it. The observer decides it, not the status API; over a
                      slowed link the output shows a commit before the driver hears of it.
``just_committed``    ``commits/N`` written and ``offsets/N+1`` not: between the commit and the next plan

Where a single stage reads and writes (a source and a sink without a shuffle between them: the usual streaming
pipeline), its running tasks are both ``reading`` and ``writing``: the records flow from the reader to the writer
task by task, and a kill there lands in both. Once one of its tasks finished and others still run, the moment is
``read_done`` and ``writing``.

The class of the batch (:data:`BATCH_CLASSES`): ``first`` is the first batch an attempt of the driver runs
(after a start, often the replay of a batch a killed attempt left pending), ``replay_of_replay`` a first batch
that at least two attempts in a row started with pending (its earlier replay was itself killed), ``steady`` a
batch with at least :data:`STEADY_AFTER` batches committed by the same attempt before it, ``warming`` the few in
between.

Used in the harness process by the moment faults (:mod:`streamcert.harness.faults.moments`).
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any

import requests

from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.run.warm_up import WARM_UP_QUERY_PREFIX

__all__ = ["MOMENTS", "WRITING_MOMENTS", "BATCH_CLASSES", "STEADY_AFTER", "STATUS_SPARK_CONF", "JobActivity",
           "StageActivity", "Observation", "SparkStatus", "batch_class", "moments_of", "replay_depth",
           "warm_status_api"]

MOMENTS = ("planning", "reading", "read_done", "writing", "commit_in_flight", "output_visible", "just_committed")
#: The moments in which a sink may be making the batch visible: ``output_visible`` is one of them seen together with
#: the output grown since the batch was first seen (the run's observer says so, not Spark).
WRITING_MOMENTS = ("read_done", "writing", "commit_in_flight")
BATCH_CLASSES = ("first", "steady", "replay_of_replay")
#: Batches an attempt must have committed before one of its batches counts as ``steady``.
STEADY_AFTER = 3

#: What a run whose faults read the status API adds to the driver's Spark settings: the UI (and its REST API) on a
#: port the kernel picks, its store updated on every event rather than every 100 ms.
STATUS_SPARK_CONF = {"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.ui.liveUpdate.period": "0ms",
                     "spark.ui.retainedJobs": "200", "spark.ui.retainedStages": "400"}

_BATCH = re.compile(r"batch = (\d+)\s*$")


@dataclass(frozen=True)
class StageActivity:
    """One stage of a batch's job as the status API shows it."""

    stage_id: int
    tasks: int
    active: int
    complete: int
    finished: bool


@dataclass(frozen=True)
class JobActivity:
    """One job of a micro-batch: its status and its stages (the scan first, the write last)."""

    job_id: int
    batch: int
    status: str
    active_tasks: int
    completed_tasks: int
    stages: tuple[StageActivity, ...]

    @property
    def running(self) -> bool:
        return self.status == "RUNNING"

    @property
    def scan(self) -> StageActivity | None:
        return self.stages[0] if self.stages else None

    @property
    def write(self) -> StageActivity | None:
        return self.stages[-1] if self.stages else None


@dataclass(frozen=True)
class Observation:
    """What one look at the query saw: the attempt, the batch it concerns, its moments and class."""

    attempt: int
    batch: int | None
    moments: frozenset[str]
    batch_class: str | None
    replay_depth: int = 0
    checkpoint: CheckpointState | None = None
    jobs: tuple[JobActivity, ...] = field(default=(), repr=False)

    def with_moment(self, moment: str) -> "Observation":
        return dataclasses.replace(self, moments=self.moments | {moment})

    def as_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "batch": self.batch, "moments": sorted(self.moments),
                "batch_class": self.batch_class, "replay_depth": self.replay_depth}


class SparkStatus:
    """The status REST API of one driver attempt (its UI's address and application id, from the driver's
    ``session`` event); every call answers within ``timeout`` s or raises ``requests.RequestException``."""

    def __init__(self, ui_url: str, app_id: str, timeout: float = 2.0) -> None:
        self.base = f"{ui_url.rstrip('/')}/api/v1/applications/{app_id}"
        self.timeout = timeout
        self._session = requests.Session()

    def close(self) -> None:
        self._session.close()

    def _get(self, path: str) -> Any:
        response = self._session.get(self.base + path, timeout=self.timeout)
        response.raise_for_status()
        return response.json()

    def jobs_of(self, batch: int) -> tuple[JobActivity, ...]:
        """The jobs of micro-batch ``batch`` with their stages, oldest first."""
        jobs = [job for job in self._get("/jobs") if _batch_of(job) == batch]
        if not jobs:
            return ()
        active = {stage["stageId"]: stage for stage in self._get("/stages?status=active")}
        return tuple(sorted((_job(job, batch, active) for job in jobs), key=lambda job: job.job_id))

    def busy_executors(self) -> dict[str, int]:
        """Executor id -> how many tasks it runs now (executors running none, and the driver, left out): where a
        JVM task (a JVM sink's write) runs, which no Python worker shows."""
        return _busy_executors(self._get("/executors"))


def _busy_executors(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Executor id -> its running tasks, of the status API's ``/executors`` rows (the driver left out)."""
    return {str(row["id"]): int(row.get("activeTasks", 0)) for row in rows
            if row.get("id") != "driver" and int(row.get("activeTasks", 0)) > 0 and row.get("isActive", True)}


def warm_status_api(ui_url: str, app_id: str, timeout: float = 30.0) -> float | None:
    """Ask the status API once for what a look asks (jobs, active stages) and return the seconds it took (None when
    it did not answer). Called in the driver child after its SparkSession started and before its query does.

    Why: Spark builds its REST resources on the first request, which took 1.7 s here (later ones: ~5 ms). A watcher
    whose first look is that request sees a restarted query only after its replayed batch's tasks run: the replay's
    planning (~0.6 s from the query's start) passed unseen, every time.
    """
    status = SparkStatus(ui_url, app_id, timeout=timeout)
    began = time.monotonic()
    try:
        status.jobs_of(-1)
        status._get("/stages?status=active")
    except requests.RequestException:
        return None
    finally:
        status.close()
    return round(time.monotonic() - began, 3)


def _batch_of(job: dict[str, Any]) -> int | None:
    """The micro-batch a job belongs to (its description ends ``batch = N``); None for other jobs, and for the
    batches of a standby's warm-up queries (their description starts with their name)."""
    description = job.get("description") or ""
    found = _BATCH.search(description)
    return int(found.group(1)) if found and not description.lstrip().startswith(WARM_UP_QUERY_PREFIX) else None


def _job(job: dict[str, Any], batch: int, active: dict[int, dict[str, Any]]) -> JobActivity:
    """A job's activity; a stage not active is finished when the job finished as many stages as precede it."""
    stage_ids = sorted(job.get("stageIds") or [])
    done_stages = int(job.get("numCompletedStages", 0)) + int(job.get("numSkippedStages", 0))
    stages = []
    for position, stage_id in enumerate(stage_ids):
        row = active.get(stage_id)
        if row is not None:
            stages.append(StageActivity(stage_id, int(row.get("numTasks", 0)), int(row.get("numActiveTasks", 0)),
                                        int(row.get("numCompleteTasks", 0)), False))
        else:
            finished = job.get("status") == "SUCCEEDED" or position < done_stages
            stages.append(StageActivity(stage_id, 0, 0, 0, finished))
    return JobActivity(int(job["jobId"]), batch, str(job.get("status")), int(job.get("numActiveTasks", 0)),
                       int(job.get("numCompletedTasks", 0)), tuple(stages))


def moments_of(state: CheckpointState, jobs: tuple[JobActivity, ...], next_planned: bool) -> frozenset[str]:
    """The moments (:data:`MOMENTS`) of the pending batch, or of the latest committed one when none is pending.

    ``jobs`` are the pending batch's jobs; ``next_planned`` says whether ``offsets/<latest commit + 1>`` exists
    (only read when no batch is pending).
    """
    if state.pending is None:
        return frozenset({"just_committed"}) if state.latest_commit is not None and not next_planned else frozenset()
    started = [job for job in jobs if job.active_tasks or job.completed_tasks or job.status == "SUCCEEDED"
               or any(stage.finished for stage in job.stages)]
    if not started:
        return frozenset({"planning"})
    if not any(job.running for job in jobs):
        # every job of the batch ended and commits/N is absent: its read is done and its output not committed. For
        # a sink that reads and writes in one stage (foreachBatch committing from the driver) this is the only
        # read-done moment wider than a status poll
        return frozenset({"read_done", "commit_in_flight"})
    job = next(job for job in reversed(jobs) if job.running)
    return _task_moments(job)


def _task_moments(job: JobActivity) -> frozenset[str]:
    scan, write = job.scan, job.write
    if scan is None or write is None:
        return frozenset({"reading"} if job.active_tasks else set())
    if scan.stage_id == write.stage_id:  # one stage reads and writes, record by record
        if scan.active and not scan.complete and not scan.finished:
            return frozenset({"reading", "writing"})
        if scan.active:
            return frozenset({"read_done", "writing"})
        return frozenset()
    found = set()
    if scan.active and not scan.complete:
        found.add("reading")
    if (scan.complete or scan.finished) and not write.complete and not write.finished:
        found.add("read_done")
    if write.active:
        found.add("writing")
    return frozenset(found)


def replay_depth(batch: int, attempt: int, start_states: dict[int, CheckpointState]) -> int:
    """How many attempts in a row, ending with ``attempt``, started with ``batch`` pending: 1 for a replay, 2 for the
    replay of a replay, 0 when ``attempt`` did not start with it pending."""
    depth = 0
    while attempt in start_states and start_states[attempt].pending == batch:
        depth += 1
        attempt -= 1
    return depth


def batch_class(batch: int, start: CheckpointState, depth: int) -> str:
    """The class (:data:`BATCH_CLASSES`, or ``warming``) of ``batch`` in an attempt that started at ``start``."""
    first = start.pending if start.pending is not None else (start.latest_commit + 1 if start.latest_commit is not None
                                                            else 0)
    if batch == first:
        return "replay_of_replay" if depth >= 2 else "first"
    return "steady" if batch - first >= STEADY_AFTER else "warming"
