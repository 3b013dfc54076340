"""A scenario end to end with a trivial connector: clean run passes; a driver kill exposes at-least-once."""

from __future__ import annotations

import json
import time

import pytest

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.scenario import (SCHEMA_FILE, Scenario, _check_brokers, _Run, _tear_down, json_schema,
                                        run_scenario)
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec

pytestmark = pytest.mark.integration

SINK = "tests.harness.scenario_connectors:AtLeastOnceKafkaSink"


def _by_name(result):
    return {check["name"]: check for check in result.checks}


def test_clean_run_is_valid_and_reports_metrics(stack, tmp_path):
    scenario = Scenario("clean", sink=SINK, trigger="100 milliseconds",
                        workload=WorkloadSpec(total=1500, keys=20, partitions=2, seed=5),
                        options={"max_records_per_batch": 300}, master="local[2,2]")
    result = run_scenario(stack, scenario, tmp_path)
    assert result.complete and result.error is None, result.error
    assert result.valid is True, [c for c in result.checks if c["valid"] is not True]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["schema_version"] == 2 and saved["complete"] is True and saved["seed"] == 5
    assert saved["connectors"]["sink"]["name"] == "test-at-least-once-kafka"
    assert saved["connectors"]["sink"]["unclaimed"]["SNK-1"].startswith("at-least-once by design")
    assert saved["connectors"]["source"]["reference"] == "streamcert-kafka" and saved["output"]["kind"] == "kafka"
    assert Scenario.from_dict(saved["scenario"]) == scenario  # reproducible from results.json
    assert saved["metrics"]["throughput"]["records"] == 1500
    assert saved["metrics"]["latency_ms"]["count"] == 1500 and saved["metrics"]["latency_ms"]["p50"] > 0
    # a Spark run keeps a core busy for seconds: the window spans the run
    assert saved["cpu"]["busy_s"] > 1.0 and abs(saved["cpu"]["wall_s"] - saved["duration_s"]) < 1.0


@pytest.mark.slow  # the mutants and the certification cover it too; tox -e long runs it
def test_driver_killed_at_the_sinks_fault_point_makes_an_at_least_once_sink_duplicate(stack, tmp_path):
    """The named point sits after the sink wrote and before Spark commits: the replay must duplicate."""
    scenario = Scenario("point", sink=SINK, trigger="100 milliseconds",
                        workload=WorkloadSpec(total=1200, keys=10, partitions=2, seed=6),
                        schedule=[FaultSpec("driver_kill_at", "driver", 0.0, 0.0, {"point": "after-batch-write"})],
                        options={"max_records_per_batch": 200}, master="local[2,2]")
    result = run_scenario(stack, scenario, tmp_path)
    assert result.complete, result.error
    [start] = [e for e in result.history if e["kind"] == "fault-start"]
    assert start["reached"] is True and start["pending_batch"] is not None
    checks = _by_name(result)
    assert checks["duplicate"]["valid"] is False and checks["duplicate"]["counts"]["extra_deliveries"] > 0
    assert checks["lost"]["valid"] is True  # replay re-delivers, it does not lose
    assert result.valid is False


@pytest.mark.slow  # the mutants and the certification cover it too; tox -e long runs it
def test_checkpoint_aware_driver_kill_lands_in_the_window_and_loses_nothing(stack, tmp_path):
    scenario = Scenario("kill", sink=SINK, trigger="100 milliseconds",
                        workload=WorkloadSpec(total=1200, keys=10, partitions=2, seed=7),
                        schedule=[FaultSpec("driver_kill", "driver", 0.0, 0.0, {"min_batch": 1})],
                        options={"max_records_per_batch": 200, "commit_delay_ms": 300}, master="local[2,2]")
    result = run_scenario(stack, scenario, tmp_path)
    assert result.complete, result.error
    [start] = [e for e in result.history if e["kind"] == "fault-start"]
    assert start["in_window"] is True and start["pending_batch"] >= 1
    assert start["latest_commit"] is None or start["latest_commit"] < start["pending_batch"]
    assert _by_name(result)["fault_reached"]["valid"] is True  # the kill landed where it was aimed
    checks = _by_name(result)
    # Whether the replay duplicates depends on where in the window the kill landed; loss never happens.
    assert checks["lost"]["valid"] is True and checks["unexpected"]["valid"] is True
    assert any(e["kind"] == "fault-stop" for e in result.history)


