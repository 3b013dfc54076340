"""The Kafka 2PC sink in a real driver process: exactly-once across driver kills, task retries, broker restarts
and rescale, read back with read_committed and judged by the exactly-once checkers (incl. per-key order)."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from streamcert.connectors.row_blocks import decode_block
from streamcert.harness.verify.checkers import exactly_once_checkers, run_checks
from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.driver import RescaleFault
from streamcert.harness.faults.points import DriverPointFault, TaskPointFault
from streamcert.harness.faults.servers import BrokerFault
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic, read_topic
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec, decode_values, load_topic

pytestmark = pytest.mark.integration


def _setup(stack, tmp_path, total: int = 2400, parallelism: int = 2):
    bootstrap = stack.endpoints.bootstrap_servers
    name = uuid.uuid4().hex[:8]
    topic, output = f"k2pc-in-{name}", f"k2pc-out-{name}"
    create_topic(bootstrap, topic, partitions=3)
    create_topic(bootstrap, output, partitions=2)
    ledger = load_topic(bootstrap, topic, WorkloadSpec(total=total, keys=30, partitions=3, aborted_fraction=0.1,
                                                       transaction_records=40, seed=5))
    spec = QuerySpec("tests.connectors.sink_queries:kafka_to_kafka", str(tmp_path / "checkpoint"),
                     {"bootstrap": bootstrap, "topic": topic, "output": output, "sink_id": f"s{name}",
                      "parallelism": parallelism, "staging_partitions": 2}, master="local[2,2]")
    return DriverProcess(spec, tmp_path / "driver", run_token=stack.run_token), ledger


def _output(bootstrap: str, topic: str) -> pd.DataFrame:
    rows = read_topic(bootstrap, topic, isolation="read_committed")
    frame = decode_values([value for *_x, value in rows])
    frame["key"] = [key.decode() for _p, _o, key, _v in rows]
    frame["partition"] = [p for p, *_x in rows]
    frame["offset"] = [o for _p, o, *_x in rows]
    return frame


def _run_to_completion(stack, driver, ledger, during=None) -> list:
    bootstrap, output = stack.endpoints.bootstrap_servers, driver.spec.params["output"]
    acked = int((ledger.frame["status"] == "acked").sum())
    with driver:
        if during is not None:
            during(driver)
        driver.wait_for(lambda _d: len(_output(bootstrap, output)) >= acked, "every record committed", timeout=240)
    results = run_checks(exactly_once_checkers(), ledger.for_checkers(), _output(bootstrap, output))
    assert [r.name for r in results if r.valid is not True] == [], [r.to_dict() for r in results]
    return results


def test_happy_path_is_exactly_once_in_key_order(stack, tmp_path):
    driver, ledger = _setup(stack, tmp_path)
    results = _run_to_completion(stack, driver, ledger)
    assert {r.name: r.counts for r in results}["per_key_order"]["checked"] > 2000


def test_driver_killed_at_each_protocol_step_in_turn_recovers_exactly_once(stack, tmp_path):
    """One query, three crashes: after a task staged, with rows and ledger record written but not committed, and
    after the commit (before Spark's commits/N: the replayed commit must write nothing)."""
    driver, ledger = _setup(stack, tmp_path)
    history = History()
    points = ["kafka-2pc.after-stage", "kafka-2pc.before-commit", "kafka-2pc.after-commit"]

    def kill_at_each(driver):
        for point in points:
            fault = DriverPointFault(FaultSpec("driver_kill_at", "driver", 0, 0, {"point": point}),
                                     FaultContext(driver=driver, history=history, workdir=tmp_path))
            fault.start()
            fault.stop()

    _run_to_completion(stack, driver, ledger, kill_at_each)
    assert [(e["point"], e["reached"]) for e in history.events("fault-start")] == [(p, True) for p in points]
    assert driver.attempt == 4


def test_a_failed_task_attempt_after_staging_leaves_an_orphan_that_is_never_copied(stack, tmp_path):
    driver, ledger = _setup(stack, tmp_path)
    history = History()

    def fail_once(driver):
        fault = TaskPointFault(FaultSpec("task_fail_at", "executor", 0, 0, {"point": "kafka-2pc.after-stage"}),
                               FaultContext(driver=driver, history=history, workdir=tmp_path))
        fault.start()
        fault.stop()

    _run_to_completion(stack, driver, ledger, fail_once)
    assert history.events("fault-start")[0]["reached"] is True
    params = driver.spec.params
    staged = read_topic(stack.endpoints.bootstrap_servers, f"{params['output']}.{params['sink_id']}.staging")
    output = _output(stack.endpoints.bootstrap_servers, params["output"])
    staged_rows = sum(len(decode_block(value)[1]) for *_where, value in staged)
    assert staged_rows > len(output)  # the failed attempt's staged rows are there, committed, and were not copied


def test_rescale_while_a_batch_is_pending_and_a_broker_restart_stay_exactly_once(stack, tmp_path):
    driver, ledger = _setup(stack, tmp_path, total=3000, parallelism=3)
    history = History()

    def faults(driver):
        # dies with rows and ledger record written but not committed; the replay runs with one reader task
        point = DriverPointFault(FaultSpec("driver_kill_at", "driver", 0, 0,
                                           {"point": "kafka-2pc.before-commit"}),
                                 FaultContext(driver=driver, history=history, workdir=tmp_path))
        point.start()
        rescale = RescaleFault(FaultSpec("rescale", "driver", 0, 0, {"parallelism": 1}),
                               FaultContext(driver=driver, history=history, workdir=tmp_path))
        rescale.start()
        rescale.stop()
        driver.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= 2, "progress after the rescale",
                        timeout=180)
        broker = BrokerFault(FaultSpec("broker_kill", "kafka", 0, 0, {}),
                             FaultContext(environment=stack, history=history, workdir=tmp_path))
        broker.start()
        broker.stop()

    _run_to_completion(stack, driver, ledger, faults)
    assert [e["fault"] for e in history.events("fault-start")] == ["driver_kill_at", "rescale", "broker_kill"]
