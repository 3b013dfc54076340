"""Open-loop load at a target rate through locust, driven from the harness's process.

Importing locust monkey-patches the whole process with gevent, so locust never
runs here: :func:`run_open_loop` starts ``python -m locust`` on the locustfile
``harness/locust_kafka.py`` in one or more subprocesses (one Python process keeps one core busy at most,
so a rate above one core's reach is spread over several), hands each its
:class:`LoadParams` as a JSON file named by ``STREAMCERT_LOAD_PARAMS`` and the
records to send as a Parquet slice of :func:`~streamcert.harness.run.workload.plan`, and
reads back the Parquet :class:`~streamcert.harness.run.workload.Ledger` each wrote. The processes start
their schedule together (:mod:`~streamcert.harness.run.start_line`). Rate and produce-to-ack latency are
computed from the merged ledger, every record's own times, not from locust's statistics (locust sees one
request per batch of acknowledgements, which keeps its bookkeeping off the per-record path). Neither this
module nor anything the harness imports may import locust or the locustfile.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.progress import step
from streamcert.harness.stack.kafka_clients import client_conf
from streamcert.harness.stack.process import tail_file
from streamcert.harness.run import start_line
from streamcert.harness.run.workload import Ledger, WorkloadSpec, plan

__all__ = [
    "PARAMS_VAR",
    "LOCUSTFILE",
    "LoadParams",
    "LoadResult",
    "planned_records",
    "produce_figures",
    "run_open_loop",
]

#: Names the JSON file with the :class:`LoadParams` of the locust subprocess.
PARAMS_VAR = "STREAMCERT_LOAD_PARAMS"
#: The locustfile; a path, never imported by the harness.
LOCUSTFILE = Path(__file__).with_name("locust_kafka.py")

# The schedule ends at duration_s; the run-time limit is only a backstop for a generator that fell behind.
_RUN_TIME_GRACE_S = 10
_STOP_TIMEOUT_S = 5
_STARTUP_ALLOWANCE_S = 60.0
_POLL_S = 0.1


@dataclass(frozen=True)
class LoadParams:
    """Everything one locust subprocess needs; written by the parent, read when the locustfile is imported.

    ``users`` producers in all are spread over ``processes`` processes: process ``process_index`` runs the
    users ``u`` with ``u % processes == process_index``, and user ``u`` sends the keys with
    ``key_index % users == u``.
    """

    bootstrap: str
    topic: str
    spec: dict[str, Any]
    users: int
    duration_s: float
    plan_path: str
    ledger_path: str
    flush_timeout_s: float
    producer_conf: dict[str, Any] = field(default_factory=dict)
    processes: int = 1
    process_index: int = 0
    #: where the processes meet before their common start (:mod:`~streamcert.harness.run.start_line`)
    start_line_dir: str = ""
    warm_up_timeout_s: float = 30.0

    def workload(self) -> WorkloadSpec:
        return WorkloadSpec(**self.spec)

    def local_users(self) -> list[int]:
        """The users (numbered over all processes) this process runs."""
        return list(range(self.process_index, self.users, self.processes))

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(asdict(self), indent=1))
        return path

    @classmethod
    def read(cls, path: Path) -> "LoadParams":
        return cls(**json.loads(Path(path).read_text()))


@dataclass
class LoadResult:
    """What an open-loop run did: the ledger, and the rate and latency its records show."""

    ledger: Ledger
    ledger_path: Path
    requests: int
    failures: int
    achieved_rate: float
    latency_ms: dict[str, float | None]
    target_rate: float
    duration_s: float
    users: int
    processes: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (the ledger itself stays in its Parquet file)."""
        return {
            "ledger_path": str(self.ledger_path),
            "ledger_counts": self.ledger.counts(),
            "requests": self.requests,
            "failures": self.failures,
            "achieved_rate": _finite_or_none(self.achieved_rate),
            "latency_ms": {k: _finite_or_none(v) for k, v in self.latency_ms.items()},
            "target_rate": self.target_rate,
            "duration_s": self.duration_s,
            "users": self.users,
            "processes": self.processes,
        }


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def planned_records(spec: WorkloadSpec, duration_s: float) -> int:
    """How many records an open-loop run sends: the plan's records due before ``duration_s``, at most ``total``."""
    return min(spec.total, math.ceil(spec.rate * duration_s))


