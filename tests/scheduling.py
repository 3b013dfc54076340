"""The order the default test run hands its tests to pytest-xdist's workers: each worker's share starts with its
longest tests and ends with short ones, and the shares take about as long, so that no worker ends the run alone on
a long test while the other cores idle.

pytest-xdist's ``worksteal`` scheduler gives each worker a contiguous slice of the collection, by count (the first
``n // workers`` tests to the first, and so on), and a worker that runs dry steals the last half of the longest
queue. In collection order the kill-run tests (two to four minutes each) fall wherever their module does, and one
left at the end of a slice ran alone while the other core waited. Here the tests are dealt out longest first to
whichever slice has the least work so far (the greedy longest-processing-time rule), each slice keeps its longest
first, and the slices are evened out by count with the shortest tests so that xdist's cut falls where ours does.

Tests that share a fixture broader than a function and narrower than the session (a module's 3-node Kafka
cluster) stay together in their collection order: split up, the fixture would be set up again for each part.

A worker's own config says dist "no" (xdist sets it), so the controller passes the scheduler in ``workerinput``
(``pytest_configure_node`` in ``tests/conftest.py``). The durations come from ``durations.json`` beside this file,
written from a run's JUnit XML by ``python -m tests.scheduling JUNIT_XML``; a test it does not know counts as
:data:`UNKNOWN_S`.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["DURATIONS_FILE", "UNKNOWN_S", "load_durations", "slice_sizes", "scheduled_order", "durations_from_junit",
           "main"]

DURATIONS_FILE = Path(__file__).with_name("durations.json")
#: Seconds assumed for a test the durations file does not name (a new one): about what a small integration test takes.
UNKNOWN_S = 2.0


def load_durations(path: Path | None = None) -> dict[str, float]:
    """Seconds per test node ID (from ``path``, else ``$STREAMCERT_TEST_DURATIONS``, else :data:`DURATIONS_FILE`);
    empty when the file is missing or unreadable (the run keeps collection order)."""
    path = path or Path(os.environ.get("STREAMCERT_TEST_DURATIONS") or DURATIONS_FILE)
    try:
        return {str(node): float(seconds) for node, seconds in json.loads(path.read_text())["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def slice_sizes(count: int, workers: int) -> list[int]:
    """How many tests xdist's ``worksteal`` hands each of ``workers`` at the start: each in turn takes the pending
    count divided by the workers left (``WorkStealingScheduling.check_schedule``)."""
    sizes, remaining = [], count
    for index in range(workers):
        size = remaining // (workers - index)
        sizes.append(size)
        remaining -= size
    return sizes


def _units(entries: Sequence[tuple[str, str | None]]) -> list[list[int]]:
    """Indices of ``entries`` grouped: those with the same unit key together (in collection order), the others alone."""
    grouped: dict[str, list[int]] = {}
    units: list[list[int]] = []
    for index, (_node, unit) in enumerate(entries):
        if unit is None:
            units.append([index])
        elif unit in grouped:
            grouped[unit].append(index)
        else:
            grouped[unit] = [index]
            units.append(grouped[unit])
    return units


def scheduled_order(entries: Sequence[tuple[str, str | None]], durations: Mapping[str, float],
                    workers: int) -> list[int]:
    """The order (indices into ``entries``) to hand the tests to ``workers`` worksteal workers. ``entries`` are
    (node ID, unit key) in collection order; tests of one unit key stay together, in their order. With one worker,
    simply the longest units first."""
    units = _units(entries)
    seconds = [sum(durations.get(entries[i][0], UNKNOWN_S) for i in unit) for unit in units]
    by_length = sorted(range(len(units)), key=lambda u: (-seconds[u], units[u][0]))
    if workers <= 1:
        return [index for u in by_length for index in units[u]]
    slices: list[list[int]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for u in by_length:
        target = min(range(workers), key=lambda w: (loads[w], w))
        slices[target].append(u)
        loads[target] += seconds[u]
    _even_out(slices, units, seconds, slice_sizes(len(entries), workers))
    return [index for share in slices for u in share for index in units[u]]


def _even_out(slices: list[list[int]], units: list[list[int]], seconds: list[float], sizes: list[int]) -> None:
    """Make each slice (unit indices, longest first) hold ``sizes`` tests, so that xdist's cut by count falls where
    ours does: the shortest unit of a slice with too many (one that does not overshoot: a unit of several tests may)
    moves to one with too few, keeping both longest first."""

    def count(w: int) -> int:
        return sum(len(units[u]) for u in slices[w])

    for _ in range(len(units)):
        givers = [w for w in range(len(slices)) if count(w) > sizes[w]]
        takers = [w for w in range(len(slices)) if count(w) < sizes[w]]
        if not givers or not takers:
            return
        giver, taker = givers[0], takers[0]
        room = max(1, min(count(giver) - sizes[giver], sizes[taker] - count(taker)))
        fitting = [position for position in range(len(slices[giver]) - 1, -1, -1)
                   if len(units[slices[giver][position]]) <= room]
        if not fitting:
            return
        slices[taker].append(slices[giver].pop(fitting[0]))
        slices[taker].sort(key=lambda u: -seconds[u])


def durations_from_junit(junit: Path) -> dict[str, float]:
    """Seconds per node ID from pytest's JUnit XML (``classname`` is the dotted module path, plus a class)."""
    seconds: dict[str, float] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        parts = classname.split(".")
        # the module is the longest prefix that names a file; what follows is a class
        for cut in range(len(parts), 0, -1):
            module = Path(*parts[:cut]).with_suffix(".py")
            if module.exists():
                node = "::".join([module.as_posix(), *parts[cut:], name])
                seconds[node] = round(seconds.get(node, 0.0) + float(case.get("time", 0.0)), 2)
                break
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m tests.scheduling JUNIT_XML   (run from the project's root; writes {DURATIONS_FILE})",
              file=sys.stderr)
        return 2
    seconds = durations_from_junit(Path(args[0]))
    if not seconds:
        print(f"{args[0]} names no test of this project (run it from the project's root).", file=sys.stderr)
        return 1
    DURATIONS_FILE.write_text(json.dumps({"schema_version": 1, "source": "pytest JUnit XML of a default test run",
                                          "seconds": dict(sorted(seconds.items()))}, indent=0) + "\n")
    print(f"{len(seconds)} tests, {sum(seconds.values()):.0f} s -> {DURATIONS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
