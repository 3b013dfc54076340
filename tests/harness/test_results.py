"""results.json: a versioned model whose committed JSON Schema matches the code, and that reads back what it
wrote; a malformed file is refused, not half-read."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from streamcert.harness.results import SCHEMA_FILE, SCHEMA_VERSION, ConnectorSummary, RunResult, json_schema


def test_the_committed_schema_is_the_generated_one():
    assert SCHEMA_FILE.read_text() == json_schema(), \
        "run python -m streamcert.harness.results --write-schema and commit the file"


def test_a_result_reads_back_equal_and_carries_version_and_machine(tmp_path):
    result = RunResult(scenario={"name": "s"}, seed=3, valid=False, checks=[{"name": "lost", "valid": False}],
                       evidence={"ledger": "ledger.parquet"}, driver_attempts=2)
    path = result.save(tmp_path / "results.json")
    saved = json.loads(path.read_text())
    assert saved["schema_version"] == SCHEMA_VERSION and saved["complete"] is False
    assert saved["machine"]["cpu_count"] >= 1 and saved["machine"]["python"]
    assert RunResult.load(path) == result


@pytest.mark.parametrize("change", [{"valid": "maybe"}, {"seed": "three"}, {"surprise": 1}])
def test_a_malformed_result_is_refused(tmp_path, change):
    data = {**RunResult(scenario={}, seed=1).to_dict(), **change}
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ValidationError):
        RunResult.load(tmp_path / "results.json")


def test_a_connector_summary_records_its_declaration():
    from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest

    summary = ConnectorSummary.of(PostgresTwoPhaseSinkUnderTest(), "streamcert-pg-2pc")
    assert (summary.kind, summary.name, summary.output_kind) == ("sink", "streamcert-pg-2pc", "postgres")
    assert "SNK-1" in summary.claims and summary.claims == sorted(summary.claims)
    result = RunResult(scenario={}, seed=0, connectors={"sink": summary})
    assert RunResult.model_validate_json(result.model_dump_json()).connectors["sink"] == summary


def test_the_schema_command_prints_writes_and_refuses_anything_else(tmp_path, capsys):
    from streamcert.harness.schema_files import schema_command

    target = tmp_path / "x.schema.json"
    assert schema_command(["--schema"], json_schema, target, "m") == 0 and capsys.readouterr().out == json_schema()
    assert schema_command(["--write-schema"], json_schema, target, "m") == 0 and target.read_text() == json_schema()
    assert schema_command([], json_schema, target, "m") == 2 and "usage: python -m m" in capsys.readouterr().err
