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

from streamcert.harness.stack.machine import machine_info

__all__ = ["SCHEMA_VERSION", "RunResult", "SCHEMA_FILE", "json_schema"]

#: 2: connectors, context, output, evidence and driver_attempts added; scenario names connectors, not a builder.
SCHEMA_VERSION = 2
SCHEMA_FILE = Path(__file__).with_name("schemas") / "run-result.schema.json"


def _machine() -> dict[str, Any]:
    return machine_info()


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
    #: kind (source / sink / aggregator) -> {"reference": how it was named, "name": its declared name}
    connectors: dict[str, dict[str, str]] = Field(default_factory=dict)
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
    machine: dict[str, Any] = Field(default_factory=_machine)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, default=str))
        return path

    @classmethod
    def load(cls, path: Path) -> "RunResult":
        return cls.model_validate_json(Path(path).read_text())


def json_schema() -> str:
    """The JSON Schema of ``results.json``, as committed in :data:`SCHEMA_FILE`."""
    schema = RunResult.model_json_schema()
    schema["$id"] = "https://streamcert.dev/schemas/run-result.schema.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--schema"]:
        sys.stdout.write(json_schema())
    elif sys.argv[1:] == ["--write-schema"]:
        SCHEMA_FILE.write_text(json_schema())
    else:
        sys.exit("usage: python -m streamcert.harness.results --schema | --write-schema")
