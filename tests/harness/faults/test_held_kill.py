"""Kills with Spark's checkpoint write held open, on a real query: the driver dies after the sink's commit of batch N
returned and before ``commits/N`` exists, the next attempt replays N, and the reference sink writes nothing twice;
the hold protocol's files and the jar build, without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcert.conformance.catalogue import requirement
from streamcert.conformance.certify import evidence_of
from streamcert.conformance.plans import plan
from streamcert.conformance.verdicts import JudgedRun, judge
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.scenario import run_scenario
from streamcert.harness.stack.checkpoint_hold import HOLD_CLASS, CheckpointHold, ensure_hold_jar

_SINK = "streamcert-kafka-2pc"


def test_the_hold_protocol_arms_reports_and_disarms_in_the_checkpoint(tmp_path):
    hold = CheckpointHold(f"file:{tmp_path}")
    assert hold.held("commits") == []
    hold.arm("commits", 7)
    assert (tmp_path / ".streamcert-hold" / "arm-commits").read_text() == "7\n"
    (tmp_path / ".streamcert-hold" / "held-commits-7").write_text("1 2\n")
    assert hold.held("commits") == [7] and hold.held("offsets") == []
    hold.release("commits", 7)
    hold.disarm("commits")
    assert hold.held("commits") == [] and not list((tmp_path / ".streamcert-hold").iterdir())
    with pytest.raises(ValueError):
        hold.arm("state", 1)


@pytest.mark.integration
def test_the_hold_jar_is_built_once_and_holds_the_class_spark_is_told_to_use():
    import zipfile

    jar = ensure_hold_jar()
    assert ensure_hold_jar() == jar
    assert HOLD_CLASS.replace(".", "/") + ".class" in zipfile.ZipFile(jar).namelist()


def _kill_run(stack, tmp_path: Path, schedule: list[FaultSpec]):
    sink = load_connector(_SINK, "sink")
    [kills] = [run for run in plan(_SINK, sink, seed=1, quick=True, wanted={"SNK-4"}) if run.name == "driver-kills"]
    workload = kills.scenario.workload.__class__(**{**kills.scenario.workload.as_dict(), "total": 900})
    scenario = kills.scenario.model_copy(update={"schedule": schedule, "workload": workload})
    result = run_scenario(stack, scenario, tmp_path / "run")
    assert result.complete, result.error
    return sink, JudgedRun(kills, result, evidence_of(kills, result, tmp_path / "run", sink), Path("run"))


@pytest.mark.integration
def test_a_kill_with_commits_held_replays_a_committed_batch_and_witnesses_snk4(stack, tmp_path):
    held = FaultSpec("driver_kill_log_held", "driver", 0.0, 0.0, {"log": "commits", "batch_class": "steady"})
    sink, ran = _kill_run(stack, tmp_path, [held])
    [start] = [e for e in ran.result.history if e["kind"] == "fault-start"]
    assert start["reached"] is True and start["sink_committed"] is True and start["reached_class"] == "steady"
    assert start["pending_batch"] == start["held_batch"]  # offsets/N written, commits/N never
    verdict = judge(sink, requirement("SNK-4"), [ran])
    assert verdict.verdict == "pass", verdict.reason
    assert "witnessed: replay_after_commit_returned" in verdict.reason


@pytest.mark.integration
def test_a_kill_run_without_a_held_commit_leaves_snk4_unknown_naming_its_witness(stack, tmp_path):
    on_output = FaultSpec("driver_kill_on_output", "driver", 0.0, 0.0, {})
    sink, ran = _kill_run(stack, tmp_path, [on_output])
    verdict = judge(sink, requirement("SNK-4"), [ran])
    assert verdict.verdict == "unknown", verdict.reason
    assert "witness replay_after_commit_returned missing" in verdict.reason and "invalid" not in verdict.reason
