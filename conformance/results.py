"""The result of a certification (``results.json``): a versioned pydantic model with a published JSON Schema.

``streamcert certify`` writes it after every run (``complete`` false until the last verdict is in, so an
interrupted certification keeps what it found) and reports render from it. The schema is committed as
``harness/schemas/certification.schema.json``; ``python -m streamcert.conformance.results --schema`` prints it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from streamcert.conformance.verdicts import FULL_PLAN_ONLY, CapabilityVerdict, Verdict
from streamcert.harness.results import ConnectorSummary
from streamcert.harness.redaction import redact
from streamcert.harness.schema_files import SCHEMAS_DIR, render, schema_command
from streamcert.harness.stack.machine import machine_info

__all__ = ["SCHEMA_VERSION", "SCHEMA_FILE", "RunSummary", "CertificationResult", "versions", "json_schema"]

SCHEMA_VERSION = 1
SCHEMA_FILE = SCHEMAS_DIR / "certification.schema.json"


def versions() -> dict[str, str | None]:
    """The versions a verdict depends on: streamcert, Spark, Kafka, Python, Java, Spark's Kafka connector."""
    from streamcert import __version__
    from streamcert.connectors.spark_builtin import kafka_packages
    from streamcert.harness.stack.install import KAFKA_VERSION

    machine = machine_info()
    return {"streamcert": __version__, "spark": machine["pyspark"], "kafka": KAFKA_VERSION,
            "python": machine["python"], "java": machine["java"], "git_commit": machine["git_commit"],
            "spark_kafka_connector": kafka_packages(machine["pyspark"] or "")[0].rsplit(":", 1)[-1]}


class RunSummary(BaseModel):
    """One scenario run of the certification, with the requirements it judged."""

    model_config = ConfigDict(extra="forbid")

    connector: str
    scenario: str
    judges: list[str]
    also_judges: dict[str, list[str]] = Field(default_factory=dict, description="other connectors' requirements it "
                                              "judged too: connector name -> requirement IDs (a sink's run that reads "
                                              "through a source under test stands in for the source's own run)")
    folder: str = Field(description="the run's folder (its results.json, ledger.parquet, output.parquet), relative "
                                    "to the certification's")
    seed: int
    complete: bool
    valid: bool | str
    duration_s: float
    driver_attempts: int
    faults: int = Field(description="faults started")
    error: str | None = None
    coverage: dict[str, Any] | None = Field(None, description="the kill grid of a run whose driver kills are timed "
                                                              "by observed moments: planned and missing cells "
                                                              "(moment@class) and the kills that reached each cell")
    strike_coverage: dict[str, Any] | None = Field(
        None, description="the grid of the network cuts, server kills and failovers a run aimed at moments: planned "
                          "and missing cells (moment@struck) and the strikes that reached each with something of the "
                          "query in flight")