def test_the_scenario_in_results_json_is_the_scenario_that_ran():
    """A run is reproduced from its results.json: the recorded scenario reads back equal, schedule and seed too."""
    scenario = Scenario("replay", sink=SINK, aggregator="streamcert-batch-aggregator", options={"max_wait_ms": 5},
                        workload=WorkloadSpec(total=10, seed=42),
                        schedule=[FaultSpec("driver_kill_at", "driver", 1.0, 0.0, {"point": "p"}),
                                  FaultSpec("latency", "kafka", 0.0, 2.0, {"latency": 50}, "upstream", after=0)])
    recorded = json.loads(json.dumps(scenario.as_dict()))
    assert Scenario.from_dict(recorded) == scenario


def test_a_run_that_fails_still_writes_its_results_marked_incomplete(stack, tmp_path):
    scenario = Scenario("broken", sink="tests.harness.scenario_connectors:no_such_sink",
                        workload=WorkloadSpec(total=10))
    result = run_scenario(stack, scenario, tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert result.complete is False and saved["complete"] is False
    assert "no_such_sink" in saved["error"] and saved["valid"] == "unknown"
    assert saved["scenario"]["name"] == "broken"


def test_open_loop_scenario_with_a_network_fault_reports_recovery(stack, tmp_path):
    """Locust at 200 records/s for 12 s; the Kafka link goes down for 2 s; nothing is lost, recovery is measured."""
    scenario = Scenario("open", sink=SINK, trigger="100 milliseconds",
                        workload=WorkloadSpec(total=2400, keys=20, partitions=2, rate=200.0, seed=8),
                        schedule=[FaultSpec("down", "kafka", 5.0, 2.0)], options={"max_records_per_batch": 500},
                        master="local[2,2]", load="open_loop", load_duration_s=12.0)
    result = run_scenario(stack, scenario, tmp_path)
    assert result.complete, result.error
    checks = _by_name(result)
    assert checks["lost"]["valid"] is True and checks["unexpected"]["valid"] is True
    assert result.metrics["load"]["requests"] > 0 and result.metrics["load"]["target_rate"] == 200.0
    [recovery] = result.metrics["recovery"]
    assert recovery["fault"] == "down" and recovery["stop_s"] - recovery["start_s"] >= 1.9
    assert "recovery_s" in recovery


def test_a_schedule_entry_after_itself_is_refused_when_the_scenario_is_made():
    """An entry that waits for itself (or a later one) would never start: refused at once, naming the entry."""
    with pytest.raises(ConfigurationError, match="schedule entry 0: after=0 does not name an earlier entry"):
        Scenario("cycle", sink=SINK, schedule=[FaultSpec("down", "kafka", 0.0, 1.0, after=0)])


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("parallelism", 0, "parallelism: Input should be greater than or equal to 1 (got 0)"),
    ("master", "local[two]", "'local[two]' is not a Spark master URL"),
    ("load", "closed_loop", "load: Input should be 'bulk' or 'open_loop'"),
    ("quiet_timeout_s", float("inf"), "quiet_timeout_s"),
    ("workload", WorkloadSpec(total=0), "total=0 is not valid"),
    ("surprise", 1, "surprise: Extra inputs are not permitted"),
    ("brokers", 0, "brokers: Input should be greater than or equal to 1"),
    ("topics", {"replication_factor": 2, "min_insync_replicas": 3}, "exceeds replication_factor 2"),
    ("topics", {"replication_factor": 0}, "replication_factor must be at least 1"),
])
def test_a_bad_scenario_field_is_a_configuration_error_naming_it(field, value, needle):
    with pytest.raises(ConfigurationError) as caught:
        Scenario("bad", **{field: value})
    assert needle in str(caught.value) and caught.value.hint  # the field's own check, or the schema's bounds


def test_the_committed_scenario_schema_is_the_generated_one():
    assert SCHEMA_FILE.read_text() == json_schema(), \
        "run python -m streamcert.harness.scenario --write-schema and commit the file"


def test_records_missing_after_the_observer_died_are_unknown_not_lost():
    """A dead reader cannot tell a lost record from an unread one; a duplicate it did read is still a finding."""
    import pandas as pd

    from streamcert.harness.scenario import _unread_is_not_lost
    from streamcert.harness.verify.checkers import combined_valid, exactly_once_checkers, run_checks

    ledger = pd.DataFrame({"id": [0, 1, 2], "key": ["a"] * 3, "seq": [0, 1, 2], "produced_at": [1.0] * 3,
                           "aborted": [False] * 3, "status": ["acked"] * 3})
    read = ledger.iloc[[0]][["id", "key", "seq"]]
    results = run_checks(exactly_once_checkers(), ledger, read)
    assert combined_valid(results) is False  # without the rule: two records "lost"
    _unread_is_not_lost(results, "KafkaException: fatal")
    [lost] = [r for r in results if r.name == "lost"]
    assert lost.valid == "unknown" and "not known lost" in lost.error and combined_valid(results) == "unknown"
    twice = run_checks(exactly_once_checkers(), ledger, pd.concat([read, read]))
    _unread_is_not_lost(twice, "KafkaException: fatal")
    assert combined_valid(twice) is False  # the duplicate stands


