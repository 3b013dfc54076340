"""The batch aggregator in a real driver process (source -> aggregator -> Kafka 2PC sink): size and time flushes,
per-key order, exactly-once across a kill at the batch boundary, and a rescale through the offline state
repartition with records still buffered."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pandas as pd
import pytest

from streamcert.connectors.aggregator import ROCKSDB_PROVIDER
from streamcert.harness.verify.checkers import AggregatorBatchChecker, exactly_once_checkers, run_checks
from streamcert.harness.run.checkpoint import state_partitions
from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.driver import RescaleFault
from streamcert.harness.faults.points import DriverPointFault
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic, read_topic
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec, decode_values, load_topic

pytestmark = pytest.mark.integration

MAX_BATCH = 40


def _driver(stack, tmp_path, max_wait_ms: int, trigger: str = "500 milliseconds") -> DriverProcess:
    bootstrap = stack.endpoints.bootstrap_servers
    name = uuid.uuid4().hex[:8]
    create_topic(bootstrap, f"agg-in-{name}", partitions=3)
    create_topic(bootstrap, f"agg-out-{name}", partitions=2)
    spec = QuerySpec("tests.connectors.aggregator_queries:kafka_batches_to_kafka", str(tmp_path / "checkpoint"),
                     {"bootstrap": bootstrap, "topic": f"agg-in-{name}", "output": f"agg-out-{name}",
                      "sink_id": f"a{name}", "max_batch_size": MAX_BATCH, "max_wait_ms": max_wait_ms,
                      "key_groups": 8, "max_records_per_batch": 5000, "trigger": trigger},
                     master="local[2,2]",
                     spark_conf={"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                                 "spark.sql.shuffle.partitions": "4"})
    return DriverProcess(spec, tmp_path / "driver", run_token=stack.run_token)


def _load(stack, driver, total: int = 1200):
    driver.wait_for(lambda d: d.checkpoint().latest_commit is not None, "the first batch", timeout=180)
    return load_topic(stack.endpoints.bootstrap_servers, driver.spec.params["topic"],
                      WorkloadSpec(total=total, keys=30, partitions=3, aborted_fraction=0.1,
                                   transaction_records=40, seed=11))


def _batches(stack, driver) -> list[dict]:
    rows = read_topic(stack.endpoints.bootstrap_servers, driver.spec.params["output"])
    return [json.loads(value) for _p, _o, _k, value in rows]


def _flatten(batches: list[dict]) -> pd.DataFrame:
    """One row per emitted record, in delivery order: what the checkers judge."""
    items = [(b, item) for b in batches for item in b["items"]]
    frame = decode_values([base64.b64decode(item["value"]) for _b, item in items])
    frame["key"] = [item["key"] for _b, item in items]
    frame["batch_id"] = [f"{b['key_group']}-{b['group_batch']}" for b, _i in items]
    frame["emitted_at"] = [b["emitted_at_ms"] / 1000 for b, _i in items]
    frame["position"] = range(len(items))
    return frame


def _run(stack, driver, ledger, during=None) -> list[dict]:
    acked = int((ledger.frame["status"] == "acked").sum())
    if during is not None:
        during(driver)
    driver.wait_for(lambda _d: len(_flatten(_batches(stack, driver))) >= acked, "every record emitted",
                    timeout=300)
    return _batches(stack, driver)


def _assert_contract(ledger, batches: list[dict], max_wait_ms: int, slack_ms: int = 20_000) -> None:
    """Exactly once, per-key order, batch rules; flushes no later than ``max_wait_ms + slack_ms`` (the slack
    covers trigger delay and batch time, plus any outage the test caused)."""
    checkers = exactly_once_checkers() + [AggregatorBatchChecker(MAX_BATCH, max_wait_ms / 1000, slack_ms / 1000)]
    results = run_checks(checkers, ledger.for_checkers(), _flatten(batches))
    assert [r.name for r in results if r.valid is not True] == [], [r.to_dict() for r in results]
    size = [b for b in batches if b["reason"] == "size"]
    timed = [b for b in batches if b["reason"] == "time"]
    assert size and timed  # both flush rules happened
    assert all(len(b["items"]) == MAX_BATCH for b in size)
    assert all(0 < len(b["items"]) < MAX_BATCH for b in timed)
    # a time flush waits for the deadline, and not much longer than a few batches past it
    waits = [b["emitted_at_ms"] - b["oldest_arrived_ms"] for b in timed]
    assert min(waits) >= max_wait_ms and max(waits) <= max_wait_ms + slack_ms, waits


def test_size_and_time_flushes_keep_key_order_and_emit_everything_once(stack, tmp_path):
    driver = _driver(stack, tmp_path, max_wait_ms=2000)
    with driver:
        ledger = _load(stack, driver)
        batches = _run(stack, driver, ledger)
    # the last records of every group are flushed by timers in batches that read no input
    _assert_contract(ledger, batches, 2000)


def test_a_driver_killed_after_the_sink_committed_and_before_spark_did_replays_the_same_batches(stack, tmp_path):
    driver = _driver(stack, tmp_path, max_wait_ms=2000)
    history = History()

    def kill(driver):
        driver.wait_for(lambda _d: len(_batches(stack, driver)) > 0, "a first emitted batch", timeout=180)
        fault = DriverPointFault(FaultSpec("driver_kill_at", "driver", 0, 0, {"point": "kafka-2pc.after-commit"}),
                                 FaultContext(driver=driver, history=history, workdir=tmp_path))
        fault.start()
        fault.stop()

    with driver:
        ledger = _load(stack, driver)
        batches = _run(stack, driver, ledger, kill)
    assert history.events("fault-start")[0]["reached"] is True
    assert history.events("fault-start")[0]["pending_batch"] is not None  # output committed, Spark's commit not
    _assert_contract(ledger, batches, 2000)


def test_rescale_through_the_offline_state_repartition_keeps_buffered_records(stack, tmp_path):
    max_wait_ms = 15_000  # long enough that groups still buffer records while the query is stopped
    driver = _driver(stack, tmp_path, max_wait_ms=max_wait_ms, trigger="2 seconds")
    history = History()
    began = {}

    def rescale(driver):
        driver.wait_for(lambda _d: len(_batches(stack, driver)) > 0, "a first emitted batch", timeout=180)
        began["at_ms"] = time.time() * 1000
        fault = RescaleFault(FaultSpec("rescale", "driver", 0, 0, {"parallelism": 1, "state_partitions": 2}),
                             FaultContext(driver=driver, history=history, workdir=tmp_path))
        fault.start()
        fault.stop()

    with driver:
        ledger = _load(stack, driver)
        batches = _run(stack, driver, ledger, rescale)
    start = history.events("fault-start")[0]
    assert (start["state_partitions_before"], start["state_partitions_after"]) == (4, 2)
    assert state_partitions(driver.spec.checkpoint) == 2
    # records buffered before the stop were flushed by their timers after the restart: state and timers moved
    restarted_ms = history.events("fault-stop")[0]["time"] * 1000
    assert any(b["reason"] == "time" and b["oldest_arrived_ms"] < began["at_ms"] and b["emitted_at_ms"] > restarted_ms
               for b in batches)
    _assert_contract(ledger, batches, max_wait_ms, slack_ms=240_000)