def produce_figures(ledger: pd.DataFrame) -> dict[str, Any]:
    """What a ledger of sent records says about its producers: records sent, those not acknowledged, the rate
    achieved (records after the first per second until the last was produced) and the produce-to-ack latency
    (ms: p50, p95, p99, max) of the acknowledged ones."""
    produced = ledger["produced_at"].to_numpy(dtype=np.float64)
    produced = produced[np.isfinite(produced)]
    acked = ledger.loc[ledger["status"] == "acked"]
    latency = (acked["acked_at"] - acked["produced_at"]).to_numpy(dtype=np.float64) * 1000
    latency = latency[np.isfinite(latency)]
    span = float(produced.max() - produced.min()) if len(produced) > 1 else 0.0
    rate = (len(produced) - 1) / span if span > 0 else math.nan
    if len(latency):
        p50, p95, p99 = np.percentile(latency, [50, 95, 99])
        figures = {"p50": p50, "p95": p95, "p99": p99, "max": latency.max()}
    else:
        figures = {"p50": None, "p95": None, "p99": None, "max": None}
    return {"requests": int(len(produced)), "failures": int(len(produced) - len(acked)), "achieved_rate": rate,
            "latency_ms": {k: None if v is None else round(float(v), 3) for k, v in figures.items()}}


def run_open_loop(bootstrap: str, topic: str, spec: WorkloadSpec, duration_s: float, users: int, workdir: Path,
                  *, processes: int | None = None, producer_conf: dict[str, Any] | None = None,
                  message_timeout_s: float = 30.0) -> LoadResult:
    """Produce ``spec``'s records into ``topic`` open-loop at ``spec.rate`` for ``duration_s`` with ``users`` users.

    Called from the harness's process; locust runs headless in ``processes`` subprocesses (default: one per
    core, at most one per user), with no web UI and no master port. ``topic`` must exist with
    ``spec.partitions`` partitions. Stops after ``min(total, ceil(rate * duration_s))`` records
    (:func:`planned_records`). ``workdir`` keeps the parameters, the plan, each process's locust log and
    ledger, and the merged ``ledger.parquet``.

    Raises :class:`ConfigurationError` for unusable inputs (a missing or too
    small topic too) and :class:`StartupFailed` when Kafka does not answer or
    a locust process fails or leaves no ledger. Failed records are not errors: they
    are ``failures`` and ``indeterminate`` in the ledger.
    """
    processes = min(users, os.cpu_count() or 1) if processes is None else processes
    _validate(spec, duration_s, users, processes)
    _check_topic(bootstrap, topic, spec.partitions)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base = _params(bootstrap, topic, spec, duration_s, users, processes, workdir, producer_conf or {},
                   message_timeout_s)
    each = [replace(base, process_index=index, ledger_path=str(workdir / f"ledger-{index}.parquet"))
            for index in range(processes)]
    _clear(workdir)
    _write_plan(spec, duration_s, Path(base.plan_path))
    run_time = _run_time(duration_s, base.warm_up_timeout_s)
    _run_locusts(each, workdir, run_time,
                 f"Open-loop load: {spec.rate:g} records/s for {duration_s:g}s into {topic} "
                 f"({users} user(s) in {processes} process(es))",
                 timeout=_STARTUP_ALLOWANCE_S + run_time + _STOP_TIMEOUT_S + base.flush_timeout_s)
    ledger = _merged_ledger(each, spec, topic)
    ledger.write(Path(base.ledger_path))
    figures = produce_figures(ledger.frame)
    return LoadResult(ledger=ledger, ledger_path=Path(base.ledger_path), requests=figures["requests"],
                      failures=figures["failures"], achieved_rate=figures["achieved_rate"],
                      latency_ms=figures["latency_ms"], target_rate=float(spec.rate), duration_s=float(duration_s),
                      users=users, processes=processes)


def _params(bootstrap: str, topic: str, spec: WorkloadSpec, duration_s: float, users: int, processes: int,
            workdir: Path, producer_conf: dict[str, Any], message_timeout_s: float) -> LoadParams:
    return LoadParams(
        bootstrap=bootstrap, topic=topic, spec=spec.as_dict(), users=users, duration_s=float(duration_s),
        plan_path=str(workdir / "plan.parquet"), ledger_path=str(workdir / "ledger.parquet"),
        # every record gets its delivery report (maybe a timeout) before the flush at the end gives up
        flush_timeout_s=message_timeout_s + 5.0,
        producer_conf={"message.timeout.ms": int(message_timeout_s * 1000), **producer_conf},
        processes=processes, start_line_dir=str(workdir),
    )


