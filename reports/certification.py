"""A certification's results as the reports read them: ``results.json`` and, beside it, each run's own
``results.json`` (its timeline, latency and fault history), tolerant of runs that never wrote one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamcert.conformance.verdicts import FULL_PLAN_ONLY
from streamcert.harness.errors import ConfigurationError

__all__ = ["Certification", "VERDICTS", "load_certification", "requirement_order", "verdict_anchor"]

#: Verdicts in the order a reader cares about them.
VERDICTS = ("fail", "unknown", "pass", "skip")


def requirement_order(requirement: str) -> tuple:
    """Catalogue order: sources, sinks, aggregators, general, the Kafka cluster; then by number."""
    prefix, _, number = requirement.partition("-")
    return ({"SRC": 0, "SNK": 1, "AGG": 2, "GEN": 3, "BRK": 4}.get(prefix, 9), int(number) if number.isdigit() else 0,
            requirement)


def verdict_anchor(connector: str, requirement: str) -> str:
    """The id of a verdict's evidence in its certification's report.html."""
    return f"v-{connector}-{requirement}".replace(" ", "_")


@dataclass
class Certification:
    """One certification: its top-level results and the detailed results of each run (by run folder)."""

    results: dict[str, Any]
    folder: Path
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def verdicts(self) -> list[dict[str, Any]]:
        return self.results.get("verdicts", [])

    @property
    def connectors(self) -> list[str]:
        return list(self.results.get("connectors", []))

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(VERDICTS, 0)
        for verdict in self.verdicts:
            counts[verdict["verdict"]] = counts.get(verdict["verdict"], 0) + 1
        return counts

    def verdict(self, connector: str, requirement: str) -> dict[str, Any] | None:
        return next((v for v in self.verdicts if v["connector"] == connector and v["requirement"] == requirement),
                    None)

    def requirements(self) -> list[str]:
        """Every requirement with a verdict, in catalogue order (kind, then number)."""
        return sorted({v["requirement"] for v in self.verdicts}, key=requirement_order)

    def statement(self, requirement: str) -> str:
        from streamcert.conformance.catalogue import CATALOGUE

        return next((req.statement for req in CATALOGUE if req.id == requirement), "")

    def passed(self) -> bool:
        return bool(self.results.get("complete")) and not any(
            v["verdict"] in ("fail", "unknown") for v in self.verdicts)

    def full_plan_only(self) -> list[dict[str, Any]]:
        """A ``--quick`` certification's unknown verdicts whose runs only the full plan has."""
        if not self.results.get("quick"):
            return []
        return [v for v in self.verdicts if v["verdict"] == "unknown" and (v.get("evidence") or {}).get(FULL_PLAN_ONLY)]

    def quick_passed(self) -> bool:
        """A ``--quick`` certification whose every judged requirement passed: a gate passed, not a certificate."""
        waiting = {(v["connector"], v["requirement"]) for v in self.full_plan_only()}
        judged = [v for v in self.verdicts if (v["connector"], v["requirement"]) not in waiting]
        return bool(waiting) and bool(self.results.get("complete")) and not any(
            v["verdict"] in ("fail", "unknown") for v in judged)


def load_certification(path: Path | str) -> Certification:
    """Read a certification's ``results.json`` (a file, or the folder holding it) and its runs' results."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    try:
        results = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"No results file at {path}.",
                                 hint="Give the results.json that `streamcert certify --out DIR` wrote "
                                      "(DIR/results.json).") from None
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path} is not a readable JSON file: {exc}.",
                                 hint="Give the results.json a certification wrote.") from None
    if not isinstance(results, dict) or results.get("kind") != "certification" or "verdicts" not in results:
        raise ConfigurationError(f"{path} is not a certification's results (no kind=certification and verdicts).",
                                 hint="`streamcert report` renders what `streamcert certify` wrote.")
    certification = Certification(results, path.parent)
    for run in results.get("runs", []):
        folder = run.get("folder")
        detail = path.parent / folder / "results.json" if folder else None
        if detail is not None and detail.is_file():
            try:
                certification.runs[folder] = json.loads(detail.read_text())
            except ValueError:
                continue  # a run killed while writing: the report shows its summary only
    return certification
