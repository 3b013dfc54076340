"""From runs to verdicts: skip with the connector's reason, fail on any invalid deciding check, unknown when
something could not be decided (an incomplete run, a kill that missed, no run at all), pass only when all is
valid; each verdict keeps its evidence."""

from __future__ import annotations

from pathlib import Path

from streamcert.conformance.catalogue import requirement
from streamcert.conformance.evidence import RunEvidence
from streamcert.conformance.plans import PlannedRun
from streamcert.conformance.verdicts import JudgedRun, Verdict, judge, skipped
from streamcert.harness.results import RunResult
from streamcert.harness.scenario import Scenario
from streamcert.spi.connector import SinkConnector

OUTPUT = ("lost", "duplicate", "unexpected", "aborted_read", "per_key_order")


class _Sink(SinkConnector):
    name = "test-sink"
    claims = frozenset({"SNK-1", "SNK-4"})
    unclaimed = {"SNK-2": "no task-level writes to roll back"}

    def write(self, frame, context):
        raise NotImplementedError


def _check(name, valid=True, **counts):
    return {"name": name, "valid": valid, "counts": counts, "violations": [{"id": 7}] if valid is False else [],
            "error": None}


def _run(checks, history, complete=True, name="driver-kills", driver_events=()) -> JudgedRun:
    result = RunResult(scenario={"options": {}}, seed=5, complete=complete, checks=checks, history=history,
                       error=None if complete else "StartupFailed: the broker went away")
    planned = PlannedRun("test-sink", name, ("SNK-1", "SNK-4"), Scenario(name="x"))
    return JudgedRun(planned, result, RunEvidence(history, list(driver_events), {}, {}),
                     Path("runs/test-sink/" + name))


_IN_WINDOW = [{"kind": "fault-start", "time": 1.0, "elapsed_s": 1.0, "fault": "driver_kill", "in_window": True,
               "pending_batch": 3}]
_ON_OUTPUT = [{"kind": "fault-start", "time": 2.0, "elapsed_s": 2.0, "fault": "driver_kill_on_output",
               "reached": True, "in_window": True, "pending_batch": 4}]


def test_an_unclaimed_requirement_is_skipped_with_the_connectors_reason():
    verdict = skipped(_Sink(), requirement("SNK-2"))
    assert verdict.verdict == "skip" and verdict.reason == "no task-level writes to roll back"
    assert "optional" in skipped(_Sink(), requirement("SRC-11")).reason


def test_all_checks_valid_and_the_kill_in_its_window_is_a_pass_with_evidence():
    verdict = judge(_Sink(), requirement("SNK-1"), [_run([_check(n) for n in OUTPUT], _IN_WINDOW)])
    assert verdict.verdict == "pass"
    [run] = verdict.evidence["runs"]
    assert run["scenario"] == "driver-kills" and run["seed"] == 5 and run["faults"][0]["in_window"] is True
    assert {check["name"] for check in run["checks"]} == set(OUTPUT) | {"fault_reached", "query_failures"}


def test_duplicates_fail_the_requirement_and_the_reason_names_them():
    checks = [_check(n) for n in OUTPUT if n != "duplicate"] + [_check("duplicate", False, duplicated=12)]
    verdict = judge(_Sink(), requirement("SNK-1"), [_run(checks, _IN_WINDOW)])
    assert verdict.verdict == "fail" and "duplicate invalid (duplicated=12)" in verdict.reason
    assert "first: {'id': 7}" in verdict.reason


def test_a_failure_wins_over_an_unknown_and_a_missed_kill_alone_is_unknown():
    clean = [_check(n) for n in OUTPUT]
    missed = [{"kind": "fault-start", "time": 1.0, "fault": "driver_kill", "in_window": False}]
    assert judge(_Sink(), requirement("SNK-1"), [_run(clean, missed)]).verdict == "unknown"
    failing = clean[:-1] + [_check("per_key_order", False, regressions=1)]
    assert judge(_Sink(), requirement("SNK-1"), [_run(failing, missed)]).verdict == "fail"


