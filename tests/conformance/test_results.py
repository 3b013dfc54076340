"""A certification's results.json model (streamcert.conformance.results) and its committed JSON Schema."""

from __future__ import annotations

from streamcert.conformance.results import SCHEMA_FILE, RunSummary, json_schema


def test_the_committed_schema_is_the_model_s():
    assert SCHEMA_FILE.read_text() == json_schema(), (
        "harness/schemas/certification.schema.json is stale: python -m streamcert.conformance.results --write-schema")


def test_a_run_summary_of_an_older_results_json_reads_without_the_shared_run_field():
    old = {"connector": "c", "scenario": "baseline", "judges": ["GEN-1"], "folder": "runs/c/baseline", "seed": 1,
           "complete": True, "valid": True, "duration_s": 1.0, "driver_attempts": 1, "faults": 0}
    assert RunSummary.model_validate(old).also_judges == {}
