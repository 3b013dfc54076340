"""Kills with Spark's checkpoint write held open, on a real query: the driver dies after the sink's commit of batch N
returned and before ``commits/N`` exists, the next attempt replays N, and the reference sink writes nothing twice;
without such a kill SNK-4 stays unknown, naming its witness."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcert.conformance.catalogue import requirement
from streamcert.conformance.verdicts import judge
from streamcert.harness.faults.schedule import FaultSpec
from tests.harness.faults.planned_runs import sink_run

_SINK = "streamcert-kafka-2pc"


def _kill_run(stack, tmp_path: Path, schedule: list[FaultSpec]):
    return sink_run(stack, tmp_path, _SINK, "driver-kills", "SNK-4", schedule, 900, quick=True)


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
