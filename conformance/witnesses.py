"""Witnesses of the catalogue (:data:`~streamcert.conformance.catalogue.WITNESSES`): did the events a requirement's
procedure must produce happen in a run?

A check that passes on a run where what it tests never happened proves nothing: a source that starts partitions added
mid-run at their end passes a lost check when nothing was written into them. Each witness reads one finished run's
evidence and returns a :class:`~streamcert.harness.verify.checkers.CheckResult`: valid when the event happened
(with counts of what was seen), ``unknown`` with what was missing otherwise; never invalid (a bug the event exposes is
its checks' to find). A requirement's witness must be seen in at least one of its runs (:func:`missing_witnesses`).
Called in the harness's process by :mod:`streamcert.conformance.verdicts`, after the runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamcert.conformance.catalogue import WITNESSES, Requirement
from streamcert.conformance.evidence import RunEvidence
from streamcert.harness.faults.at_moment import MOMENT_FAULTS
from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["WITNESS_FINDERS", "witness", "added_partition_read", "rescaled_restart",
           "replay_after_commit_returned", "cut_in_flight", "idle_reader_tasks_read", "missing_witnesses"]

#: The fault kind that kills the driver with a checkpoint write held (:mod:`streamcert.harness.faults.held_kill`).
_HELD_KILL = "driver_kill_log_held"


def _seen(name: str, counts: dict[str, int], missing: str | None, **data: Any) -> CheckResult:
    """Seen (valid) when nothing is ``missing``; unknown with what was missing otherwise."""
    return CheckResult(name, True if missing is None else UNKNOWN, counts, [], missing, data)


def added_partition_read(evidence: RunEvidence) -> CheckResult:
    """SRC-5: an ``add_partitions`` fault grew the input with the driver frozen until records were committed into the
    added partitions (so the query found them with records in them: ``written_before_found``), records acknowledged
    into them after they were added (the workload's ``partitions`` are the ones the topic was created with), and the
    output holds some of them. Without the freeze a source that starts a found partition at its end can pass by luck:
    the records would have to beat its discovery."""
    name = "added_partition_read"
    adds = [e for e in evidence.fault_starts() if e.get("fault") == "add_partitions"]
    if not adds:
        return _seen(name, {"partitions_added": 0}, "no partition was added to the input while the query ran")
    before_found = sum(int(o) for e in adds for o in (e.get("written_before_found") or {}).values())
    created = int((evidence.scenario.get("workload") or {}).get("partitions") or 0)
    ledger = evidence.ledger
    if ledger is None or "partition" not in ledger.columns or not created:
        return _seen(name, {"partitions_added": len(adds)}, "the run kept no ledger of the partitions it wrote into")
    added_at = min(float(e.get("added_at", e["time"])) for e in adds)
    into_added = ledger[(ledger["status"] == "acked") & (ledger["partition"] >= created)
                        & (ledger["produced_at"] >= added_at)]
    output = evidence.output
    read = 0 if output is None else int(into_added["id"].isin(output["id"]).sum())
    counts = {"partitions_added": len(adds), "written": len(into_added), "before_found": before_found, "read": read}
    partitions = sorted(int(p) for p in into_added["partition"].unique())
    if into_added.empty:
        return _seen(name, counts, f"no record was acknowledged into the partitions added after partition "
                                   f"{created - 1} once they existed: the new partitions were never written into")
    if not before_found:
        return _seen(name, counts, "no record was in the added partitions when the query could first find them "
                                   "(the driver was not held until they were written): reading them from the "
                                   "earliest was not tested", partitions=partitions)
    if not read:
        return _seen(name, counts, f"none of the {len(into_added)} records written into the added partitions "
                                   f"{partitions} was read back", partitions=partitions)
    return _seen(name, counts, None, partitions=partitions)


def rescaled_restart(evidence: RunEvidence) -> CheckResult:
    """SRC-4, SNK-8, AGG-5: ``rescale`` faults restarted the query with another parallelism than it ran with, and
    the attempt each started committed a batch that read input (a progress report of that attempt with rows): a
    raise that a later rescale ended before it read tested nothing of the raise."""
    name = "rescaled_restart"
    parallelism = evidence.scenario.get("parallelism")
    stops = [e for e in evidence.history if e["kind"] == "fault-stop" and e.get("fault") == "rescale"]
    read_by_attempt: dict[Any, int] = {}
    for event in evidence.progress_events():
        read_by_attempt[event.get("attempt")] = read_by_attempt.get(event.get("attempt"), 0) + int(
            event.get("numInputRows") or 0)
    rescales = []
    for stop in stops:
        changed = stop.get("parallelism") is not None and stop.get("parallelism") != parallelism
        rescales.append({"from": parallelism, "to": stop.get("parallelism"), "attempt": stop.get("attempt"),
                         "rows_read": read_by_attempt.get(stop.get("attempt"), 0), "changed": changed})
        parallelism = stop.get("parallelism", parallelism)
    changed = [r for r in rescales if r["changed"]]
    unread = [r for r in changed if r["rows_read"] == 0]
    counts = {"rescales": len(stops), "witnessed": len(changed) - len(unread)}
    if changed and not unread:
        return _seen(name, counts, None, rescales=rescales)
    why = ("the query was never restarted with another parallelism" if not changed else
           "no attempt started with another parallelism read input" if len(unread) == len(changed) else
           "the attempt(s) started with parallelism " + ", ".join(str(r["to"]) for r in unread)
           + " read no input before the next restart")
    return _seen(name, counts, why, rescales=rescales)


def idle_reader_tasks_read(evidence: RunEvidence) -> CheckResult:
    """SRC-10: an attempt that ran with more reader tasks than the input had partitions committed a batch that read
    input (some of its tasks had nothing to read, and the query went on). An attempt's parallelism is the scenario's
    for the first and a ``rescale``'s for the one it started; the partitions are the workload's until an
    ``add_partitions`` grew them."""
    name = "idle_reader_tasks_read"
    parallelism = {1: evidence.scenario.get("parallelism")}
    for stop in evidence.history:
        if stop["kind"] == "fault-stop" and stop.get("fault") == "rescale" and stop.get("attempt") is not None:
            parallelism[stop["attempt"]] = stop.get("parallelism")
    growths = sorted((float(e.get("added_at", e["time"])), int((e.get("params") or {}).get("count") or 0))
                     for e in evidence.fault_starts() if e.get("fault") == "add_partitions")
    created = int((evidence.scenario.get("workload") or {}).get("partitions") or 0)

    def partitions_at(when: float) -> int:
        return max([created, *(count for added_at, count in growths if added_at <= when)])

    attempts: dict[Any, dict[str, Any]] = {}
    for event in evidence.progress_events():
        tasks, rows = parallelism.get(event.get("attempt")), int(event.get("numInputRows") or 0)
        if tasks is None or not created:
            continue
        seen = attempts.setdefault(event.get("attempt"), {"attempt": event.get("attempt"), "reader_tasks": tasks,
                                                          "partitions": partitions_at(float(event.get("time") or 0)),
                                                          "rows_read": 0})
        seen["rows_read"] += rows
    idle = [a for a in attempts.values() if a["reader_tasks"] > a["partitions"]]
    witnessed = [a for a in idle if a["rows_read"] > 0]
    counts = {"attempts_with_idle_tasks": len(idle), "witnessed": len(witnessed)}
    if witnessed:
        return _seen(name, counts, None, attempts=list(attempts.values()))
    why = ("no attempt that reported progress ran with more reader tasks than the input's partitions" if not idle
           else "no attempt with more reader tasks than partitions read input")
    return _seen(name, counts, why, attempts=list(attempts.values()))


def replay_after_commit_returned(evidence: RunEvidence) -> CheckResult:
    """SNK-4, AGG-4: a ``driver_kill_log_held`` kill held Spark's write of ``commits/N`` (so the sink's commit of
    batch N had returned) and killed the driver there, and a later attempt ran batch N again (a progress report of
    batch N after the kill)."""
    name = "replay_after_commit_returned"
    kills = [e for e in evidence.fault_starts() if e.get("fault") == _HELD_KILL and e.get("log") == "commits"]
    held = [e for e in kills if e.get("held_batch") is not None]  # whatever class its batch turned out to be
    replays = []
    for kill in held:
        again = [e for e in evidence.progress_events()
                 if e.get("batchId") == kill["held_batch"] and float(e.get("time") or 0) > float(kill["time"])]
        replays.append({"batch": kill["held_batch"], "batch_class": kill.get("batch_class"),
                        "replayed_by_attempt": again[0].get("attempt") if again else None})
    witnessed = [r for r in replays if r["replayed_by_attempt"] is not None]
    counts = {"held_kills": len(kills), "held": len(held), "replayed": len(witnessed)}
    if witnessed:
        return _seen(name, counts, None, replays=replays)
    why = ("no driver kill held Spark's write of commits/N (no driver_kill_log_held of the commits log)" if not kills
           else "no held write of commits/N was reached (the query logged no batch while the kill watched)"
           if not held else "no attempt after a held kill ran the held batch again")
    return _seen(name, counts, why, replays=replays)


def _in_flight_at(strike: dict[str, Any]) -> list[str]:
    """What a strike found in flight on its link: each PostgreSQL statement running (by kind), each connection
    awaiting an answer (by the process that owns it)."""
    statements = strike.get("statements") or []
    running = [f"statement {s['kind']}" for s in statements if s.get("state") == "active"]
    waiting = [f"request of {c.get('process') or 'a process'}" for c in strike.get("in_flight") or []]
    # a statement the server finished in a transaction still open, while a client awaits an answer: done on the
    # server, not yet heard of by the client (which of the waiting clients, the proxy between them hides)
    answered = [f"answer to {s['kind']} (done, transaction open)" for s in statements
                if s.get("state") == "idle in transaction"] if waiting else []
    return running + waiting + answered


def cut_in_flight(evidence: RunEvidence) -> CheckResult:
    """SNK-7, SRC-8: every network cut, server kill and leader failover the run aimed at a moment of the query
    (:mod:`streamcert.harness.faults.at_moment`) struck in that moment, and at least one of them with something in
    flight on the link: a statement the server was running, or a client connection awaiting its answer (a connector
    may not use the link in every moment: those cells say nothing was in flight). What each struck is listed
    (``cells``)."""
    name = "cut_in_flight"
    aimed = [e for e in evidence.fault_starts() if e.get("fault") in MOMENT_FAULTS]
    if not aimed:
        return _seen(name, {"aimed": 0}, "no network cut, server kill or failover was aimed at a moment of the query")
    cells, misses = [], []
    for event in aimed:
        label = f"{event.get('struck_fault')} at {event.get('moment')}"
        strike = next((s for s in event.get("strikes") or [] if s.get("landed") and s.get("wanted")), None)
        if strike is None:
            misses.append(f"{label}: the moment was not reached")
            continue
        found = _in_flight_at(strike)
        if not found and strike.get("in_flight_unknown"):
            misses.append(f"{label}: {strike['in_flight_unknown']}")
            continue
        cells.append({"fault": event.get("struck_fault"), "moment": event.get("moment"), "batch": strike.get("batch"),
                      "in_flight": sorted(set(found))})
    in_flight = [cell for cell in cells if cell["in_flight"]]
    counts = {"aimed": len(aimed), "struck_in_flight": len(in_flight)}
    if not misses and not in_flight:
        misses = [f"{cell['fault']} at {cell['moment']}: nothing was in flight on the link" for cell in cells]
    return _seen(name, counts, "; ".join(misses) or None, cells=cells)


WITNESS_FINDERS: dict[str, Callable[[RunEvidence], CheckResult]] = {
    "added_partition_read": added_partition_read, "rescaled_restart": rescaled_restart,
    "replay_after_commit_returned": replay_after_commit_returned, "cut_in_flight": cut_in_flight,
    "idle_reader_tasks_read": idle_reader_tasks_read,
}


def witness(name: str, evidence: RunEvidence) -> CheckResult:
    """Whether the run shows witness ``name`` (:data:`~streamcert.conformance.catalogue.WITNESSES`)."""
    return WITNESS_FINDERS[name](evidence)


def missing_witnesses(requirement: Requirement, found: dict[str, list[tuple[str, CheckResult]]]) -> list[str]:
    """The requirement's witnesses that none of its runs showed, each as ``name missing: why`` (each run's reason);
    ``found`` maps a witness to ``(run, result)`` for each of its runs."""
    missing = []
    for name in requirement.witnesses:
        results = found.get(name, [])
        if any(result.valid is True for _, result in results):
            continue
        why = "; ".join(f"{run}: {result.error}" for run, result in results) or "no run of it completed"
        missing.append(f"witness {name} missing ({WITNESSES[name]}): {why}")
    return missing
