"""The PostgreSQL 2PC sink in a real driver process: exactly-once across kills at each protocol step."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.points import DriverPointFault, TaskPointFault
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec, decode_values, load_topic

pytestmark = pytest.mark.integration


def _setup(stack, tmp_path, total: int = 1800):
    bootstrap, dsn = stack.endpoints.bootstrap_servers, stack.endpoints.postgres_dsn
    topic, table = f"pg-{uuid.uuid4().hex[:8]}", f"out_{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=3)
    ledger = load_topic(bootstrap, topic, WorkloadSpec(total=total, keys=30, partitions=3, seed=4))
    spec = QuerySpec("tests.connectors.sink_queries:kafka_to_postgres", str(tmp_path / "checkpoint"),
                     {"bootstrap": bootstrap, "topic": topic, "dsn": dsn, "table": table,
                      "sink_id": f"s{uuid.uuid4().hex[:8]}"}, master="local[2,2]")
    expected = sorted(ledger.frame.loc[ledger.frame["status"] == "acked", "id"])
    return DriverProcess(spec, tmp_path / "driver", run_token=stack.run_token), dsn, table, expected


def _ids(dsn: str, table: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        try:
            values = [bytes(row[0]) for row in conn.execute(f"select value from {table}")]
        except psycopg.errors.UndefinedTable:  # the sink creates it when the query starts
            return []
    return sorted(decode_values(values)["id"])


def _prepared(dsn: str, sink_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select count(*) from pg_prepared_xacts where gid like %s",
                            (f"sc2pc|{sink_id}|%",)).fetchone()[0]


def _run(stack, tmp_path, points: list[str]):
    driver, dsn, table, expected = _setup(stack, tmp_path)
    history = History()
    with driver:
        for point in points:
            fault = DriverPointFault(FaultSpec("driver_kill_at", "driver", 0, 0, {"point": point}),
                                     FaultContext(driver=driver, history=history, workdir=tmp_path))
            fault.start()
            fault.stop()
        driver.wait_for(lambda _d: len(_ids(dsn, table)) >= len(expected), "every row committed", timeout=240)
    return history, _ids(dsn, table), expected, (dsn, driver.spec.params["sink_id"])


def test_happy_path_writes_each_record_once(stack, tmp_path):
    _history, ids, expected, _dsn = _run(stack, tmp_path, [])
    assert ids == expected


def test_driver_killed_at_each_protocol_step_in_turn_recovers_exactly_once(stack, tmp_path):
    """One query, three crashes: after a task prepared, before the decision, after the decision (before COMMIT
    PREPARED and Spark's commits/N: recovery commits what the decision names, rolls back the rest)."""
    points = ["pg-2pc.after-prepare", "pg-2pc.before-decision", "pg-2pc.after-decision"]
    history, ids, expected, (dsn, sink_id) = _run(stack, tmp_path, points)
    assert [(e["point"], e["reached"]) for e in history.events("fault-start")] == [(p, True) for p in points]
    assert ids == expected  # no loss, no duplicate
    assert _prepared(dsn, sink_id) == 0  # nothing left prepared: recovered, committed or rolled back


def test_a_task_attempt_failing_after_prepare_leaves_an_orphan_that_is_rolled_back(stack, tmp_path):
    driver, dsn, table, expected = _setup(stack, tmp_path)
    history = History()
    with driver:
        fault = TaskPointFault(FaultSpec("task_fail_at", "executor", 0, 0, {"point": "pg-2pc.after-prepare"}),
                               FaultContext(driver=driver, history=history, workdir=tmp_path))
        fault.start()
        fault.stop()
        driver.wait_for(lambda _d: len(_ids(dsn, table)) >= len(expected), "every row committed", timeout=240)
    assert history.events("fault-start")[0]["reached"] is True
    assert _ids(dsn, table) == expected  # the failed attempt's prepared rows were never committed
    assert _prepared(dsn, driver.spec.params["sink_id"]) == 0  # and not left prepared either
