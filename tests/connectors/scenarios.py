"""Test support for the connector tests: run a scenario through the one runner and read back its evidence.

Every connector test runs :func:`~streamcert.harness.scenario.run_scenario` (no hand-built runner): the
scenario loads the workload, carries out the schedule, reads the output back with the sink's observer and runs
the checkers; these helpers only read what it left next to ``results.json``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from streamcert.harness.results import RunResult
from streamcert.harness.scenario import Scenario, run_scenario

__all__ = ["Run", "run"]


class Run:
    """One finished scenario: its result, and the ledger and output it was judged on."""

    def __init__(self, result: RunResult, workdir: Path) -> None:
        assert result.complete and result.error is None, result.error
        self.result = result
        self.ledger = pd.read_parquet(workdir / result.evidence["ledger"])
        self.output = pd.read_parquet(workdir / result.evidence["output"])

    @property
    def acked(self) -> list[int]:
        """Ids of the records the producer saw acknowledged, sorted."""
        return sorted(self.ledger.loc[self.ledger["status"] == "acked", "id"])

    @property
    def ids(self) -> list[int]:
        """Ids of every record read back (duplicates included), sorted."""
        return sorted(self.output["id"])

    def check(self, name: str) -> dict:
        [found] = [check for check in self.result.checks if check["name"] == name]
        return found

    def failed_checks(self) -> list[dict]:
        return [check for check in self.result.checks if check["valid"] is not True]

    def events(self, kind: str) -> list[dict]:
        return [event for event in self.result.history if event["kind"] == kind]


def run(stack, tmp_path: Path, **settings) -> Run:
    """Run ``Scenario(**settings)`` (name defaults to the test's folder) on ``stack``; assert it completed.

    The runner waits for every acknowledged record, or until nothing new arrived for ``quiet_timeout_s``: 180 s
    here (a driver restarted on a loaded machine may show nothing for a minute); it costs time only when records
    are really missing."""
    settings.setdefault("name", tmp_path.name[:30])
    settings.setdefault("quiet_timeout_s", 180.0)
    return Run(run_scenario(stack, Scenario(**settings), tmp_path), tmp_path)
