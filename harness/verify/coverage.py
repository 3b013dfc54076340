"""The coverage grid of a run's kills: which (moment, batch class) cells a driver kill reached, against the cells its
schedule planned.

Every :class:`~streamcert.harness.faults.moments.DriverKillAtMoment` records its strikes in its ``fault-start``
event; a strike that landed reached each moment it observed (a single stage that reads and writes is ``reading``
and ``writing`` at once) in the class of its batch. Positioning kills count too: they landed where they landed.
The planned cells are the schedule's ``driver_kill_moment`` entries. A cell planned and not reached means the run
did not test what it meant to: what needs that cell is unknown, never a pass. Called in the harness's process after
a run (by the conformance evidence checks and the reports), on plain JSON data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MOMENT_KILL", "AIMED_FAULTS", "CoverageGrid", "cells_of", "coverage_grid", "strike_grid"]

#: The fault kind whose strikes fill the grid.
MOMENT_KILL = "driver_kill_moment"
#: The kinds that strike a link or a server at a moment of the query (:mod:`streamcert.harness.faults.at_moment`):
#: their grid is (moment, what was struck).
AIMED_FAULTS = ("network_moment", "server_kill_moment", "node_moment")


class CoverageGrid:
    """Cells (moment, batch class) planned by a schedule and reached by its kills, with the number of kills each (or,
    for the faults aimed at moments, cells (moment, what was struck))."""

    def __init__(self, planned: Iterable[tuple[str, str]], reached: Mapping[tuple[str, str], int]) -> None:
        self.planned = sorted(set(planned))
        self.reached = dict(reached)

    def missing(self, moments: Iterable[str] | None = None) -> list[tuple[str, str]]:
        """Planned cells (of ``moments``, when given) that no kill reached."""
        wanted = None if moments is None else set(moments)
        return [cell for cell in self.planned if cell not in self.reached and (wanted is None or cell[0] in wanted)]

    def planned_for(self, moments: Iterable[str] | None = None) -> list[tuple[str, str]]:
        wanted = None if moments is None else set(moments)
        return [cell for cell in self.planned if wanted is None or cell[0] in wanted]

    def as_dict(self) -> dict[str, Any]:
        """JSON data: ``planned`` and ``missing`` as ``moment@class`` strings, ``reached`` as {cell: kills}."""
        return {"planned": [_name(cell) for cell in self.planned],
                "reached": {_name(cell): count for cell, count in sorted(self.reached.items())},
                "missing": [_name(cell) for cell in self.missing()]}


def _name(cell: tuple[str, str]) -> str:
    return f"{cell[0]}@{cell[1]}"


def cells_of(strike: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (moment, batch class) cells a recorded strike reached: none unless its kill landed."""
    if not strike.get("landed") or not strike.get("batch_class"):
        return []
    return [(moment, strike["batch_class"]) for moment in strike.get("moments") or ()]


def coverage_grid(schedule: Iterable[Mapping[str, Any]], history: Iterable[Mapping[str, Any]]) -> CoverageGrid:
    """The grid of one run: ``schedule`` is its scenario's schedule (entries as JSON data), ``history`` its events."""
    planned = [((entry.get("params") or {}).get("moment"), (entry.get("params") or {}).get("batch_class", "steady"))
               for entry in schedule if entry.get("fault") == MOMENT_KILL]
    reached: dict[tuple[str, str], int] = {}
    for event in history:
        if event.get("kind") != "fault-start" or event.get("fault") != MOMENT_KILL:
            continue
        for strike in event.get("strikes") or ():
            for cell in cells_of(strike):
                reached[cell] = reached.get(cell, 0) + 1
    return CoverageGrid(planned, reached)


def _struck(fault: str, params: Mapping[str, Any]) -> str:
    """What an aimed fault strikes, as its grid's column: the cut, the failover's action, or a server kill."""
    if fault == "network_moment":
        return str(params.get("cut"))
    if fault == "node_moment":
        return str(params.get("action", "node_kill"))
    return "server_kill"


def _in_flight(strike: Mapping[str, Any]) -> bool:
    """Whether a strike found something of the query's in flight (or could not tell: no ``ss`` on the machine)."""
    return bool(strike.get("in_flight")) or "in_flight_unknown" in strike or any(
        statement.get("state") == "active" for statement in strike.get("statements") or ())


def strike_grid(schedule: Iterable[Mapping[str, Any]], history: Iterable[Mapping[str, Any]]) -> CoverageGrid | None:
    """The grid of the network cuts, server kills and failovers a run aimed at moments (:data:`AIMED_FAULTS`): cells
    (moment, what was struck), reached by a strike that landed in its moment with something in flight; None when the
    schedule aims none."""
    planned = [((entry.get("params") or {}).get("moment"), _struck(entry["fault"], entry.get("params") or {}))
               for entry in schedule if entry.get("fault") in AIMED_FAULTS]
    if not planned:
        return None
    reached: dict[tuple[str, str], int] = {}
    for event in history:
        if event.get("kind") != "fault-start" or event.get("fault") not in AIMED_FAULTS:
            continue
        for strike in event.get("strikes") or ():
            if strike.get("landed") and strike.get("wanted") and _in_flight(strike):
                cell = (event.get("moment"), _struck(event["fault"], event.get("params") or {}))
                reached[cell] = reached.get(cell, 0) + 1
    return CoverageGrid(planned, reached)
