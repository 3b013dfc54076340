"""The PostgreSQL 2PC sink through the scenario runner: exactly-once across kills at each protocol step."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec
from tests.connectors.scenarios import run

pytestmark = pytest.mark.integration

SINK = "streamcert-pg-2pc"


def _run(stack, tmp_path, schedule: list[FaultSpec]):
    sink_id = f"s{uuid.uuid4().hex[:8]}"
    done = run(stack, tmp_path, sink=SINK, schedule=schedule, options={"sink_id": sink_id}, master="local[2,2]",
               workload=WorkloadSpec(total=1800, keys=30, partitions=3, seed=4))
    return done, sink_id


def _prepared(dsn: str, sink_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select count(*) from pg_prepared_xacts where gid like %s",
                            (f"sc2pc|{sink_id}|%",)).fetchone()[0]


def test_happy_path_writes_each_record_once(stack, tmp_path):
    done, _sink_id = _run(stack, tmp_path, [])
    assert done.result.output["kind"] == "postgres"
    assert done.ids == done.acked
    assert done.failed_checks() == []


@pytest.mark.slow  # the certification's full plan covers it too (tox -e certify); tox -e long runs it
def test_driver_killed_at_each_protocol_step_in_turn_recovers_exactly_once(stack, tmp_path):
    """One query, three crashes: after a task prepared, before the decision, after the decision (before COMMIT
    PREPARED and Spark's commits/N: recovery commits what the decision names, rolls back the rest)."""
    points = ["pg-2pc.after-prepare", "pg-2pc.before-decision", "pg-2pc.after-decision"]
    schedule = [FaultSpec("driver_kill_at", "driver", 0, 0, {"point": point}, after=index - 1 if index else None)
                for index, point in enumerate(points)]
    done, sink_id = _run(stack, tmp_path, schedule)
    assert [(e["point"], e["reached"]) for e in done.events("fault-start")] == [(p, True) for p in points]
    assert done.ids == done.acked  # no loss, no duplicate
    assert done.failed_checks() == []
    assert done.result.driver_attempts == 4
    assert _prepared(stack.endpoints.postgres_dsn, sink_id) == 0  # recovered, committed or rolled back


def test_a_task_attempt_failing_after_prepare_leaves_an_orphan_that_is_rolled_back(stack, tmp_path):
    schedule = [FaultSpec("task_fail_at", "executor", 0, 0, {"point": "pg-2pc.after-prepare"})]
    done, sink_id = _run(stack, tmp_path, schedule)
    assert done.events("fault-start")[0]["reached"] is True
    assert done.ids == done.acked  # the failed attempt's prepared rows were never committed
    assert _prepared(stack.endpoints.postgres_dsn, sink_id) == 0  # and not left prepared either
