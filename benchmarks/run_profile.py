"""Where a run's seconds go: each driver attempt's start (process and JVM to a SparkSession, then to the query
started), its first batch (Python workers and data source runners starting from nothing) and its steady batches
(their median, and the median of each of Spark's phases of a batch), read from a finished run's folder (its
``results.json`` history and the driver's ``driver-events.jsonl``).

``python -m streamcert.benchmarks.run_profile RUN_FOLDER ... [--json]`` prints one table per run, then the first
batches after restarts over all of them (the SPEC's 3-s bar, split by whether the standby that took over had
finished its warm-up): what a certification's speed work measures before and after. Runs in the harness's
process, on files only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from streamcert.conformance.evidence import read_driver_events

__all__ = ["FIRST_BATCH_BAR_S", "profile_run", "first_batches_after_restarts", "main"]

#: History events after which a driver attempt starts: the run's first start, and a fault's restart of the driver.
_STARTS = ("driver-start", "fault-stop")


def profile_run(folder: Path) -> dict[str, Any]:
    """The phases of the run in ``folder``: per attempt, seconds from its start to the SparkSession (``session_s``;
    a standby's ``standby_ready_s``: how long it had waited ready, and the warm-up steps it finished, ``warmed``),
    to the query started (``query_s``, of which the
    builder's ``build_s``), to its first batch's end (``first_batch_s``) with that batch's ``addBatch``
    (``first_add_batch_ms``); the median steady batch; and the run's totals."""
    folder = Path(folder)
    result = json.loads((folder / "results.json").read_text())
    events = read_driver_events(folder / "driver" / "driver-events.jsonl")
    starts = _attempt_starts(result.get("history", []))
    attempts = []
    for attempt, began in sorted(starts.items()):
        mine = [event for event in events if event.get("attempt") == attempt]
        session = _first(mine, "session")
        built = _first(mine, "built")
        started = _first(mine, "started")
        batches = [event for event in mine if event.get("event") == "progress"]
        first = batches[0] if batches else None
        attempts.append({
            "attempt": attempt,
            "session_s": _since(session, began),
            "query_s": _since(started, session["time"] if session else None),
            "build_s": _since(built, session["time"] if session else None),
            "standby_ready_s": (session or {}).get("standby_ready_s"),
            "warmed": _warmed((session or {}).get("warm_up")),
            "warm_up_done": _warm_up_done((session or {}).get("warm_up")),
            "first_batch_s": _since(first, started["time"] if started else None),
            "first_add_batch_ms": ((first or {}).get("durationMs") or {}).get("addBatch"),
            "batches": len(batches)})
    steady = [event.get("durationMs") or {} for attempt in sorted(starts)
              for event in [e for e in events if e.get("attempt") == attempt and e.get("event") == "progress"][1:]]
    total = [phases["triggerExecution"] for phases in steady if phases.get("triggerExecution") is not None]
    return {"run": str(folder), "scenario": (result.get("scenario") or {}).get("name"),
            "duration_s": result.get("duration_s"), "cpu": result.get("cpu"), "attempts": attempts,
            "restart_overhead_s": round(sum(_sum_known(a, ("session_s", "query_s", "first_batch_s"))
                                            for a in attempts), 2),
            "steady_batch_ms": statistics.median(total) if total else None,
            "steady_phases_ms": _median_phases(steady)}


def _median_phases(batches: list[dict[str, Any]]) -> dict[str, float]:
    """Each of Spark's phases of a batch (``durationMs``: latestOffset, queryPlanning, addBatch -- the tasks and the
    sink's commit --, walCommit, commitOffsets ...), its median over the batches that report it."""
    names = sorted({name for phases in batches for name in phases})
    return {name: statistics.median(phases[name] for phases in batches if phases.get(name) is not None)
            for name in names}


def _attempt_starts(history: list[dict[str, Any]]) -> dict[int, float]:
    """Attempt -> when the harness started it: ``driver-start`` (attempt 1 or the one named), or a fault's stop
    that restarted the driver (it names the new attempt)."""
    starts: dict[int, float] = {}
    for event in history:
        if event.get("kind") in _STARTS and event.get("attempt") is not None:
            starts.setdefault(int(event["attempt"]), float(event["time"]))
    return starts


def _first(events: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((event for event in events if event.get("event") == name), None)


def _since(event: dict[str, Any] | None, began: float | None) -> float | None:
    if event is None or began is None:
        return None
    return round(float(event["time"]) - began, 2)


def _sum_known(attempt: dict[str, Any], names: tuple[str, ...]) -> float:
    return sum(attempt[name] for name in names if attempt.get(name) is not None)


def _warmed(warm_up: dict[str, Any] | None) -> str | None:
    """A standby's warm-up steps finished before it took over (``+`` when the go cut the next one short)."""
    if not warm_up:
        return None
    return ",".join(warm_up.get("steps") or {}) + ("+" if warm_up.get("cut_short") else "")


def _warm_up_done(warm_up: dict[str, Any] | None) -> bool:
    """Whether the attempt's driver was a standby that finished its warm-up before it took over."""
    return bool(warm_up) and not warm_up.get("cut_short") and not warm_up.get("error")


#: The bar a restart's first batch is held to (SPEC §9), in seconds from the query's start to its first progress.
FIRST_BATCH_BAR_S = 3.0


def first_batches_after_restarts(profiles: list[dict[str, Any]]) -> dict[str, Any]:
    """The first batch of every attempt after a run's first (a restart) that had one, over ``profiles``: how many,
    their median and longest, how many within :data:`FIRST_BATCH_BAR_S`, and the same split by whether the driver
    was a standby whose warm-up had finished."""
    after = [attempt for profile in profiles for attempt in profile["attempts"]
             if attempt["attempt"] > 1 and attempt["first_batch_s"] is not None]

    def figures(attempts: list[dict[str, Any]]) -> dict[str, Any]:
        seconds = [attempt["first_batch_s"] for attempt in attempts]
        return {"count": len(seconds), "median_s": round(statistics.median(seconds), 2) if seconds else None,
                "max_s": max(seconds) if seconds else None,
                "within_bar": sum(1 for value in seconds if value <= FIRST_BATCH_BAR_S)}

    return {**figures(after), "bar_s": FIRST_BATCH_BAR_S,
            "warm_up_done": figures([attempt for attempt in after if attempt["warm_up_done"]]),
            "warm_up_not_done": figures([attempt for attempt in after if not attempt["warm_up_done"]])}


def _first_batch_line(figures: dict[str, Any]) -> str:
    def part(name: str, values: dict[str, Any]) -> str:
        return (f"{name} {values['count']} (median {values['median_s']} s, longest {values['max_s']} s, "
                f"{values['within_bar']} within {figures['bar_s']:g} s)")

    return ("first batch after a restart: " + part("all", figures) + "; " + part("standby warmed", figures[
        "warm_up_done"]) + "; " + part("standby not warmed or none", figures["warm_up_not_done"]))


def _cpu_part(cpu: dict[str, Any] | None) -> str:
    """The run's CPU window (absent in runs made before it was recorded)."""
    if not cpu or cpu.get("busy_share") is None:
        return ""
    return (f"; the machine's {cpu['cores']} cores {cpu['busy_share']:.0%} busy ({cpu['busy_s']:g} s, "
            f"{cpu['nice_s']:g} s of it at a lowered priority)")


def _table(profile: dict[str, Any]) -> str:
    phases = ", ".join(f"{name} {ms:g}" for name, ms in profile["steady_phases_ms"].items())
    lines = [f"{profile['scenario']} ({profile['run']}): {profile['duration_s']} s, "
             f"{len(profile['attempts'])} attempt(s), restarts and first batches {profile['restart_overhead_s']} s, "
             f"steady batch median {profile['steady_batch_ms']} ms" + (f" ({phases})" if phases else "")
             + _cpu_part(profile.get("cpu")),
             "| attempt | to session s | standby ready s | warmed | to query s | of it building s | to first batch s "
             "| first addBatch ms | batches |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for attempt in profile["attempts"]:
        lines.append("| " + " | ".join(str(attempt[key]) if attempt[key] is not None else "–" for key in (
            "attempt", "session_s", "standby_ready_s", "warmed", "query_s", "build_s", "first_batch_s",
            "first_add_batch_ms", "batches")) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamcert.benchmarks.run_profile", description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER", help="a run's folder (its results.json)")
    parser.add_argument("--json", action="store_true", help="print the profiles as JSON")
    args = parser.parse_args(argv)
    missing = [str(run) for run in args.runs if not (run / "results.json").exists()]
    if missing:
        print(f"streamcert: no run's results.json in {', '.join(missing)}. Hint: name a run folder of a "
              "certification (DIR/runs/CONNECTOR/SCENARIO).", file=sys.stderr)
        return 2
    profiles = [profile_run(run) for run in args.runs]
    restarts = first_batches_after_restarts(profiles)
    print(json.dumps({"runs": profiles, "first_batches_after_restarts": restarts}, indent=2) if args.json else
          "\n\n".join([*(_table(profile) for profile in profiles), _first_batch_line(restarts)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