class CertificationResult(BaseModel):
    """What a certification found. ``verdicts`` holds one entry per connector and requirement."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    schema_version: int = SCHEMA_VERSION
    kind: str = "certification"
    complete: bool = False
    connectors: list[str] = Field(default_factory=list, description="names of the connectors certified")
    declarations: dict[str, ConnectorSummary] = Field(default_factory=dict)
    verdicts: list[Verdict] = Field(default_factory=list)
    capabilities: dict[str, dict[str, CapabilityVerdict]] = Field(
        default_factory=dict, description="connector -> each capability it claims (exactly-once, rescale...): pass "
                                          "when every requirement behind it passed, fail when one failed, unknown "
                                          "otherwise")
    runs: list[RunSummary] = Field(default_factory=list)
    seed: int
    quick: bool = False
    requirements: list[str] | None = Field(None, description="the requirements asked for (none: all)")
    strict: bool = True
    cooperative: bool = Field(True, description="false: the connectors' own fault points were left out")
    fail_fast: bool = Field(False, description="true: each query run's schedule ended at its first finding "
                                               "(--fail-fast); what its cancelled faults would have reached is "
                                               "unknown")
    shard: str | None = Field(None, description="the part of the plan this certification ran (I/N, --shard); none: "
                                                "all of it")
    merged_from: list[str] | None = Field(None, description="the shards' results.json this certification merges")
    skipped_runs: list[dict[str, str]] = Field(default_factory=list, description="runs this stack could not have "
                                                                                 "(connector, scenario, reason)")
    provider: str = "auto"
    command: str = Field("", description="the command that made this result")
    versions: dict[str, str | None] = Field(default_factory=versions)
    machine: dict[str, Any] = Field(default_factory=machine_info)
    started_at: float = 0.0
    duration_s: float = 0.0
    cpu: dict[str, Any] | None = Field(None, description="the machine's cores over the certification: wall_s, "
                                       "busy_s, nice_s (the standbys' lowered priority), idle_s, cores, busy_share, "
                                       "floor_s (busy_s over cores: the least wall time the same work could take "
                                       "here); none for a merge")
    error: str | None = None

    def counts(self) -> dict[str, int]:
        """Verdicts by kind: pass, fail, skip, unknown."""
        out = {name: 0 for name in ("pass", "fail", "skip", "unknown")}
        for verdict in self.verdicts:
            out[verdict.verdict] += 1
        return out

    def passed(self) -> bool:
        """True when every claimed requirement passed (skips aside) and the certification completed. In one shard
        of a certification (``shard``), a requirement that is unknown only because some of its runs are in other
        shards, and whose runs here passed (or that has none here), counts as passed: the shard's exit says whether
        *it* found anything, and ``streamcert merge`` gives the verdict."""
        return self._all_passed([verdict for verdict in self.verdicts if verdict.verdict != "skip"])

    def gate_passed(self) -> bool:
        """What ``streamcert certify`` and ``merge`` exit with. A full certification: :meth:`passed`. A ``--quick``
        one is a gate, not a certificate: every requirement it judged passed, and those only the full plan's runs
        judge (unknown, :data:`~streamcert.conformance.verdicts.FULL_PLAN_ONLY`) are not held against it."""
        if not self.quick:
            return self.passed()
        return self._all_passed([verdict for verdict in self.verdicts
                                 if verdict.verdict != "skip" and not self.full_plan_only(verdict)])

    def full_plan_only(self, verdict: Verdict) -> bool:
        """Whether ``verdict`` is unknown only because this ``--quick`` certification has none of its runs."""
        return self.quick and verdict.verdict == "unknown" and bool(verdict.evidence.get(FULL_PLAN_ONLY))

    def _all_passed(self, settled: list[Verdict]) -> bool:
        return self.complete and bool(settled) and all(
            verdict.verdict == "pass" or self.passed_here(verdict) for verdict in settled)

    def passed_here(self, verdict: Verdict) -> bool:
        """Whether ``verdict`` (of this shard) is unknown only for its runs in other shards, and passed here."""
        return (bool(self.shard) and verdict.verdict == "unknown" and bool(verdict.evidence.get("elsewhere"))
                and verdict.evidence.get("here") in (None, "pass"))

    def save(self, path: Path) -> Path:
        """Write atomically (a reader never sees half a file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(redact(self.model_dump(mode="json")), indent=2, default=str))
        os.replace(partial, path)
        return path

    @classmethod
    def load(cls, path: Path) -> "CertificationResult":
        return cls.model_validate_json(Path(path).read_text())


def json_schema() -> str:
    """The JSON Schema of a certification's ``results.json``, as committed in :data:`SCHEMA_FILE`."""
    return render(CertificationResult.model_json_schema(), SCHEMA_FILE.name)


if __name__ == "__main__":
    sys.exit(schema_command(sys.argv[1:], json_schema, SCHEMA_FILE, "streamcert.conformance.results"))
