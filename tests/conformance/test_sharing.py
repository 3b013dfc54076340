"""Runs shared by a source and a sink certified together (streamcert.conformance.sharing and its use in certify):
which sink run may stand in for the source's own, when the source's run must run after all, how the verdicts read
the shared run, and where the shards put the pair."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamcert.conformance import certify as certify_module
from streamcert.conformance.certify import _fallbacks_due, _in_order, _verdicts, prepare
from streamcert.conformance.evidence import RunEvidence
from streamcert.conformance.shards import assign
from streamcert.conformance.sharing import host_of, hosted_runs, share_runs
from streamcert.conformance.verdicts import JudgedRun
from streamcert.harness.results import RunResult

OUTPUT = ("lost", "duplicate", "unexpected", "aborted_read", "per_key_order")
_PAIR = ["streamcert-kafka", "streamcert-kafka-2pc"]


@pytest.fixture
def without_src3(monkeypatch):
    """The reference source as one that waives SRC-3 (the task assignment only Spark's file sink shows): its
    baseline and kill run can then be judged on the Kafka 2PC sink's."""
    from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
    from streamcert.harness.run.connectors import load_connector

    class Waiving(KafkaOffsetSourceUnderTest):
        claims = KafkaOffsetSourceUnderTest.claims - {"SRC-3"}
        unclaimed = {"SRC-3": "assignment left to Spark"}

    def load(reference, kind=None):
        return Waiving() if reference == "streamcert-kafka" else load_connector(reference, kind)

    monkeypatch.setattr(certify_module, "load_connector", load)


def _run(certification, connector: str, name: str, duplicated: int = 0, missed: bool = False) -> JudgedRun:
    """A judged run of ``connector``'s ``name``: every planned kill cell reached (one missed with ``missed``), its
    output checks clean or with ``duplicated`` records."""
    [planned] = [run for run in certification.runs if run.connector == connector and run.name == name]
    schedule = planned.scenario.schedule
    history = [{"kind": "fault-start", "time": 1.0 + index, "elapsed_s": 1.0 + index, "fault": spec.fault,
                "aimed": True, "reached": not (missed and index == 0),
                "strikes": [{"moments": [spec.params.get("moment")], "batch_class": spec.params.get("batch_class"),
                             "landed": not (missed and index == 0), "wanted": True}]}
               for index, spec in enumerate(schedule)]
    checks = [{"name": check, "valid": not (check == "duplicate" and duplicated),
               "counts": {"duplicated_ids": duplicated} if check == "duplicate" else {},
               "violations": [{"id": 7}] if check == "duplicate" and duplicated else [], "error": None}
              for check in (*OUTPUT, "query_failures")]
    result = RunResult(scenario={"options": {}}, seed=1, complete=True, checks=checks, history=history)
    evidence = RunEvidence(history, [], {}, {}, schedule=[spec.model_dump() for spec in schedule])
    return JudgedRun(planned, result, evidence, Path("runs") / connector / name)


def _verdict(verdicts, connector, requirement):
    return next(v for v in verdicts if v.connector == connector and v.requirement == requirement)


def test_the_reference_pair_shares_the_failover_run_only_since_a_kafka_topic_cannot_show_the_task_assignment():
    """SRC-3 (judged by the source's baseline and kill run) reads which task wrote which file of Spark's file sink."""
    for quick in (True, False):
        shared = {(run.connector, run.name, run.hosted_by) for run in prepare(None, seed=1, quick=quick).runs
                  if run.hosted_by}
        assert shared == (set() if quick else {("streamcert-kafka", "failover", "streamcert-kafka-2pc")})


@pytest.mark.parametrize(("quick", "name"), [(True, "baseline"), (True, "driver-kills"), (False, "baseline"),
                                             (False, "driver-kills"), (False, "failover")])
def test_a_source_s_runs_are_hosted_by_the_kafka_2pc_sink_s_which_read_through_it(without_src3, quick, name):
    certification = prepare(None, seed=1, quick=quick)
    [source_kills] = [run for run in certification.runs if run.connector == "streamcert-kafka" and run.name == name]
    host = host_of(certification.runs, source_kills)
    assert source_kills.hosted_by == "streamcert-kafka-2pc" and host.connector == "streamcert-kafka-2pc"
    assert host.scenario.source == "streamcert-kafka"
    assert host.also_judges == (("streamcert-kafka", source_kills.judges),)
    assert hosted_runs(certification.runs, host) == [source_kills]
    # the PostgreSQL sink reads through the source too, but a table hides a repeated record: it hosts nothing
    assert not any(run.also_judges for run in certification.runs if run.connector == "streamcert-pg-2pc")
    assert source_kills not in _in_order(certification) and host in _in_order(certification)


def test_nothing_is_shared_without_the_pair_or_without_the_host_s_run(without_src3):
    assert not any(run.hosted_by for run in prepare(["streamcert-kafka"], seed=1).runs)
    assert not any(run.hosted_by for run in prepare(["streamcert-kafka", "streamcert-pg-2pc"], seed=1).runs)
    # only SRC-1 asked for: the sink's kill run judges nothing wanted and is not planned
    only_source = prepare(_PAIR, ["SRC-1"], seed=1)
    assert [(run.connector, run.name, run.hosted_by) for run in only_source.runs] == [
        ("streamcert-kafka", "driver-kills", None)]


def test_a_host_whose_kills_leave_out_a_moment_or_a_batch_class_of_the_source_s_run_hosts_nothing(without_src3):
    certification = prepare(_PAIR, ["SRC-1", "SNK-1"], seed=1)
    unshared = [dataclasses.replace(run, hosted_by=None, also_judges=()) for run in certification.runs]
    [host] = [run for run in unshared if run.connector == "streamcert-kafka-2pc"]
    source_moments = {spec.params["moment"] for run in unshared if run.connector == "streamcert-kafka"
                      for spec in run.scenario.schedule if spec.fault == "driver_kill_moment"}
    dropped = sorted(source_moments)[0]
    narrower = host.scenario.model_copy(update={"schedule": [spec for spec in host.scenario.schedule
                                                             if spec.params.get("moment") != dropped]})
    fewer_classes = host.scenario.model_copy(update={"schedule": [
        spec for spec in host.scenario.schedule if spec.params.get("batch_class") != "replay_of_replay"]})
    wider = host.scenario.model_copy(update={"parallelism": 3})
    smaller_batches = host.scenario.model_copy(update={"options": {"max_records_per_batch": 30}})
    no_aborts = host.scenario.model_copy(update={"workload": dataclasses.replace(host.scenario.workload,
                                                                                  aborted_fraction=0.0)})
    no_planned_hold = host.scenario.model_copy(update={"schedule": [
        spec for spec in host.scenario.schedule if spec.params.get("log") != "offsets"]})  # the source's held kill
    connectors = certification.connectors
    assert share_runs(unshared, connectors) == certification.runs  # as prepare shares them
    for scenario in (narrower, fewer_classes, wider, smaller_batches, no_aborts, no_planned_hold):
        changed = [dataclasses.replace(run, scenario=scenario) if run is host else run for run in unshared]
        assert not any(run.hosted_by or run.also_judges for run in share_runs(changed, connectors)), scenario


def test_a_failover_run_hosts_the_source_s_only_when_it_carries_each_of_its_failover_faults():
    certification = prepare(_PAIR, ["SRC-8", "SNK-7"], seed=1)
    unshared = [dataclasses.replace(run, hosted_by=None, also_judges=()) for run in certification.runs]
    [source] = [run for run in unshared if run.connector == "streamcert-kafka" and run.name == "failover"]
    [host] = [run for run in unshared if run.connector == "streamcert-kafka-2pc" and run.name == "failover"]
    assert [spec.fault for spec in host.scenario.schedule] == ["node_moment", "node_isolate", "node_kill"]
    # struck at other times, aimed with other tunings: what is struck and at which moment count
    assert host.scenario.schedule != source.scenario.schedule
    assert {(run.connector, run.name): run.hosted_by for run in share_runs(unshared, certification.connectors)
            if run.name == "failover"} == {("streamcert-kafka", "failover"): "streamcert-kafka-2pc",
                                           ("streamcert-kafka-2pc", "failover"): None}
    without_controller_kill = host.scenario.model_copy(update={"schedule": host.scenario.schedule[:2]})
    kill, *rest = host.scenario.schedule
    elsewhere = host.scenario.model_copy(update={"schedule": [
        kill.model_copy(update={"params": {**kill.params, "moment": "commit_in_flight"}}), *rest]})
    one_broker = dataclasses.replace(host, brokers=1)
    for changed_host in (dataclasses.replace(host, scenario=without_controller_kill),
                         dataclasses.replace(host, scenario=elsewhere), one_broker):
        changed = [changed_host if run is host else run for run in unshared]
        assert not any(run.hosted_by for run in share_runs(changed, certification.connectors))


def test_the_source_s_own_run_runs_only_when_the_shared_run_did_not_pass_all_it_judges_for_the_source(without_src3):
    certification = prepare(_PAIR, ["SRC-1", "SNK-1"], seed=1)
    [source_kills] = [run for run in certification.runs if run.connector == "streamcert-kafka"]
    said = []
    clean = _run(certification, "streamcert-kafka-2pc", "driver-kills")
    host = clean.planned
    assert _fallbacks_due(certification, host, clean, lambda *args: said.append(args)) == []
    assert said == [("spared", source_kills, None)]
    duplicated = _run(certification, "streamcert-kafka-2pc", "driver-kills", duplicated=3)
    assert _fallbacks_due(certification, host, duplicated, None) == [source_kills]  # the sink's bug, or the source's?
    missed = _run(certification, "streamcert-kafka-2pc", "driver-kills", missed=True)
    assert _fallbacks_due(certification, host, missed, None) == [source_kills]  # unknown: its own chance
    # the host could not run on this stack: the source's run gets its own chance (or its own reason to be skipped)
    assert _fallbacks_due(certification, host, None, None) == [source_kills]


def test_a_source_is_judged_on_the_shared_run_and_on_its_own_once_that_ran(without_src3):
    certification = prepare(_PAIR, ["SRC-1", "SNK-1"], seed=1)
    clean_host = _run(certification, "streamcert-kafka-2pc", "driver-kills")
    passed = _verdict(_verdicts(certification, [clean_host]), "streamcert-kafka", "SRC-1")
    assert passed.verdict == "pass" and "shared: driver-kills of streamcert-kafka-2pc" in passed.reason
    assert passed.evidence["runs"][0]["folder"] == str(Path("runs/streamcert-kafka-2pc/driver-kills"))
    assert passed.evidence["shared_runs"] == {"driver-kills": "streamcert-kafka-2pc"}
    replay = passed.evidence["replay"]  # the replay plans the same shared run
    assert "--connector streamcert-kafka streamcert-kafka-2pc --requirements SRC-1,SNK-1" in replay, replay
    words = replay.split()
    again = prepare(words[words.index("--connector") + 1:words.index("--requirements")],
                    words[words.index("--requirements") + 1].split(","), seed=1)
    assert [(run.connector, run.name, run.hosted_by) for run in again.runs] == [
        (run.connector, run.name, run.hosted_by) for run in certification.runs]

    failing_host = _run(certification, "streamcert-kafka-2pc", "driver-kills", duplicated=3)
    verdicts = _verdicts(certification, [failing_host])
    assert _verdict(verdicts, "streamcert-kafka-2pc", "SNK-1").verdict == "fail"
    waiting = _verdict(verdicts, "streamcert-kafka", "SRC-1")  # not blamed for what may be the sink's duplicates
    assert waiting.verdict == "unknown" and "own run decides" in waiting.reason, waiting.reason

    own_clean = _run(certification, "streamcert-kafka", "driver-kills")
    verdicts = _verdicts(certification, [failing_host, own_clean])
    own = _verdict(verdicts, "streamcert-kafka", "SRC-1")
    assert own.verdict == "pass" and "shared" not in own.reason and "shared_runs" not in own.evidence
    own_duplicated = _run(certification, "streamcert-kafka", "driver-kills", duplicated=2)
    assert _verdict(_verdicts(certification, [failing_host, own_duplicated]), "streamcert-kafka",
                    "SRC-1").verdict == "fail"


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_certification_runs_the_source_s_own_run_right_after_a_host_that_did_not_pass_it(without_src3, monkeypatch,
                                                                                           tmp_path, jobs):
    """The runs themselves replaced by canned results: what ran, in which order, and what the progress heard."""
    certification = prepare(_PAIR, ["SRC-1", "SNK-1"], seed=1)
    ran, said = [], []

    def fake_run_one(certification, stacks, planned, out, judged, result, on_run, lock, *rest):
        ran.append((planned.connector, planned.name))
        outcome = _run(certification, planned.connector, planned.name,
                       duplicated=3 if planned.connector == "streamcert-kafka-2pc" and failing else 0)
        judged.append(outcome)
        return outcome

    monkeypatch.setattr(certify_module, "_run_one", fake_run_one)
    for failing in (False, True):
        ran.clear()
        result = certify_module.certify(dataclasses.replace(certification), tmp_path / f"{jobs}-{failing}",
                                        jobs=jobs, on_run=lambda phase, planned, outcome: said.append(phase))
        if failing:
            assert ran == [("streamcert-kafka-2pc", "driver-kills"), ("streamcert-kafka", "driver-kills")]
            assert _verdict(result.verdicts, "streamcert-kafka", "SRC-1").verdict == "pass"
            assert _verdict(result.verdicts, "streamcert-kafka-2pc", "SNK-1").verdict == "fail"
        else:
            assert ran == [("streamcert-kafka-2pc", "driver-kills")] and "spared" in said
            assert _verdict(result.verdicts, "streamcert-kafka", "SRC-1").verdict == "pass"


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_a_shard_holds_a_hosted_run_with_its_host(without_src3, count):
    runs = prepare(None, seed=1).runs
    shards = assign(runs, count)
    for run in runs:
        host = host_of(runs, run)
        if host is not None:
            assert shards[(run.connector, run.name)] == shards[(host.connector, host.name)]
    assert set(shards) == {(run.connector, run.name) for run in runs}


def test_a_hosted_run_whose_host_cannot_run_here_runs_itself(without_src3):
    certification = prepare(None, seed=1, quick=True)
    certification.skipped_runs[("streamcert-kafka-2pc", "driver-kills")] = "not on this stack"
    assert ("streamcert-kafka", "driver-kills") in {(run.connector, run.name) for run in _in_order(certification)}


@pytest.mark.integration
def test_a_source_certified_beside_the_sink_reading_through_it_is_judged_on_the_sink_s_baseline(without_src3, stack,
                                                                                               tmp_path):
    """On the real stack: the Kafka 2PC sink's baseline reads through the reference source (here waiving SRC-3); the
    source's own baseline is spared, and its requirements of that run pass on the sink's, whose report says so."""
    from streamcert.conformance.certify import certify
    from streamcert.reports.render import render_reports

    said = []
    certification = prepare(_PAIR, ["SRC-6", "GEN-1"], seed=1)
    assert [(run.connector, run.name, run.hosted_by) for run in certification.runs] == [
        ("streamcert-kafka", "baseline", "streamcert-kafka-2pc"), ("streamcert-kafka-2pc", "baseline", None)]
    result = certify(certification, tmp_path, environment=stack, render=render_reports,
                     on_run=lambda phase, planned, outcome: said.append((phase, planned.connector, planned.name)))
    assert [(run.connector, run.scenario) for run in result.runs] == [("streamcert-kafka-2pc", "baseline")]
    assert ("spared", "streamcert-kafka", "baseline") in said
    assert result.runs[0].also_judges == {"streamcert-kafka": list(certification.runs[0].judges)}
    verdicts = {(v.connector, v.requirement): v for v in result.verdicts}
    for requirement in ("SRC-6", "GEN-1"):
        verdict = verdicts[("streamcert-kafka", requirement)]
        assert verdict.verdict == "pass" and "shared: baseline of streamcert-kafka-2pc" in verdict.reason, verdict
    assert verdicts[("streamcert-kafka-2pc", "GEN-1")].verdict == "pass"
    assert "which reads through streamcert-kafka" in (tmp_path / "report.html").read_text()


def test_a_source_s_run_whose_host_this_stack_cannot_have_is_tried_itself_and_skipped_with_its_own_reason(
        monkeypatch, tmp_path):
    """A provider without control of a 3-broker cluster skips the sink's failover run; the source's, which it hosted,
    is then tried too and skipped with the same reason (not left unplanned and its requirement short of a run)."""
    certification = prepare(_PAIR, ["SRC-8", "SNK-7"], seed=1)
    certification.runs = [run for run in certification.runs if run.brokers == 3]
    assert {(run.connector, run.name, run.hosted_by) for run in certification.runs} >= {
        ("streamcert-kafka", "failover", "streamcert-kafka-2pc"), ("streamcert-kafka-2pc", "failover", None)}
    monkeypatch.setattr(certify_module._Stacks, "cannot_start", lambda self, brokers: "no 3-broker cluster here")
    result = certify_module.certify(certification, tmp_path, jobs=1)
    skipped = {(entry["connector"], entry["scenario"]): entry["reason"] for entry in result.skipped_runs}
    assert skipped[("streamcert-kafka", "failover")] == skipped[("streamcert-kafka-2pc", "failover")] == (
        "no 3-broker cluster here")
    assert not result.runs
