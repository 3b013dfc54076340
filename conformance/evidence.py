"""Evidence checks of the catalogue (:data:`~streamcert.conformance.catalogue.EVIDENCE_CHECKS`) read from a finished
run: its history, the driver's progress events, and (``leftovers``) the sink's participant after the run.

Each returns a :class:`~streamcert.harness.verify.checkers.CheckResult` (valid / invalid / unknown, counts, first
violations), like the output checkers. A check that cannot decide returns ``unknown`` with the reason: never a
pass. Called in the harness's process by :mod:`streamcert.conformance.certify`, after each run and
(``leftovers``) while the stack still runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from streamcert.conformance.catalogue import FAULT_FAMILIES, Requirement
from streamcert.harness.verify.checkers import MAX_VIOLATIONS, UNKNOWN, CheckResult
from streamcert.harness.verify.coverage import MOMENT_KILL, coverage_grid
from streamcert.harness.verify.evidence import query_failures

__all__ = ["RunEvidence", "KILL_FAULTS", "kills_struck", "cells_reached",
           "faults_happened", "progress", "admission", "clean_stop", "assignment", "end_offsets", "option_errors",
           "leftovers", "evidence_check", "read_driver_events"]

#: The fault kinds that kill the driver.
KILL_FAULTS = FAULT_FAMILIES["driver-kill"]
#: Seconds a query may take to stop once asked (GEN-3).
STOP_BOUND_S = 30.0


class RunEvidence:
    """What a finished run left: its history, the driver's events, its scenario and the sink's declared points."""

    def __init__(self, history: list[dict[str, Any]], driver_events: list[dict[str, Any]],
                 options: Mapping[str, Any], kill_points: Mapping[str, str], leftover_probe: CheckResult | None = None,
                 output: Callable[[], pd.DataFrame | None] | pd.DataFrame | None = None,
                 option_cases: list[dict[str, Any]] | None = None,
                 acknowledged: Callable[[], set[int]] | set[int] | None = None,
                 acked_writes: dict[str, Any] | None = None, schedule: list[dict[str, Any]] | None = None,
                 scenario: Mapping[str, Any] | None = None,
                 ledger: Callable[[], pd.DataFrame | None] | pd.DataFrame | None = None):
        #: the run's fault schedule, as JSON entries (the cells its moment kills planned)
        self.schedule = list(schedule or [])
        #: the run's scenario as ``results.json`` records it (its workload, its parallelism)
        self.scenario = dict(scenario or {})
        self._ledger = ledger
        #: GEN-2's probe outcomes (:func:`streamcert.harness.options_probe.run_options_probe`), when it ran
        self.option_cases = option_cases
        #: a BRK run's ``metrics["acked_writes"]`` (:func:`~streamcert.harness.acked_writes.run_acked_writes`)
        self.acked_writes = acked_writes
        self._acknowledged = acknowledged
        self.history = history
        self.driver_events = driver_events
        self.options = dict(options)
        self.kill_points = dict(kill_points)
        self.leftover_probe = leftover_probe
        self._output = output

    @classmethod
    def of_run(cls, result: Any, workdir: Path, kill_points: Mapping[str, str],
               leftover_probe: CheckResult | None = None) -> "RunEvidence":
        """From a :class:`~streamcert.harness.results.RunResult` and its work folder (the output it was judged on is
        read when a check needs it)."""
        files = {name: Path(workdir) / file for name, file in result.evidence.items()}

        def output() -> pd.DataFrame | None:
            return pd.read_parquet(files["output"]) if "output" in files and files["output"].exists() else None

        def ledger() -> pd.DataFrame | None:
            return pd.read_parquet(files["ledger"]) if "ledger" in files and files["ledger"].exists() else None

        def acknowledged() -> set[int]:
            frame = ledger()
            return set() if frame is None else set(frame.loc[frame["status"] == "acked", "id"].tolist())

        return cls(result.history, read_driver_events(Path(workdir) / "driver" / "driver-events.jsonl"),
                   result.scenario.get("options", {}), kill_points, leftover_probe, output,
                   acknowledged=acknowledged, schedule=result.scenario.get("schedule", []),
                   scenario=result.scenario, ledger=ledger)

    def everything_delivered(self) -> bool:
        """Whether every acknowledged record reached the output (False when the run kept no ledger)."""
        if callable(self._acknowledged):
            self._acknowledged = self._acknowledged()
        acknowledged = self._acknowledged or set()
        output = self.output
        return bool(acknowledged) and output is not None and acknowledged <= set(output["id"].tolist())

    @property
    def ledger(self) -> pd.DataFrame | None:
        """What the workload wrote and what the broker said of each record (the run's ``ledger.parquet``), or None."""
        if callable(self._ledger):
            self._ledger = self._ledger()
        return self._ledger

    @property
    def output(self) -> pd.DataFrame | None:
        """Every record read back (the run's ``output.parquet``), or None when the run kept none."""
        if callable(self._output):
            self._output = self._output()
        return self._output

    def fault_starts(self) -> list[dict[str, Any]]:
        return [event for event in self.history if event["kind"] == "fault-start"]

    def progress_events(self) -> list[dict[str, Any]]:
        return [event for event in self.driver_events if event.get("event") == "progress"]


def read_driver_events(path: Path) -> list[dict[str, Any]]:
    """The driver's ``events.jsonl`` (every attempt); a line cut by a SIGKILL is skipped."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def _result(name: str, valid: bool | str, counts: dict[str, int], violations: list[dict], error: str | None = None,
            **data: Any) -> CheckResult:
    return CheckResult(name, valid, counts, violations[:MAX_VIOLATIONS], error, data)


# -- faults ---------------------------------------------------------------------------------------

def _moment(event: dict[str, Any], kill_points: Mapping[str, str]) -> str | None:
    """The moment of the batch a kill struck, or None when it struck outside any batch (or missed its point)."""
    fault = event.get("fault")
    if fault == "driver_kill_at":
        if not event.get("reached") or event.get("pending_batch") is None:
            return None
        return kill_points.get((event.get("params") or {}).get("point", ""), "window")
    if fault == "driver_kill_on_output":
        return "committing" if event.get("reached") and event.get("in_window") else None
    if fault == "driver_kill_log_held":  # with commits/N held the sink's commit had returned: the batch committing
        if not event.get("held_batch") and event.get("held_batch") != 0:
            return None
        return "committing" if event.get("log") == "commits" else "window"
    return "window" if event.get("in_window") else None


def kills_struck(evidence: RunEvidence, aim: str) -> CheckResult:
    """``fault_reached`` for a requirement whose kills must land at ``aim``: valid when at least one did.

    ``committing`` kills also count as ``window`` kills (the batch was still uncommitted). Kills that landed
    elsewhere (between batches, a point never reached) are listed; they do not spoil the run, but alone they leave
    the verdict unknown: the requirement was not exercised.
    """
    kills = [event for event in evidence.fault_starts() if event.get("fault") in KILL_FAULTS]
    errors = [event for event in evidence.history if event["kind"] == "fault-error"
              and event.get("fault") in KILL_FAULTS and event.get("phase") == "start"]
    moments = [_moment(event, evidence.kill_points) for event in kills]
    struck = sum(1 for moment in moments if moment == aim or (aim == "window" and moment == "committing"))
    elsewhere = [{"fault": event.get("fault"), "point": (event.get("params") or {}).get("point"),
                  "phase": event.get("phase"), "pending_batch": event.get("pending_batch"),
                  "latest_commit": event.get("latest_commit")}
                 for event, moment in zip(kills, moments, strict=True) if moment != aim]
    elsewhere += [{"fault": event.get("fault"), "error": event.get("error")} for event in errors]
    counts = {"kills": len(kills), "struck": struck, "elsewhere": len(elsewhere) - len(errors),
              "errors": len(errors)}
    if struck:
        return _result("fault_reached", True, counts, elsewhere, aim=aim)
    return _result("fault_reached", UNKNOWN, counts, elsewhere,
                   f"no driver kill struck the {aim} moment of a batch: the requirement was not exercised", aim=aim)


def cells_reached(evidence: RunEvidence, moments: tuple[str, ...] | None) -> CheckResult:
    """``fault_reached`` for a requirement exercised by kills timed by observed moments: valid when every cell
    (moment, batch class) the run's schedule planned, of ``moments`` (None: all), was reached by a kill that landed;
    unknown, listing the missing cells, otherwise. The data carries the run's whole coverage grid."""
    grid = coverage_grid(evidence.schedule, evidence.history)
    needed, missing = grid.planned_for(moments), grid.missing(moments)
    errors = [{"fault": event.get("fault"), "error": event.get("error")} for event in evidence.history
              if event["kind"] == "fault-error" and event.get("fault") in KILL_FAULTS]
    counts = {"planned_cells": len(needed), "reached_cells": len(needed) - len(missing), "missing_cells": len(missing),
              "kills": sum(grid.reached.values()), "errors": len(errors)}
    violations = [{"cell": f"{moment}@{batch_class}", "problem": "no kill reached it"}
                  for moment, batch_class in missing] + errors
    data = {"coverage": grid.as_dict(), "moments": list(moments) if moments else None}
    if not needed:
        return _result("fault_reached", UNKNOWN, counts, violations, "the run planned no kill at the moments this "
                       "requirement needs", **data)
    if missing or errors:
        return _result("fault_reached", UNKNOWN, counts, violations, f"{len(missing)} planned cell(s) of the kill "
                       "grid were not reached: the requirement was not exercised everywhere it must be", **data)
    return _result("fault_reached", True, counts, [], **data)


def faults_happened(evidence: RunEvidence, kinds: tuple[str, ...]) -> CheckResult:
    """``fault_reached`` for a requirement that needs faults of ``kinds``: valid when at least one started and none
    of those kinds failed to start; unknown otherwise."""
    started = [event for event in evidence.fault_starts() if event.get("fault") in kinds]
    errors = [{"fault": event.get("fault"), "phase": event.get("phase"), "error": event.get("error")}
              for event in evidence.history if event["kind"] == "fault-error" and event.get("fault") in kinds]
    # A cluster fault aimed at a failover (the leader moved, the ISR shrank, a new controller) that metadata did not
    # show did not exercise the requirement. (Other faults' ``reached`` says where a kill landed; kills_struck
    # judges that, for the requirements that aim them.)
    unseen = [{"fault": event.get("fault"), "node": event.get("node"), "after": event.get("after")}
              for event in started if event.get("reached") is False and str(event.get("fault")).startswith("node_")]
    # a failover aimed at a moment: its moment reached, and its own effect seen in metadata (what it struck says)
    unseen += [{"fault": event.get("fault"), "struck": event.get("struck_fault"), "after": event["struck"].get("after")}
               for event in started if isinstance(event.get("struck"), dict)
               and event["struck"].get("reached") is False]
    # a task kill timed by a moment that never landed in it killed no task: the run did not fail an attempt there
    # (one that watched its batches and found its moment absent, output shown by tasks, says so, and is no miss)
    unseen += [{"fault": event.get("fault"), "moment": event.get("moment"), "strikes": len(event.get("strikes", []))}
               for event in started if event.get("reached") is False and str(event.get("fault")).endswith("_moment")
               and not event.get("absent")]
    landed = [event for event in started if not event.get("absent")]
    counts = {"started": len(started), "errors": len(errors), "unseen": len(unseen)}
    if landed and not errors and not unseen:
        return _result("fault_reached", True, counts, [])
    reason = (f"{len(errors)} fault(s) failed: the run did not exercise all it was meant to" if errors else
              f"{len(unseen)} fault(s) did not land: a failover's effect (a new leader, a shrunk ISR, a new "
              "controller) not seen in metadata, or a task kill that found no task at its moment" if unseen else
              f"none of the faults it needs ({', '.join(kinds)}) happened")
    return _result("fault_reached", UNKNOWN, counts, errors + unseen, reason)


# -- the query's own reports ----------------------------------------------------------------------

def progress(evidence: RunEvidence) -> CheckResult:
    """Batches report their input rows and durations, batches with input happened, and after each fault healed
    the query reported progress again (it did not stall) — unless it had nothing left to read: every acknowledged
    record was delivered (Spark reports no batch when there is no new data)."""
    events = evidence.progress_events()
    malformed = [{"batchId": e.get("batchId"), "attempt": e.get("attempt")} for e in events
                 if not isinstance(e.get("numInputRows"), int) or not isinstance(e.get("durationMs"), dict)]
    with_input = sum(1 for e in events if (e.get("numInputRows") or 0) > 0)
    stalls = []
    stops = [event for event in evidence.history if event["kind"] == "fault-stop"]
    for stop in stops if stops and not evidence.everything_delivered() else ():
        if not any(e.get("time", 0) > stop["time"] for e in events):
            stalls.append({"fault": stop.get("fault"), "stopped_at": stop["time"],
                           "detail": "no progress reported after the fault healed"})
    stalls += _waited_in_vain(evidence, events)
    counts = {"progress_events": len(events), "batches_with_input": with_input, "malformed": len(malformed),
              "stalls": len(stalls)}
    if not events:
        return _result("progress", False, counts, [], "the query reported no progress at all")
    valid = with_input > 0 and not malformed and not stalls
    return _result("progress", valid, counts, malformed + stalls,
                   None if valid else "progress was missing, malformed, or stopped after a fault")


def _waited_in_vain(evidence: RunEvidence, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stalls seen by a fault that waited for the query to read (``add_partitions`` or ``rescale`` with
    ``after_input_read_s``):
    its attempt read nothing while the input held acknowledged records that no batch had read yet (more written
    before the wait than all batches reported reading by its end; a replayed batch counts twice, so this errs
    towards no stall)."""
    ledger = evidence.ledger
    if ledger is None or "produced_at" not in ledger.columns:
        return []
    stalls = []
    for event in evidence.fault_starts():
        if event.get("attempt_read_input") is not False:
            continue
        ended = float(event.get("added_at", event["time"]))
        began = ended - float(event.get("waited_s") or 0)
        written = int(((ledger["status"] == "acked") & (ledger["produced_at"] < began)).sum()) \
            if "status" in ledger.columns else 0
        read = sum(int(e.get("numInputRows") or 0) for e in events if float(e.get("time") or 0) <= ended)
        if written > read:
            stalls.append({"fault": event.get("fault"), "attempt": event.get("waited_for_attempt"),
                           "detail": f"the attempt read nothing in {event.get('waited_s')} s while {written - read} "
                                     "acknowledged records were unread"})
    return stalls


def admission(evidence: RunEvidence) -> CheckResult:
    """No batch read more rows than the scenario's ``max_records_per_batch``, and the backlog took several batches."""
    limit = evidence.options.get("max_records_per_batch")
    events = [e for e in evidence.progress_events() if isinstance(e.get("numInputRows"), int)]
    if limit is None:
        return _result("admission", UNKNOWN, {"batches": len(events)}, [], "the run set no per-batch limit")
    over = [{"batchId": e.get("batchId"), "attempt": e.get("attempt"), "numInputRows": e["numInputRows"],
             "limit": int(limit)} for e in events if e["numInputRows"] > int(limit)]
    with_input = sum(1 for e in events if e["numInputRows"] > 0)
    counts = {"batches": len(events), "batches_with_input": with_input, "over_limit": len(over),
              "largest_batch": max((e["numInputRows"] for e in events), default=0), "limit": int(limit)}
    if over:
        return _result("admission", False, counts, over, f"{len(over)} batch(es) read more than {limit} rows")
    if with_input < 2:
        return _result("admission", UNKNOWN, counts, [], "the backlog fitted in one batch: the limit was not tested")
    return _result("admission", True, counts, [])


def clean_stop(evidence: RunEvidence) -> CheckResult:
    """The query asked to stop at the end of the run exited within :data:`STOP_BOUND_S`, with code 0, its last
    batch committed, and nothing of its processes left behind."""
    stops = [event for event in evidence.history if event["kind"] == "driver-stop"]
    if not stops or not stops[-1].get("running"):
        return _result("clean_stop", UNKNOWN, {}, [], "the query was not running at the end of the run: no stop "
                                                      "was asked of it")
    stop = stops[-1]
    problems = []
    if not stop.get("exited"):
        problems.append({"problem": "did not exit", "waited_s": stop.get("seconds")})
    elif stop.get("seconds", 0) > STOP_BOUND_S:
        problems.append({"problem": "slow", "seconds": stop.get("seconds"), "bound_s": STOP_BOUND_S})
    if stop.get("exited") and stop.get("exit_code") not in (0,):
        problems.append({"problem": "exit code", "exit_code": stop.get("exit_code")})
    if stop.get("pending_batch") is not None:
        problems.append({"problem": "batch left uncommitted", "pending_batch": stop.get("pending_batch")})
    if stop.get("leftover_processes"):
        problems.append({"problem": "processes left", "count": stop.get("leftover_processes")})
    counts = {"seconds_ms": int(1000 * (stop.get("seconds") or 0)), "problems": len(problems)}
    return _result("clean_stop", not problems, counts, problems,
                   None if not problems else "the query did not stop cleanly")


def assignment(evidence: RunEvidence) -> CheckResult:
    """How the source assigned input partitions to reader tasks, read from the file sink it wrote into: one data
    file is one task's output in one batch (``file``, ``batch``), and its rows carry their ``source_partition``.

    Valid when, in every batch, each partition was read by one task only; in every batch where every partition
    had records, tasks' partition counts differ by at most one; and batches with the same number of reading tasks
    grouped the partitions the same way (across restarts too). Unknown when the output does not show it (no
    ``source_partition`` column, or no batch in which every partition had records).
    """
    frame = evidence.output
    if frame is None or frame.empty or not {"file", "batch", "source_partition"} <= set(frame.columns):
        return _result("assignment", UNKNOWN, {}, [], "the output does not show which task read which partition "
                                                      "(the source emits no partition column, or the sink is not "
                                                      "Spark's file sink)")
    tasks = frame.groupby(["batch", "file"])["source_partition"].agg(lambda p: frozenset(int(x) for x in p))
    partitions = frozenset(int(p) for p in frame["source_partition"].unique())
    split, unbalanced, groupings = [], [], {}
    for batch, files in tasks.groupby(level="batch"):
        sets = list(files)
        seen: dict[int, int] = {}
        for task_partitions in sets:
            for partition in task_partitions:
                seen[partition] = seen.get(partition, 0) + 1
        split += [{"batch": int(batch), "partition": p, "tasks": n} for p, n in seen.items() if n > 1]
        if frozenset(seen) != partitions:
            continue  # a partition without records this batch: its task's load is not visible
        sizes = [len(task_partitions) for task_partitions in sets]
        if max(sizes) - min(sizes) > 1:
            unbalanced.append({"batch": int(batch), "partitions_per_task": sorted(sizes)})
        groupings.setdefault(len(sets), {}).setdefault(frozenset(sets), []).append(int(batch))
    changed = [{"tasks": count, "groupings": [{"batches": batches[:5], "tasks_read": sorted(sorted(s) for s in g)}
                                              for g, batches in seen_groupings.items()]}
               for count, seen_groupings in groupings.items() if len(seen_groupings) > 1]
    judged = sum(len(batches) for seen_groupings in groupings.values() for batches in seen_groupings.values())
    counts = {"batches": int(tasks.index.get_level_values("batch").nunique()), "full_batches": judged,
              "partitions": len(partitions), "split_partitions": len(split), "unbalanced_batches": len(unbalanced),
              "changed_assignments": len(changed)}
    violations = split + unbalanced + changed
    if violations:
        return _result("assignment", False, counts, violations, "partitions were split between tasks, tasks were "
                       "unbalanced, or the same parallelism assigned partitions differently")
    if not judged:
        return _result("assignment", UNKNOWN, counts, [], "no batch had records from every partition")
    return _result("assignment", True, counts, [])


def end_offsets(evidence: RunEvidence) -> CheckResult:
    """A bounded (AvailableNow) run ended by itself, without error, and read nothing produced after it started:
    the records the run produced once the first batch committed (outside the ledger, ids from
    :data:`~streamcert.harness.scenario.UNRECORDED_ID_BASE`) never reach the output. That it read everything up to
    its start is the ``lost`` check's part."""
    from streamcert.harness.scenario import UNRECORDED_ID_BASE

    ended = [event for event in evidence.history if event["kind"] == "driver-ended"]
    after = [event for event in evidence.history if event["kind"] == "load-after-start"]
    if not ended or not after or not after[-1].get("acknowledged"):
        return _result("end_offsets", UNKNOWN, {}, [], "the run was not bounded, or produced nothing after its "
                                                       "start: the end offsets were not tested")
    output = evidence.output
    beyond = output.loc[output["id"] >= UNRECORDED_ID_BASE, "id"] if output is not None and not output.empty else []
    end = ended[-1]
    problems = []
    if not end.get("ended_by_itself"):
        problems.append({"problem": "the query did not end by itself", "waited_s": end.get("seconds")})
    elif end.get("error") or end.get("exit_code") not in (0,):
        problems.append({"problem": "the query ended with an error", "error": end.get("error"),
                         "exit_code": end.get("exit_code")})
    if len(beyond):
        problems.append({"problem": "read records produced after the start", "count": int(len(beyond)),
                         "first_ids": [int(i) for i in list(beyond)[:5]]})
    counts = {"produced_after_start": int(after[-1]["acknowledged"]), "read_after_start": int(len(beyond)),
              "seconds_to_end_ms": int(1000 * (end.get("seconds") or 0))}
    return _result("end_offsets", not problems, counts, problems,
                   None if not problems else "the bounded run did not end exactly at its start's end offsets")


def _names(message: str, option: str) -> bool:
    """Whether ``message`` names ``option``: the whole name, or (for a pass-through setting such as
    ``kafka.key.serializer``) the setting without its prefix, case-insensitive."""
    message = message.lower()
    return option.lower() in message or ("." in option and option.lower().split(".", 1)[1] in message)


def option_errors(evidence: RunEvidence) -> CheckResult:
    """Each bad option (and the unknown one) was refused before the first batch committed, by an error that names
    the option (case-insensitive)."""
    cases = evidence.option_cases
    if cases is None:
        return _result("option_errors", UNKNOWN, {}, [], "the options were not probed")
    problems, undecided = [], []
    for outcome in cases:
        [(name, value)] = outcome["case"].items()
        if outcome.get("refused") is None:
            undecided.append({"option": name, "value": value, "problem": outcome.get("message")})
        elif not outcome["refused"]:
            problems.append({"option": name, "value": value, "problem": outcome.get("message")})
        elif not _names(str(outcome.get("message", "")), name):
            problems.append({"option": name, "value": value, "problem": "refused by an error that does not name it",
                             "stage": outcome.get("stage"), "message": str(outcome.get("message"))[:300]})
    counts = {"cases": len(cases), "refused_clearly": len(cases) - len(problems) - len(undecided),
              "not_refused_clearly": len(problems), "undecided": len(undecided)}
    if problems:
        return _result("option_errors", False, counts, problems, f"{len(problems)} bad option(s) were accepted or "
                                                                  "refused without being named")
    if undecided or not cases:
        return _result("option_errors", UNKNOWN, counts, undecided, "the probe did not finish")
    return _result("option_errors", True, counts, [])


def leftovers(evidence: RunEvidence) -> CheckResult:
    """What the sink's participant holds after the run (probed by the certification while the stack runs)."""
    if evidence.leftover_probe is None:
        return _result("leftovers", UNKNOWN, {}, [], "the participant was not probed after the run")
    return evidence.leftover_probe


def fencing(evidence: RunEvidence) -> CheckResult:
    """A zombie task attempt happened: an executor froze while one of its Python workers ran a task, the batch
    then pending committed without it (Spark replaced the attempt), and the frozen processes ran again afterwards.
    Whether the zombie's writes stayed invisible is the output checks' and the leftover probe's to say; this
    check says whether there was a zombie to fence. Unknown when none of the run's ``task_zombie`` faults made
    one (no task was caught, Spark lost no task attempt with the executor, or did not commit without it in
    time)."""
    starts = [e for e in evidence.fault_starts() if e.get("fault") == "task_zombie"]
    stops = [e for e in evidence.history if e["kind"] == "fault-stop" and e.get("fault") == "task_zombie"]
    zombies, missed = 0, []
    for start, stop in zip(starts, stops, strict=False):
        made = bool(start.get("busy_workers")) and bool(stop.get("replaced")) and bool(stop.get("alive_at_thaw"))
        zombies += made
        if not made:
            missed.append({"executor_ids": start.get("executor_ids"), "busy_workers": start.get("busy_workers"),
                           "pending_batch": start.get("pending_batch"), "declared_lost": start.get("declared_lost"),
                           "lost_tasks": stop.get("lost_tasks"), "replaced": stop.get("replaced"),
                           "alive_at_thaw": stop.get("alive_at_thaw")})
    counts = {"freezes": len(starts), "zombies": zombies, "missed": len(missed)}
    if zombies:
        return _result("fencing", True, counts, missed)
    return _result("fencing", UNKNOWN, counts, missed,
                   "no zombie task attempt happened (no executor was frozen while it ran a task and then replaced): "
                   "the requirement was not exercised")


def loss_seen(evidence: RunEvidence) -> CheckResult:
    """BRK-2: under unsafe settings the lost check found acknowledged records missing. Nothing lost is a finding
    (invalid): the harness failed to see what those settings let happen."""
    run = evidence.acked_writes
    if run is None:
        return _result("loss_seen", UNKNOWN, {}, [], "the run wrote no acknowledged-writes result")
    lost = run.get("lost")
    counts = {"acknowledged": run.get("acknowledged", 0), "lost": lost or 0}
    if not isinstance(lost, int):
        return _result("loss_seen", UNKNOWN, counts, [], "the lost check could not decide")
    if lost > 0:
        return _result("loss_seen", True, counts, [])
    return _result("loss_seen", False, counts, [{"kind": "no_loss_seen", "acknowledged": run.get("acknowledged")}],
                   "no acknowledged record was lost: the harness did not see the loss the unsafe settings allow")


_EVIDENCE: dict[str, Callable[[RunEvidence], CheckResult]] = {
    "progress": progress, "admission": admission, "clean_stop": clean_stop, "leftovers": leftovers,
    "assignment": assignment, "end_offsets": end_offsets, "option_errors": option_errors,
    "fencing": fencing, "loss_seen": loss_seen, "query_failures": lambda run: query_failures(run.driver_events),
}


def evidence_check(name: str, evidence: RunEvidence, requirement: Requirement) -> CheckResult:
    """The evidence check ``name`` for ``requirement`` on one run. ``fault_reached`` asks what the requirement
    says it needs: every planned cell of its ``moments`` in a run whose kills are timed by observed moments, a kill
    at its ``aim`` in a run whose kills are not, else any of its faults happening."""
    if name == "fault_reached":
        if requirement.moments and any(entry.get("fault") == MOMENT_KILL for entry in evidence.schedule):
            return cells_reached(evidence, requirement.moments)
        if requirement.aim:
            return kills_struck(evidence, requirement.aim)
        return faults_happened(evidence, requirement.faults)
    return _EVIDENCE[name](evidence)
