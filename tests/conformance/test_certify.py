"""Verdicts across a certification's runs (streamcert.conformance.certify): seed 003's cluster runs as the
precondition of the failover runs, and runs a stack cannot have (an external cluster) reported as skipped."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamcert.conformance.certify import _verdicts, prepare
from streamcert.conformance.evidence import RunEvidence
from streamcert.conformance.verdicts import JudgedRun
from streamcert.harness.results import RunResult

OUTPUT = ("lost", "duplicate", "unexpected", "aborted_read", "per_key_order")


def _check(name, valid=True, **counts):
    return {"name": name, "valid": valid, "counts": counts, "violations": [{"id": 7}] if valid is False else [],
            "error": None}


def _judged(certification, name, checks, history, complete=True, acked_writes=None) -> JudgedRun:
    [planned] = [run for run in certification.runs if run.name == name]
    result = RunResult(scenario={"options": {}}, seed=1, complete=complete, checks=checks, history=history,
                       error=None if complete else "RuntimeError: gave up")
    return JudgedRun(planned, result, RunEvidence(history, [], {}, {}, acked_writes=acked_writes),
                     Path("runs") / planned.connector / name)


def _fault(name, **fields):
    return {"kind": "fault-start", "time": 1.0, "elapsed_s": 1.0, "fault": name, **fields}


_FAILOVER = [_fault("node_kill", node=2, reached=True), _fault("node_isolate", node=3, reached=True)]


def _cluster_run(certification, lost: int):
    checks = [_check("lost", valid=lost == 0, lost=lost, acknowledged=900)]
    return _judged(certification, "acked-writes-safe", checks, _FAILOVER,
                   acked_writes={"acknowledged": 900, "lost": lost})


def _sink_runs(certification):
    lost_on_failover = _judged(certification, "failover", [_check("lost", valid=False, lost=3)], _FAILOVER)
    network_unfinished = _judged(certification, "network", [], [], complete=False)
    return [lost_on_failover, network_unfinished]


def _verdict(verdicts, subject, requirement):
    return next(v for v in verdicts if v.connector == subject and v.requirement == requirement)


def test_a_loss_seen_only_under_failover_counts_when_the_cluster_kept_what_it_acknowledged():
    certification = prepare(["streamcert-kafka-2pc"], ["SNK-7"])
    assert [run.name for run in certification.runs] == ["acked-writes-safe", "network", "failover"]
    verdicts = _verdicts(certification, [_cluster_run(certification, lost=0), *_sink_runs(certification)])
    assert _verdict(verdicts, "kafka-cluster", "BRK-1").verdict == "pass"
    assert _verdict(verdicts, "streamcert-kafka-2pc", "SNK-7").verdict == "fail"


def test_a_loss_seen_only_under_failover_is_unknown_when_the_cluster_itself_lost_acknowledged_records():
    certification = prepare(["streamcert-kafka-2pc"], ["SNK-7"])
    verdicts = _verdicts(certification, [_cluster_run(certification, lost=12), *_sink_runs(certification)])
    assert _verdict(verdicts, "kafka-cluster", "BRK-1").verdict == "fail"
    sink = _verdict(verdicts, "streamcert-kafka-2pc", "SNK-7")
    assert sink.verdict == "unknown" and "whose own BRK-1 run (fail" in sink.reason


def test_a_loss_on_one_broker_too_stays_a_failure_whatever_the_cluster_did():
    certification = prepare(["streamcert-kafka-2pc"], ["SNK-7"])
    network_lost = _judged(certification, "network", [_check("lost", valid=False, lost=1)], [_fault("latency")])
    failover_lost = _judged(certification, "failover", [_check("lost", valid=False, lost=3)], _FAILOVER)
    verdicts = _verdicts(certification, [_cluster_run(certification, lost=12), network_lost, failover_lost])
    assert _verdict(verdicts, "streamcert-kafka-2pc", "SNK-7").verdict == "fail"


def test_runs_the_stack_cannot_have_are_skipped_with_the_reason_never_failed():
    certification = prepare(["streamcert-kafka-2pc"], ["SNK-7"])
    why = "needs a local 3-broker cluster; the external provider gives it no control of the brokers"
    certification.skipped_runs = {("kafka-cluster", "acked-writes-safe"): why,
                                  ("streamcert-kafka-2pc", "failover"): why}
    network_lost = _judged(certification, "network", [_check("lost", valid=False, lost=1)], [_fault("latency")])
    verdicts = _verdicts(certification, [network_lost])
    cluster = _verdict(verdicts, "kafka-cluster", "BRK-1")
    assert cluster.verdict == "skip" and "acked-writes-safe: needs a local 3-broker cluster" in cluster.reason
    sink = _verdict(verdicts, "streamcert-kafka-2pc", "SNK-7")
    assert sink.verdict == "fail" and "not run here: failover: needs a local" in sink.reason
    assert sink.evidence["skipped_runs"] == {"failover": why}


def test_a_connector_built_for_another_spark_is_skipped_with_the_reason(monkeypatch):
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.3.0")
    certification = prepare(["streamcert.connectors.lakehouse:DeltaSink"], ["SNK-1", "SNK-2"])
    reference = "streamcert.connectors.lakehouse:DeltaSink"
    mine = [run for run in certification.runs if run.connector == reference]
    assert mine and all((reference, run.name) in certification.skipped_runs for run in mine)
    verdicts = _verdicts(certification, [])
    snk1 = _verdict(verdicts, "delta-sink", "SNK-1")
    assert snk1.verdict == "skip" and "runs on Spark 4.1" in snk1.reason and "Spark 4.3.0" in snk1.reason
    monkeypatch.setattr(pyspark, "__version__", "4.1.1")
    assert not prepare([reference], ["SNK-1"]).skipped_runs


@pytest.mark.integration
def test_the_cluster_keeps_what_it_acknowledged_and_the_harness_sees_unsafe_settings_lose_it(kafka_cluster, tmp_path):
    """BRK-1 and BRK-2 end to end on the session's 3-node cluster, as `streamcert certify --requirements BRK-1
    BRK-2` runs them: both pass, the safe run lost nothing it acknowledged, the unsafe one lost some."""
    from streamcert.conformance.certify import certify
    from streamcert.reports.render import render_reports

    stack = SimpleNamespace(kafka=kafka_cluster, config=SimpleNamespace(brokers=3),
                            endpoints=SimpleNamespace(bootstrap_servers=kafka_cluster.bootstrap))
    result = certify(prepare(None, ["BRK-1", "BRK-2"]), tmp_path / "cert", environment=stack, render=render_reports)
    assert result.connectors[-1] == "kafka-cluster" and result.declarations["kafka-cluster"].kind == "broker"
    safe, unsafe = (_verdict(result.verdicts, "kafka-cluster", req) for req in ("BRK-1", "BRK-2"))
    assert safe.verdict == "pass", safe.reason
    assert unsafe.verdict == "pass", unsafe.reason
    runs = {run.scenario: run for run in result.runs}
    written = {name: json.loads((tmp_path / "cert" / runs[name].folder / "results.json").read_text())
               for name in ("acked-writes-safe", "acked-writes-unsafe")}
    safe_run, unsafe_run = (written[name]["metrics"]["acked_writes"] for name in written)
    assert safe_run["lost"] == 0 and safe_run["acknowledged"] > 500, safe_run
    assert unsafe_run["lost"] > 0, unsafe_run
    isolation = next(e for e in written["acked-writes-safe"]["history"] if e.get("fault") == "node_isolate_kill")
    assert isolation["kind"] == "fault-start" and isolation["reached"] is True
    assert isolation["after"]["leader"] != isolation["node"]
    # the same results.json as every run: the scenario (its procedure) and the checks, fault_reached among them
    assert written["acked-writes-safe"]["scenario"]["procedure"]["kind"] == "acked_writes"
    assert {c["name"] for c in written["acked-writes-safe"]["checks"]} == {"lost", "fault_reached"}
    assert (tmp_path / "cert" / "report.html").is_file()
    # the certification's CPU window spans it, and each run's its own
    assert result.cpu["busy_s"] > 0 and abs(result.cpu["wall_s"] - result.duration_s) < 1.0
    assert all(written[name]["cpu"]["wall_s"] <= result.cpu["wall_s"] for name in written)


def test_a_given_master_takes_every_query_and_the_zombie_runs_that_need_a_local_cluster_are_skipped():
    certification = prepare(["streamcert-pg-2pc"], None, quick=True, spark_master="standalone")
    masters = {run.name: run.scenario.master for run in certification.runs}
    assert masters.pop("zombies") == "local-cluster[3,1,1024]" and set(masters.values()) == {"standalone"}
    tasks = next(run for run in certification.runs if run.name == "task-failures")
    # local[2,F]'s retries (a retry for every fault and two more) are kept
    assert tasks.scenario.spark_conf["spark.task.maxFailures"] == str(len(tasks.scenario.schedule) + 2)
    assert "freezes executor JVMs of local-cluster[3,1,1024]" in certification.skipped_runs[
        ("streamcert-pg-2pc", "zombies")]
    verdicts = _verdicts(certification, [])
    assert _verdict(verdicts, "streamcert-pg-2pc", "SNK-6").verdict == "skip"


def test_a_master_that_does_not_answer_is_refused_before_anything_starts():
    from streamcert.harness.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="No Spark master answers at spark://127.0.0.1:1"):
        prepare(["streamcert-pg-2pc"], None, quick=True, spark_master="spark://127.0.0.1:1")


def test_warm_standbys_are_kept_with_two_cores_per_job_and_dropped_otherwise_or_when_turned_off(monkeypatch):
    from streamcert.conformance import certify as certify_module
    from streamcert.conformance.certify import _without_standby, standby_fits

    monkeypatch.delenv("STREAMCERT_STANDBY", raising=False)
    monkeypatch.setattr(certify_module.os, "cpu_count", lambda: 4)
    assert standby_fits(1) and standby_fits(2) and not standby_fits(3)
    monkeypatch.setenv("STREAMCERT_STANDBY", "off")
    assert not standby_fits(1)
    kills = next(run for run in prepare(["streamcert-kafka"], ["SRC-1"], seed=1, quick=True).runs
                 if run.name == "driver-kills")
    assert kills.scenario.warm_standby and not _without_standby(kills).scenario.warm_standby
    assert _without_standby(kills).scenario.schedule == kills.scenario.schedule  # nothing else changes


def test_a_run_tells_its_stack_s_pool_how_many_query_runs_follow_on_that_stack():
    """Runs on other stacks and runs that start no driver (the options probe, acknowledged writes) do not count: a
    warm driver asked for them would wait unused until the stack stops."""
    from streamcert.conformance.certify import _in_order, _queries_after

    order = _in_order(prepare(["streamcert-kafka"], seed=1))
    counts = {run.name: _queries_after(order, index) for index, run in enumerate(order)}
    assert counts == {"options": 6, "baseline": 5, "bounded": 4, "driver-kills": 3, "skew": 2, "rescale": 1,
                      "network": 0, "acked-writes-safe": 1, "acked-writes-unsafe": 1, "failover": 0}
    failover_first = order[:7] + [order[9], order[7], order[8]]  # only driverless runs after it on its stack
    assert [run.name for run in failover_first[7:]] == ["failover", "acked-writes-safe", "acked-writes-unsafe"]
    assert _queries_after(failover_first, 7) == 0


def test_fail_fast_ends_every_query_run_s_schedule_at_its_first_finding_and_says_so_in_the_replay_command():
    from streamcert.conformance.certify import replay_command

    plain = prepare(["streamcert-kafka-2pc"], ["SNK-1", "GEN-2"], seed=1, quick=True)
    fast = prepare(["streamcert-kafka-2pc"], ["SNK-1", "GEN-2"], seed=1, quick=True, fail_fast=True)
    assert fast.fail_fast and not plain.fail_fast
    assert not any(run.scenario.stop_at_first_finding for run in plain.runs)
    assert {run.name: run.scenario.stop_at_first_finding for run in fast.runs} == {
        "options": False, "driver-kills": True}  # a procedure's run has no schedule to end
    assert [run.scenario.schedule for run in fast.runs] == [run.scenario.schedule for run in plain.runs]
    assert replay_command("x", "SNK-1", 3, True, fail_fast=True).endswith("--quick --fail-fast")


def test_a_fail_fast_run_fails_on_its_finding_and_leaves_what_its_cancelled_kills_would_have_judged_unknown():
    certification = prepare(["streamcert-kafka-2pc"], ["SNK-1"], seed=1, quick=True, fail_fast=True)
    [kills] = [run for run in certification.runs if run.name == "driver-kills"]
    first, *rest = kills.scenario.schedule
    struck = _fault(first.fault, aimed=True, reached=True, moment=first.params["moment"],
                    batch_class=first.params["batch_class"],
                    strikes=[{"moments": [first.params["moment"]], "batch_class": first.params["batch_class"],
                              "landed": True, "wanted": True}])
    cancelled = [{"kind": "fault-cancelled", "time": 2.0, "elapsed_s": 2.0, "fault": spec.fault,
                  "reason": "the run stopped at its first finding"} for spec in rest]
    clean = [_check(name) for name in OUTPUT]
    found = [_check("duplicate", valid=False, duplicated_ids=3), *(c for c in clean if c["name"] != "duplicate")]
    [failed] = _verdicts(certification, [_judged(certification, "driver-kills", found, [struck, *cancelled])])
    [untested] = _verdicts(certification, [_judged(certification, "driver-kills", clean, [struck, *cancelled])])
    assert failed.verdict == "fail", failed.reason
    assert untested.verdict == "unknown" and "--fail-fast" in untested.reason, untested.reason


def test_a_quick_shard_says_full_plan_only_of_what_the_quick_plan_has_no_run_for_not_of_the_other_shards_runs():
    from streamcert.conformance.shards import Shard

    whole = prepare(["streamcert-kafka-2pc"], ["SNK-1", "SNK-7"], seed=1, quick=True)
    assert {run.name for run in whole.runs} == {"driver-kills"}
    verdicts = {v.requirement: v for v in _verdicts(whole, [])}
    assert verdicts["SNK-7"].evidence.get("full_plan_only") is True  # the quick plan has no network run
    assert not verdicts["SNK-1"].evidence.get("full_plan_only")  # its run did not happen: not the full plan's
    for index in (1, 2):
        part = prepare(["streamcert-kafka-2pc"], ["SNK-1", "SNK-7"], seed=1, quick=True, shard=Shard(index, 2))
        verdicts = {v.requirement: v for v in _verdicts(part, [])}
        assert verdicts["SNK-7"].evidence.get("full_plan_only") is True
        assert not verdicts["SNK-1"].evidence.get("full_plan_only"), (index, verdicts["SNK-1"])


def test_a_run_tells_its_stack_s_pool_the_session_of_the_next_query_run_so_its_warm_driver_fits_that_run():
    """Consecutive runs mostly differ in session (a kill run's status API, a task-failure run's retries, a zombie run's
    cluster): the pool readies a child of the next poolable query run's master and settings, worked out before it."""
    from streamcert.conformance.certify import _in_order, _next_query
    from streamcert.harness.scenario import driver_session

    order = _in_order(prepare(["streamcert-pg-2pc"], seed=1, quick=True))
    names = [run.name for run in order]
    following = {names[index]: getattr(_next_query(order, index), "name", None) for index in range(len(order))}
    # the zombie run's executors are JVMs of a cluster: no pooled driver serves it, and none is readied for it
    assert following == {"options": "baseline", "baseline": "driver-kills", "driver-kills": "task-failures",
                         "task-failures": None, "zombies": None}
    sessions = {run.name: driver_session(run.scenario) for run in order if run.procedure == "query"}
    assert sessions["baseline"][0] == "local[2,3]" and "spark.ui.enabled" not in sessions["baseline"][1]
    assert sessions["driver-kills"][1]["spark.ui.enabled"] == "true"  # the moment kills read the status API
    assert sessions["task-failures"][0] != sessions["driver-kills"][0]  # task retries: local[N,F]
    assert sessions["zombies"][0].startswith("local-cluster[")
    assert sessions["zombies"][1]["spark.storage.blockManagerHeartbeatTimeoutMs"] == "6000ms"


def test_no_session_is_guessed_where_only_the_run_can_tell_it():
    """A standalone cluster's master is its run's own URL; a connector's own system may put the endpoints the stack
    gives it in the settings; a connector that does not load fails its own run, not the one before."""
    from streamcert.harness.scenario import Scenario, driver_session

    assert driver_session(Scenario("plain")) is not None
    assert driver_session(Scenario("cluster", master="standalone")) is None
    assert driver_session(Scenario("lake", source="streamcert-kafka", sink="delta-sink")) is None
    assert driver_session(Scenario("broken", sink="tests.harness.scenario_connectors:no_such_sink")) is None
