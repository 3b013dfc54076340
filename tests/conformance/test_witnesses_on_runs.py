"""Witnesses on a real run: the reference source's rescale run with its partition growth removed passes every check
and still leaves SRC-5 unknown, naming the witness the procedure did not produce; the rescale that did happen is
witnessed (SRC-4 passes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcert.conformance.catalogue import requirement
from streamcert.conformance.certify import evidence_of
from streamcert.conformance.plans import plan
from streamcert.conformance.verdicts import JudgedRun, judge
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.scenario import run_scenario

_SOURCE = "streamcert-kafka"


@pytest.mark.integration
def test_a_rescale_run_whose_partitions_were_never_added_leaves_src5_unknown_naming_its_witness(stack, tmp_path):
    connector = load_connector(_SOURCE, "source")
    [rescale] = [run for run in plan(_SOURCE, connector, seed=1, wanted={"SRC-4", "SRC-5"}) if run.name == "rescale"]
    planned = rescale.scenario
    assert [spec.fault for spec in planned.schedule] == ["rescale", "add_partitions", "rescale"]
    # the same run, smaller, with its first rescale only: the load waits for partitions no fault adds, and gives up
    # when the schedule is over
    workload = planned.workload.__class__(**{**planned.workload.as_dict(), "total": 600})
    scenario = planned.model_copy(update={"schedule": planned.schedule[:1], "workload": workload})
    result = run_scenario(stack, scenario, tmp_path / "run")
    assert result.complete, result.error
    ran = JudgedRun(rescale, result, evidence_of(rescale, result, tmp_path / "run", connector), Path("run"))

    src5 = judge(connector, requirement("SRC-5"), [ran])
    assert src5.verdict == "unknown", src5.reason
    assert "witness added_partition_read missing" in src5.reason and "no partition was added" in src5.reason
    assert "invalid" not in src5.reason  # every check passed: only the witness is missing
    src4 = judge(connector, requirement("SRC-4"), [ran])
    assert src4.verdict == "pass" and "witnessed: rescaled_restart" in src4.reason, src4.reason
