"""Sharding a certification: ``--shard I/N`` runs a deterministic 1/N of the plan's runs, and :func:`merge` makes
one certification of the shards' results, its verdicts judged again from every shard's runs, as an unsharded run
judges them.

The split is by run, balanced by each run's expected cost (:data:`RUN_COST`, measured on 2 cores): the plan is the
same on every machine for the same connectors, requirements, seed and flags, so each shard computes it and keeps its
part, and shards can run on separate CI machines. A requirement judged by runs in several shards is ``unknown`` in
each shard ("its runs ... are in shard 2/3") until the merge. Runs in the harness's process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from streamcert.conformance.plans import PlannedRun
from streamcert.conformance.sharing import host_of
from streamcert.harness.errors import ConfigurationError

__all__ = ["Shard", "RUN_COST", "parse_shard", "assign"]

#: Seconds a run of each name took in a full certification on 2 cores (seed 1; the default is a short run's): what the
#: split balances. A wrong guess costs balance, never a verdict.
RUN_COST: dict[str, float] = {
    "options": 20.0, "baseline": 25.0, "bounded": 20.0, "driver-kills": 300.0, "rescale": 120.0, "network": 70.0,
    "failover": 150.0, "task-failures": 150.0, "zombies": 180.0, "rescale-under-load": 220.0,
    "acked-writes-safe": 60.0, "acked-writes-unsafe": 60.0,
}
_DEFAULT_COST = 30.0


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"I/N"`` (1 <= I <= N) as a :class:`Shard`; a ConfigurationError with a hint otherwise."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if found is None or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise ConfigurationError(f"--shard {text!r} is not a shard of a certification.",
                                 hint="Write I/N with 1 <= I <= N: --shard 1/3 runs the first third of the plan.")
    return Shard(int(found.group(1)), int(found.group(2)))


def assign(runs: Iterable[PlannedRun], count: int) -> dict[tuple[str, str], int]:
    """(connector, run name) -> its shard (1..``count``): the costliest runs first, each to the shard with the least
    expected time so far (ties to the lower shard); the same plan always splits the same way. A run another run
    hosts (:mod:`~streamcert.conformance.sharing`) goes with its host: only that shard knows whether it must run."""
    runs = list(runs)
    hosts = [(run, host_of(runs, run)) for run in runs]
    ordered = sorted((run for run, host in hosts if host is None),
                     key=lambda run: (-RUN_COST.get(run.name, _DEFAULT_COST), run.connector, run.name))
    load = [0.0] * count
    shards: dict[tuple[str, str], int] = {}
    for run in ordered:
        lightest = min(range(count), key=lambda index: (load[index], index))
        load[lightest] += RUN_COST.get(run.name, _DEFAULT_COST)
        shards[(run.connector, run.name)] = lightest + 1
    for run, host in hosts:
        if host is not None:
            shards[(run.connector, run.name)] = shards[(host.connector, host.name)]
    return shards