def test_a_query_that_failed_by_itself_after_a_kill_fails_the_requirement_though_the_output_is_whole():
    crashed = [{"event": "started", "attempt": 1}, {"event": "started", "attempt": 2},
               {"event": "terminated", "attempt": 2, "error": "java.lang.NullPointerException: metrics"}]
    verdict = judge(_Sink(), requirement("SNK-1"), [_run([_check(n) for n in OUTPUT], _IN_WINDOW,
                                                         driver_events=crashed)])
    assert verdict.verdict == "fail" and "query_failures invalid" in verdict.reason
    assert "NullPointerException" in verdict.reason


_HELD = [{"kind": "fault-start", "time": 3.0, "elapsed_s": 3.0, "fault": "driver_kill_log_held", "log": "commits",
          "reached": True, "in_window": True, "held_batch": 6, "pending_batch": 6, "sink_committed": True}]
_REPLAYED = [{"event": "progress", "attempt": 2, "batchId": 6, "numInputRows": 60, "time": 9.0}]


def test_the_committing_moment_must_have_been_struck_for_a_replayed_commit_requirement():
    checks = [_check("duplicate"), _check("lost")]
    assert judge(_Sink(), requirement("SNK-4"), [_run(checks, _IN_WINDOW)]).verdict == "unknown"
    on_output = judge(_Sink(), requirement("SNK-4"), [_run(checks, _IN_WINDOW + _ON_OUTPUT)])
    assert on_output.verdict == "unknown" and "witness replay_after_commit_returned missing" in on_output.reason
    assert judge(_Sink(), requirement("SNK-4"), [_run(checks, _IN_WINDOW + _HELD, driver_events=_REPLAYED)]
                 ).verdict == "pass"  # a kill with commits/N held is a committing kill, and witnesses the replay


def test_an_incomplete_run_a_missing_check_or_no_run_is_unknown_never_pass():
    incomplete = judge(_Sink(), requirement("SNK-1"), [_run([], _IN_WINDOW, complete=False)])
    assert incomplete.verdict == "unknown" and "did not complete" in incomplete.reason
    missing = judge(_Sink(), requirement("SNK-1"), [_run([_check("lost")], _IN_WINDOW)])
    assert missing.verdict == "unknown" and "has no duplicate check" in missing.reason
    assert judge(_Sink(), requirement("SNK-1"), []).verdict == "unknown"
    quick_only = judge(_Sink(), requirement("SNK-7"), [], in_full_plan=True)
    assert "not run by --quick" in quick_only.reason and quick_only.evidence == {"full_plan_only": True}
    assert judge(_Sink(), requirement("SNK-7"), [], planned=1, in_full_plan=True).evidence == {}
    assert "stopped before them" in judge(_Sink(), requirement("SNK-7"), [], planned=1).reason


def test_a_requirement_whose_certification_stopped_between_its_runs_is_unknown_even_when_those_passed():
    passed = _run([_check(n) for n in OUTPUT], _IN_WINDOW)
    assert judge(_Sink(), requirement("SNK-1"), [passed], planned=1).verdict == "pass"
    half = judge(_Sink(), requirement("SNK-1"), [passed], planned=2)
    assert half.verdict == "unknown" and half.reason.startswith("only 1 of its 2 runs happened")
    failing = _run([_check(n) for n in OUTPUT[:-1]] + [_check("per_key_order", False)], _IN_WINDOW)
    assert judge(_Sink(), requirement("SNK-1"), [failing], planned=2).verdict == "fail"  # a finding stands


def test_every_run_that_judges_a_requirement_must_pass():
    good = _run([_check(n) for n in OUTPUT], _IN_WINDOW)
    bad = _run([_check(n) for n in OUTPUT[:-1]] + [_check("per_key_order", False)], _IN_WINDOW, name="rescale")
    verdict = judge(_Sink(), requirement("SNK-1"), [good, bad])
    assert verdict.verdict == "fail" and verdict.reason.startswith("rescale:")
    assert [run["scenario"] for run in verdict.evidence["runs"]] == ["driver-kills", "rescale"]


def _skip(fault):
    return {"kind": "fault-skip", "time": 1.0, "fault": fault, "phase": "start",
            "reason": f"Fault {fault!r} needs a server process this stack controls"}


