"""The offset source across driver kills and rescale, in a real driver process, into an exactly-once sink."""

from __future__ import annotations

import uuid

import pytest

from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.run.observers.files import read_committed_table
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.verify.spark_events import event_log_conf, read_events
from streamcert.harness.run.workload import WorkloadSpec, decode_values, load_topic

pytestmark = pytest.mark.integration


def _setup(stack, tmp_path, partitions: int, total: int, parallelism: int, **params):
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"rec-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=partitions)
    ledger = load_topic(bootstrap, topic, WorkloadSpec(total=total, keys=40, partitions=partitions,
                                                       aborted_fraction=0.1, transaction_records=50, seed=9))
    spec = QuerySpec("tests.connectors.source_queries:kafka_to_files", str(tmp_path / "checkpoint"),
                     {"bootstrap": bootstrap, "topic": topic, "path": str(tmp_path / "out"),
                      "parallelism": parallelism, **params},
                     master="local[2,2]", spark_conf=event_log_conf(tmp_path / "events"))
    return ledger, DriverProcess(spec, tmp_path / "driver", run_token=stack.run_token)


def _acked(ledger) -> list[int]:
    return sorted(ledger.frame.loc[ledger.frame["status"] == "acked", "id"])


def _wait_all(driver, tmp_path, expected: int) -> list[int]:
    def done(_driver) -> bool:
        table = read_committed_table(tmp_path / "out")
        return table is not None and table.num_rows >= expected

    driver.wait_for(done, f"{expected} committed rows", timeout=240)
    table = read_committed_table(tmp_path / "out")
    return sorted(decode_values(table.column("value").to_pylist())["id"])


def _tasks_per_stage(events, application: int) -> list[int]:
    apps, current = [], None
    for event in events:
        if event["Event"] == "SparkListenerApplicationStart":
            current = []
            apps.append(current)
        elif event["Event"] == "SparkListenerStageCompleted" and current is not None:
            current.append(event["Stage Info"]["Number of Tasks"])
    return apps[application]


@pytest.mark.slow  # the mutants and the certification cover it too; tox -e long runs it
def test_rescale_from_one_reader_task_to_three_loses_and_repeats_nothing(stack, tmp_path):
    ledger, driver = _setup(stack, tmp_path, partitions=4, total=3000, parallelism=1)
    history = History()
    with driver:
        driver.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= 2, "three committed batches", timeout=240)
        fault = build_fault(FaultSpec("rescale", "driver", 0, 0, {"parallelism": 3}),
                            FaultContext(driver=driver, history=history, workdir=tmp_path / "faults"))
        fault.start()
        fault.stop()
        ids = _wait_all(driver, tmp_path, len(_acked(ledger)))
    assert ids == _acked(ledger)
    events = read_events(tmp_path / "events")
    assert max(_tasks_per_stage(events, 0)) == 1
    assert max(_tasks_per_stage(events, 1)) == 3  # 4 partitions over 3 reader tasks
    assert history.events("fault-stop")[0]["parallelism"] == 3


@pytest.mark.slow  # the mutants and the certification cover it too; tox -e long runs it
def test_driver_kill_between_offsets_and_commit_then_other_batch_size_is_exactly_once(stack, tmp_path):
    ledger, driver = _setup(stack, tmp_path, partitions=3, total=2400, parallelism=2)
    history = History()
    with driver:
        kill = build_fault(FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 2}),
                           FaultContext(driver=driver, history=history, workdir=tmp_path / "faults"))
        kill.start()
        assert history.events("fault-start")[0]["in_window"] is True
        driver.spec = driver.spec.replace(params={**driver.spec.params, "max_records_per_batch": 700})
        kill.stop()
        ids = _wait_all(driver, tmp_path, len(_acked(ledger)))
    assert ids == _acked(ledger)