def _clear(workdir: Path) -> None:
    """A rerun in the same folder must not read the last run's files."""
    start_line.clear(workdir)
    for pattern in ("ledger*.parquet", "locust*.log", "locust*.out"):
        for stale in workdir.glob(pattern):
            stale.unlink(missing_ok=True)


def _merged_ledger(each: list[LoadParams], spec: WorkloadSpec, topic: str) -> Ledger:
    frames = [Ledger.read(Path(params.ledger_path)).frame for params in each]
    merged = pd.concat(frames, ignore_index=True).sort_values("id", kind="stable")
    return Ledger(merged, spec, topic)


def _validate(spec: WorkloadSpec, duration_s: float, users: int, processes: int) -> None:
    spec.validate()
    if not isinstance(users, int) or users < 1:
        raise ConfigurationError(f"Open-loop load needs at least one user; got users={users!r}.",
                                 hint="Pass users=1 or more (each user is one producer).")
    if not isinstance(processes, int) or not 1 <= processes <= users:
        raise ConfigurationError(
            f"Open-loop load spreads its {users} user(s) over 1 to {users} processes; got processes={processes!r}.",
            hint="Leave processes unset (one per core, at most one per user) or pass a number in that range.")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ConfigurationError(f"Open-loop load needs a positive duration; got duration_s={duration_s!r}.",
                                 hint="Pass the number of seconds the schedule should run, e.g. 30.")
    if spec.rate is None:
        raise ConfigurationError("Open-loop load needs a target rate, and the workload spec has rate=None.",
                                 hint="Set WorkloadSpec(rate=...) in records/s, or use workload.load_topic to "
                                      "produce as fast as the broker takes it.")
    if spec.aborted_fraction > 0:
        raise ConfigurationError(
            f"Open-loop load does not write transactions; the spec has aborted_fraction={spec.aborted_fraction}.",
            hint="Use aborted_fraction=0 here, and workload.load_topic for input with aborted records.")
    if spec.has_event_times:
        raise ConfigurationError(
            "Open-loop load stamps records with the time they are produced; the spec asks for event times "
            f"(event_time_step_ms={spec.event_time_step_ms}, event_time_lead_ms={spec.event_time_lead_ms}).",
            hint="Use workload.load_topic (paced by WorkloadSpec.rate) for a skewed backlog.")
    if users > spec.keys:
        raise ConfigurationError(
            f"Open-loop load gives each key to one user, so {users} users need at least {users} keys; "
            f"the spec has keys={spec.keys}.",
            hint="Use fewer users or more keys.")


def _write_plan(spec: WorkloadSpec, duration_s: float, path: Path) -> None:
    # Planned here, not in the subprocess: a slow import there would shift locust's run-time clock (gevent's loop
    # time is stale until its first iteration), and the plan of a large total takes seconds.
    records = plan(spec).iloc[:planned_records(spec, duration_s)]
    records[["id", "key", "key_index", "seq", "partition"]].to_parquet(path, index=False)


def _check_topic(bootstrap: str, topic: str, partitions: int) -> None:
    # Here rather than in the subprocess: a missing topic is a one-line answer, not a locust log to read.
    admin = AdminClient(client_conf(bootstrap, **{"socket.timeout.ms": 5000}))
    try:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    except KafkaException as exc:
        raise StartupFailed(f"Kafka at {bootstrap} did not answer a metadata request: {exc}.",
                            hint="Is the stack up and the Kafka link free of faults?") from None
    if meta is None or meta.error is not None:
        raise ConfigurationError(f"Topic {topic!r} does not exist at {bootstrap}.",
                                 hint=f"Create it first, e.g. kafka_clients.create_topic(bootstrap, {topic!r}, "
                                      f"{partitions}).")
    if len(meta.partitions) < partitions:
        raise ConfigurationError(
            f"Topic {topic!r} has {len(meta.partitions)} partitions and the workload writes to {partitions}.",
            hint="Create the topic with the spec's number of partitions, or lower WorkloadSpec.partitions.")