def test_a_requirement_whose_faults_were_all_skipped_by_the_stack_is_skipped_not_failed_or_unknown():
    history = [_skip("broker_restart"), _skip("database_kill")]
    verdict = judge(_Sink(), requirement("SNK-7"), [_run([_check(n) for n in OUTPUT], history, name="network")])
    assert verdict.verdict == "skip" and "broker_restart: Fault 'broker_restart' needs a server" in verdict.reason
    assert verdict.evidence["runs"][0]["faults"][0]["kind"] == "fault-skip"


def test_faults_skipped_beside_faults_that_happened_are_named_in_the_verdict():
    history = [{"kind": "fault-start", "time": 1.0, "elapsed_s": 1.0, "fault": "latency"}, _skip("broker_restart")]
    checks = [_check(n) for n in OUTPUT] + [_check("progress")]
    verdict = judge(_Sink(), requirement("SNK-7"), [_run(checks, history, name="network")])
    assert verdict.verdict != "skip" and "(skipped here: broker_restart:" in verdict.reason


def test_a_claimed_capability_holds_only_when_every_requirement_behind_it_passed():
    from streamcert.conformance.verdicts import capability_verdicts

    def verdict(req, kind):
        return Verdict(connector="s", requirement=req, verdict=kind, reason="r")

    passed = [verdict(f"SNK-{n}", "pass") for n in range(1, 9)]
    claims = {"s": ("sink", frozenset({"exactly-once", "rescale", "SNK-1"}))}
    held = capability_verdicts(claims, passed)["s"]
    assert held["exactly-once"].verdict == "pass" and held["rescale"].verdict == "pass"
    assert set(held["exactly-once"].requirements) == {f"SNK-{n}" for n in range(1, 7)}
    broken = capability_verdicts(claims, [v if v.requirement != "SNK-2" else verdict("SNK-2", "fail")
                                          for v in passed])["s"]
    assert broken["exactly-once"].verdict == "fail" and broken["rescale"].verdict == "pass"
    quick = capability_verdicts(claims, passed[:5])["s"]  # SNK-6 not judged: the capability is not shown to hold
    assert quick["exactly-once"].verdict == "unknown" and "SNK-6" not in quick["exactly-once"].requirements
    assert "read_committed" not in held  # not claimed
    waived = capability_verdicts(claims, [v if v.requirement != "SNK-6" else verdict("SNK-6", "skip")
                                          for v in passed])["s"]
    assert waived["exactly-once"].verdict == "pass" and waived["exactly-once"].requirements["SNK-6"] == "skip"


def _rescale_run(history, driver_events, scenario_parallelism=2):
    result = RunResult(scenario={"options": {}, "parallelism": scenario_parallelism}, seed=5, complete=True,
                       checks=[_check(n) for n in OUTPUT] + [_check("query_failures")], history=history)
    planned = PlannedRun("test-sink", "rescale", ("SNK-8",), Scenario(name="x"))
    evidence = RunEvidence(history, list(driver_events), {}, {}, scenario=result.scenario)
    return JudgedRun(planned, result, evidence, Path("runs/test-sink/rescale"))


_RESCALE = [{"kind": "fault-start", "time": 1.0, "fault": "rescale", "pending_batch": 3},
            {"kind": "fault-stop", "time": 2.0, "fault": "rescale", "attempt": 2, "parallelism": 3}]


def test_a_requirement_whose_witness_no_run_shows_is_unknown_naming_it_though_every_check_passed():
    read_after = [{"event": "progress", "attempt": 2, "batchId": 4, "numInputRows": 30}]
    witnessed = judge(_Sink(), requirement("SNK-8"), [_rescale_run(_RESCALE, read_after)])
    assert witnessed.verdict == "pass" and "witnessed: rescaled_restart" in witnessed.reason
    assert witnessed.evidence["runs"][0]["witnesses"][0]["valid"] is True
    nothing_after = judge(_Sink(), requirement("SNK-8"), [_rescale_run(_RESCALE, [])])
    assert nothing_after.verdict == "unknown"
    assert "witness rescaled_restart missing" in nothing_after.reason and "read input" in nothing_after.reason
    same = judge(_Sink(), requirement("SNK-8"), [_rescale_run(_RESCALE, read_after, scenario_parallelism=3)])
    assert same.verdict == "unknown" and "never restarted with another parallelism" in same.reason
