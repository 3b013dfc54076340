"""The result of one scenario run (``results.json``): a versioned pydantic model with a published JSON Schema.

Written by :func:`~streamcert.harness.scenario.run_scenario` even when the run fails (``complete`` false, the
error kept), and read back by reports and comparisons with :meth:`RunResult.load`. The schema is committed as
``harness/schemas/run-result.schema.json``; ``python -m streamcert.harness.results --schema`` prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from streamcert.harness.redaction import redact
from streamcert.harness.schema_files import SCHEMAS_DIR, render, schema_command
from streamcert.harness.stack.machine import machine_info

__all__ = ["SCHEMA_VERSION", "ConnectorSummary", "RunResult", "SCHEMA_FILE", "json_schema"]

#: 2: connectors, context, output, evidence and driver_attempts added; scenario names connectors, not a builder.
SCHEMA_VERSION = 2
SCHEMA_FILE = SCHEMAS_DIR / "run-result.schema.json"


def _machine() -> dict[str, Any]:
    return machine_info()


class ConnectorSummary(BaseModel):
    """A connector's declaration as a run recorded it: what it is and what it stood behind."""

    model_config = ConfigDict(extra="forbid")

    reference: str = Field(description="how the scenario named it: entry point name or module:attr")
    name: str
    kind: Literal["source", "sink", "aggregator", "broker"] = Field(
        description="a connector's kind, or broker for the Kafka cluster of the failover runs")
    claims: list[str] = Field(default_factory=list, description="requirement IDs and capabilities it claims")
    unclaimed: dict[str, str] = Field(default_factory=dict, description="requirement ID -> why it does not apply")
    output_kind: str | None = Field(None, description="where a sink's output is read back from: an output kind, or "
                                                      "the name of the sink's own external system")
    input_system: str | None = Field(None, description="the external system a source reads, when not a Kafka topic")

    @classmethod
    def of(cls, connector: Any, reference: str) -> "ConnectorSummary":
        """The summary of a :class:`~streamcert.spi.connector.Connector` declaration."""
        output_system = getattr(connector, "output_system", None)
        input_system = getattr(connector, "input_system", None)
        output_kind = output_system.name if output_system is not None else getattr(connector, "output_kind", None)
        return cls(reference=reference, name=connector.name, kind=connector.kind, claims=sorted(connector.claims),
                   unclaimed=dict(connector.unclaimed), output_kind=output_kind,
                   input_system=input_system.name if input_system is not None else None)


class RunResult(BaseModel):
    """What a run did and found. ``valid`` is true, false or ``"unknown"`` (the checkers could not decide)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    schema_version: int = SCHEMA_VERSION
    scenario: dict[str, Any]
    seed: int
    complete: bool = False
    valid: bool | Literal["unknown"] = "unknown"
    checks: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    history: list[dict[str, Any]] = Field(default_factory=list)
    ledger_counts: dict[str, int] = Field(default_factory=dict)
    #: kind (source / sink / aggregator) -> the connector's declaration
    connectors: dict[str, ConnectorSummary] = Field(default_factory=dict)
    #: the QueryContext of the first attempt (topics, output, checkpoint, options)
    context: dict[str, Any] = Field(default_factory=dict)
    #: {"kind": "kafka" | "postgres" | "files", "name": topic, table or folder}
    output: dict[str, str] = Field(default_factory=dict)
    #: files next to results.json: "ledger" (the acknowledged input, Parquet) and "output" (every record read
    #: back, unpacked, in delivery order, Parquet): the evidence the checks were computed from
    evidence: dict[str, str] = Field(default_factory=dict)
    driver_attempts: int = 0
    error: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    cpu: dict[str, Any] | None = Field(None, description="the machine's cores over the run (machine-wide, other runs "
                                       "beside it included): wall_s, busy_s, nice_s, idle_s, cores, busy_share, "
                                       "floor_s (busy_s over cores)")
    machine: dict[str, Any] = Field(default_factory=_machine)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(redact(self.to_dict()), indent=2, default=str))
        return path

    @classmethod
    def load(cls, path: Path) -> "RunResult":
        return cls.model_validate_json(Path(path).read_text())


def json_schema() -> str:
    """The JSON Schema of ``results.json``, as committed in :data:`SCHEMA_FILE`."""
    return render(RunResult.model_json_schema(), SCHEMA_FILE.name)


if __name__ == "__main__":
    sys.exit(schema_command(sys.argv[1:], json_schema, SCHEMA_FILE, "streamcert.harness.results"))