def test_a_folder_that_holds_an_earlier_run_is_refused_before_anything_starts(tmp_path):
    """A query would resume from the old checkpoint, and the old output would be judged as this run's."""
    (tmp_path / "checkpoint" / "offsets").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="holds an earlier run"):
        run_scenario(None, Scenario(name="again"), tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_a_scenario_needing_a_cluster_is_refused_on_one_broker_before_anything_starts(stack, tmp_path):
    """The cluster size and replica counts a scenario asks for are checked against the stack's metadata first."""
    with pytest.raises(ConfigurationError, match=r"needs 3 Kafka broker\(s\); .* lists 1 \(ids \[1\]\)") as caught:
        run_scenario(stack, Scenario("failover", brokers=3), tmp_path / "three")
    assert "--brokers 3" in caught.value.hint and not (tmp_path / "three" / "results.json").exists()
    with pytest.raises(ConfigurationError, match="replication factor 2 .* lists 1 broker"):
        run_scenario(stack, Scenario("rf2", topics={"replication_factor": 2}), tmp_path / "rf2")


def test_a_kafka_that_does_not_answer_the_broker_count_is_a_startup_error_naming_it():
    """Counting brokers on a closed port is one paragraph naming the address and a hint, not a KafkaException."""
    began = time.monotonic()
    with pytest.raises(StartupFailed, match=r"Kafka at 127\.0\.0\.1:1 did not answer") as caught:
        _check_brokers(Scenario("three", brokers=3), "127.0.0.1:1", timeout=1.0)
    assert "streamcert env check" in caught.value.hint
    assert time.monotonic() - began < 10


def test_warm_up_records_are_left_out_of_what_is_judged_and_a_direct_path_refuses_proxy_faults():
    import pandas as pd

    from streamcert.harness.scenario import WARM_UP_ID_BASE, _without_warm_up

    output = pd.DataFrame({"id": [1, WARM_UP_ID_BASE, WARM_UP_ID_BASE + 2, WARM_UP_ID_BASE + 3, 2]})
    assert _without_warm_up(output, 3)["id"].tolist() == [1, WARM_UP_ID_BASE + 3, 2]
    assert _without_warm_up(output, 0) is output
    with pytest.raises(ConfigurationError, match="bypasses"):
        Scenario("direct", kafka_path="direct", schedule=[FaultSpec("latency", "kafka", 1.0, 1.0, {"latency": 50})])
    assert Scenario("direct", kafka_path="direct", schedule=[FaultSpec("broker_pause", "kafka", 1.0, 1.0)])


def test_a_fed_load_needs_a_batch_size_and_a_bulk_load_while_the_query_runs():
    with pytest.raises(ConfigurationError, match="max_records_per_batch"):
        Scenario(name="fed", feed_batches_ahead=4)
    with pytest.raises(ConfigurationError, match="load_before_start"):
        Scenario(name="fed", feed_batches_ahead=4, options={"max_records_per_batch": 60}, load_before_start=True)
    assert Scenario(name="fed", feed_batches_ahead=4, options={"max_records_per_batch": 60}).feed_batches_ahead == 4


def test_a_run_torn_down_mid_schedule_stops_its_fault_timeline_before_the_faults_and_the_driver():
    """Session 27: a SIGTERMed mutation score left a driver attempt and two standbys running, started by a driver
    kill's heal in the fault timeline's thread after the teardown had stopped the driver. The teardown abandons a
    timeline still running and waits for it first; one that finished is left alone."""
    import threading

    from streamcert.harness.faults.schedule import FaultSpec
    from streamcert.harness.faults.timeline import FaultTimeline
    from streamcert.harness.run.history import History

    order: list[str] = []
    started = threading.Event()

    class _Held:
        def start(self) -> None:
            started.set()

        def stop(self) -> None:
            order.append("heal")  # a driver kill's heal restarts the driver

        def cancel(self) -> None:
            pass

    class _Driver:
        def stop(self) -> None:
            order.append("driver stopped")

    fault = _Held()
    timeline = FaultTimeline([FaultSpec("driver_kill", "driver", 0.0, 600.0)], [fault], History()).start()
    assert started.wait(10)
    _tear_down(_Run(driver=_Driver(), faults=[fault], timeline=timeline))
    assert timeline.done()
    assert order == ["heal", "heal", "driver stopped"]  # the timeline's heal, then the teardown's (idempotent)