def _run_time(duration_s: float, warm_up_timeout_s: float) -> int:
    """Locust's ``--run-time`` backstop (s): counted from its spawn, so it covers the longest a process may take to
    warm up and wait at the start line, then the schedule, then a grace for a generator that fell behind."""
    return math.ceil(duration_s + warm_up_timeout_s) + _RUN_TIME_GRACE_S


def _locust_argv(users: int, run_time: int, workdir: Path, logfile: Path) -> list[str]:
    # --headless starts no web UI and no master, so nothing binds a port; failed records are measured
    # outcomes, not a failed run (--exit-code-on-error 0); the locustfile sets its own exit code on crashes.
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", str(users),
            "-r", str(users), "--run-time", f"{run_time}s", "--stop-timeout", str(_STOP_TIMEOUT_S),
            "--only-summary", "--exit-code-on-error", "0", "--logfile", str(logfile)]


def _child_env(params_file: Path) -> dict[str, str]:
    # LOCUST_* variables would silently override the command line; the run must be what we asked for.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCUST_")}
    env[PARAMS_VAR] = str(params_file)
    return env


@dataclass
class _Locust:
    """One locust subprocess of a load, and where its evidence goes."""

    params: LoadParams
    logfile: Path
    outfile: Path
    process: subprocess.Popen | None = None
    code: int | None = None

    def start(self, workdir: Path, run_time: int) -> None:
        index = self.params.process_index
        params_file = self.params.write(workdir / f"params-{index}.json")
        with open(self.outfile, "wb") as out:
            self.process = subprocess.Popen(
                _locust_argv(len(self.params.local_users()), run_time, workdir, self.logfile),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=_child_env(params_file),
                cwd=workdir, start_new_session=True)

    def poll(self) -> int | None:
        if self.code is None and self.process is not None:
            self.code = self.process.poll()
        return self.code

    def kill(self) -> None:
        """Kill its process group (idempotent); a process that was killed has code -9."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.code = self.process.wait()

    def evidence(self) -> str:
        # The log has locust's errors; it is empty when the locustfile failed to import, which goes to the output.
        return tail_file(self.logfile, 25) or tail_file(self.outfile, 25)


def _run_locusts(each: list[LoadParams], workdir: Path, run_time: int, description: str, timeout: float) -> None:
    """Run one locust process per parameters at once, until all exit; the first to fail stops the others (they
    would wait for it at the start line). Raises :class:`StartupFailed` with the failed process's evidence."""
    single = len(each) == 1
    locusts = [_Locust(params, workdir / ("locust.log" if single else f"locust-{params.process_index}.log"),
                       workdir / ("locust.out" if single else f"locust-{params.process_index}.out"))
               for params in each]
    with step(description) as progress:
        try:
            for locust in locusts:
                locust.start(workdir, run_time)
            deadline = time.monotonic() + timeout
            while any(locust.poll() is None for locust in locusts):
                failed = [locust for locust in locusts if locust.poll() not in (None, 0)]
                if failed or time.monotonic() >= deadline:
                    break
                time.sleep(_POLL_S)
        finally:
            for locust in locusts:
                locust.kill()
        # the process that failed on its own is the evidence, not the ones stopped because of it
        by_cause = sorted(locusts, key=lambda locust: (locust.code == 0, locust.code == -9))
        if by_cause[0].code != 0:
            progress.fail("killed at its time limit" if by_cause[0].code == -9 else f"exit code {by_cause[0].code}")
    for locust in by_cause:
        _read_outcome(locust)


def _read_outcome(locust: _Locust) -> None:
    params, logfile, code = locust.params, locust.logfile, locust.code
    if code == -9:
        raise StartupFailed("The locust load generator did not finish in time and was killed.",
                            hint=f"See {logfile}; is the broker at {params.bootstrap} reachable?",
                            details=locust.evidence())
    if code != 0:
        raise StartupFailed(f"The locust load generator exited with code {code}.",
                            hint=f"See {logfile} and the lines below.", details=locust.evidence())
    if not Path(params.ledger_path).exists():
        raise StartupFailed("The locust load generator exited without writing its ledger.",
                            hint=f"See {logfile}; the locustfile writes it when the test stops.",
                            details=locust.evidence())
