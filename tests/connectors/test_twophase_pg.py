"""The 2PC protocol on real PostgreSQL prepared transactions (no Spark): commit, replay, orphans, recovery, abort."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from streamcert.connectors.pg_participant import (PostgresDecisionLog, PostgresParticipant, PostgresSession, arrow_rows,
                                                 ensure_table, prepare_rows)
from streamcert.connectors.twophase import Coordinator, TxnId, in_commit_order, validate_sink_id
from streamcert.harness.errors import ConfigurationError


def test_txn_id_round_trip_and_foreign_ids():
    txn = TxnId.new("sink-1", 42, 3, 1)
    assert TxnId.parse(str(txn)) == txn and str(txn).startswith(TxnId.prefix("sink-1"))
    assert TxnId.parse("someone-else's") is None and TxnId.parse("sc2pc|s|x|1|1|n") is None


def test_transactions_commit_by_batch_then_partition_as_numbers_not_text():
    ids = [str(TxnId("s", batch, partition, 0, "n")) for batch, partition in [(3, 10), (3, 2), (2, 11), (3, 0)]]
    ordered = in_commit_order([*ids, "someone-else's"])
    assert [(TxnId.parse(t).batch_id, TxnId.parse(t).partition) for t in ordered[:4]] == [(2, 11), (3, 0), (3, 2),
                                                                                            (3, 10)]
    assert ordered[4] == "someone-else's"
    assert sorted(ids) != ordered[:4]  # as text, partition 10 would commit before partition 2


def test_arrow_batches_become_rows_of_python_values_in_column_order():
    import datetime

    import pyarrow as pa

    moment = datetime.datetime(2026, 11, 28, 5, 0, tzinfo=datetime.timezone.utc)
    first = pa.RecordBatch.from_pydict({"id": pa.array([1, 2], pa.int64()), "name": ["a", None],
                                        "body": pa.array([b"x", b""], pa.binary()),
                                        "at": pa.array([moment, None], pa.timestamp("us", tz="UTC"))})
    second = pa.RecordBatch.from_pydict({"id": pa.array([3], pa.int64()), "name": ["c"],
                                         "body": pa.array([None], pa.binary()),
                                         "at": pa.array([moment], pa.timestamp("us", tz="UTC"))})
    assert list(arrow_rows(iter([first, second]))) == [(1, "a", b"x", moment), (2, None, b"", None),
                                                      (3, "c", None, moment)]
    assert list(arrow_rows(iter([]))) == []


def test_sink_ids_are_checked():
    with pytest.raises(ConfigurationError, match="sinkId"):
        validate_sink_id("has space")


def test_pg_sink_options_are_read_case_insensitively_and_problems_named():
    from streamcert.connectors.pg_sink import _options

    given = {"DSN": " host=h ", "table": "t", "sinkid": "s", "checkpointLocation": "/cp"}
    assert _options(given) == ("host=h", "t", "s")
    for options, needle in [({"dsn": "d", "table": "t"}, "Option sinkId is missing for the streamcert-pg-2pc sink"),
                            ({"dsn": "d", "table": " ", "sinkId": "s"}, "table=' '"),
                            ({"dsn": "d", "table": "t", "sinkId": "s", "tabel": "x"},
                             "Unknown option(s) for the streamcert-pg-2pc sink: tabel"),
                            ({"dsn": "d", "table": "t", "sinkId": "a b"}, "sinkId 'a b' is not valid")]:
        with pytest.raises(ConfigurationError) as info:
            _options(options)
        assert needle in str(info.value) and "Hint:" in str(info.value)


@pytest.fixture
def pg(stack):
    dsn = stack.endpoints.postgres_dsn
    table = f"out_{uuid.uuid4().hex[:8]}"
    ensure_table(dsn, table, [("id", "bigint")])
    sink = f"sink-{uuid.uuid4().hex[:8]}"
    coordinator = Coordinator(sink, PostgresParticipant(dsn), PostgresDecisionLog(dsn), "test")
    return dsn, table, sink, coordinator


def _prepare(dsn, table, sink, batch, partition, ids, attempt=0) -> str:
    txn = TxnId.new(sink, batch, partition, attempt)
    prepare_rows(dsn, table, ["id"], [(i,) for i in ids], txn)
    return str(txn)


def _ids(dsn, table) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return sorted(row[0] for row in conn.execute(f"select id from {table}"))




@pytest.mark.integration
def test_commit_makes_named_transactions_visible_and_rolls_back_orphans(pg):
    dsn, table, sink, coordinator = pg
    first = _prepare(dsn, table, sink, 0, 0, [1, 2])
    second = _prepare(dsn, table, sink, 0, 1, [3])
    orphan = _prepare(dsn, table, sink, 0, 1, [99], attempt=0)  # a failed attempt that prepared, then died
    assert _ids(dsn, table) == []  # readers never see prepared data
    coordinator.commit(0, [first, second])
    assert _ids(dsn, table) == [1, 2, 3]
    assert coordinator.participant.prepared(sink) == []
    assert orphan not in coordinator.log.decision(sink, 0)


@pytest.mark.integration
def test_a_commit_in_a_session_does_all_its_work_on_one_connection(pg, monkeypatch):
    from streamcert.connectors import pg_participant

    dsn, table, sink, _coordinator = pg
    named = [_prepare(dsn, table, sink, 0, partition, [partition]) for partition in range(3)]
    orphan = _prepare(dsn, table, sink, 0, 3, [99])
    opened = []
    real_connect = pg_participant.psycopg.connect
    monkeypatch.setattr(pg_participant.psycopg, "connect", lambda *a, **k: opened.append(a) or real_connect(*a, **k))
    with PostgresSession(dsn) as session:
        Coordinator(sink, PostgresParticipant(dsn, session), PostgresDecisionLog(dsn, session), "test").commit(0, named)
    monkeypatch.undo()
    assert len(opened) == 1  # recovery, the decision, three commits and the orphan's rollback: one connection
    assert _ids(dsn, table) == [0, 1, 2] and orphan not in PostgresDecisionLog(dsn).decision(sink, 0)
    session.close()  # closing again, or a session never opened, does nothing
    PostgresSession(dsn).close()


@pytest.mark.integration
def test_a_replayed_commit_is_a_no_op_and_the_first_decision_stands(pg):
    dsn, table, sink, coordinator = pg
    txn = _prepare(dsn, table, sink, 0, 0, [1])
    assert coordinator.commit(0, [txn]) == [txn]
    late = _prepare(dsn, table, sink, 0, 0, [1], attempt=1)  # a replay that wrote again
    assert coordinator.commit(0, [late]) == [txn]
    assert _ids(dsn, table) == [1]
    assert coordinator.participant.prepared(sink) == []


@pytest.mark.integration
def test_recovery_commits_decided_and_rolls_back_undecided(pg):
    dsn, table, sink, coordinator = pg
    decided = _prepare(dsn, table, sink, 1, 0, [10])
    coordinator.log.record(sink, 1, [decided])  # the driver died after the decision, before COMMIT PREPARED
    undecided = _prepare(dsn, table, sink, 2, 0, [20])  # died before any decision
    outcome = coordinator.recover()
    assert outcome == {"committed": [decided], "rolled_back": [undecided]}
    assert _ids(dsn, table) == [10]
    assert coordinator.decided(1) and not coordinator.decided(2)


@pytest.mark.integration
def test_abort_rolls_back_but_never_undoes_a_decided_batch(pg):
    dsn, table, sink, coordinator = pg
    failed = _prepare(dsn, table, sink, 3, 0, [30])
    coordinator.abort(3, [failed])
    assert _ids(dsn, table) == [] and coordinator.participant.prepared(sink) == []
    kept = _prepare(dsn, table, sink, 4, 0, [40])
    coordinator.log.record(sink, 4, [kept])
    coordinator.abort(4, [kept])
    assert _ids(dsn, table) == [40]


@pytest.mark.integration
def test_a_zombie_attempt_preparing_after_the_decision_is_fenced(pg):
    dsn, table, sink, coordinator = pg
    real = _prepare(dsn, table, sink, 0, 0, [1])
    coordinator.commit(0, [real])
    zombie = _prepare(dsn, table, sink, 0, 0, [666], attempt=1)  # an old attempt, still running
    coordinator.commit(1, [])  # the next batch's commit sweeps orphans of decided batches
    assert zombie not in coordinator.participant.prepared(sink)
    assert _ids(dsn, table) == [1]


@pytest.mark.integration
def test_commit_leaves_later_batches_in_flight_alone(pg):
    dsn, table, sink, coordinator = pg
    now = _prepare(dsn, table, sink, 4, 0, [4])
    in_flight = _prepare(dsn, table, sink, 5, 0, [5])  # the next batch, still being written
    coordinator.commit(4, [now])
    assert coordinator.participant.prepared(sink) == [in_flight]
    assert _ids(dsn, table) == [4]


@pytest.mark.integration
def test_a_decided_transaction_that_vanished_is_reported_not_ignored(pg):
    dsn, table, sink, coordinator = pg
    txn = _prepare(dsn, table, sink, 0, 0, [1])
    coordinator.log.record(sink, 0, [txn])
    coordinator.participant.rollback_prepared(txn)  # what a buggy recovery would do
    with pytest.raises(RuntimeError, match="rows are lost"):
        coordinator.commit(0, [txn])


class _Task:
    """What the sink's ``write`` reads of pyspark's TaskContext."""

    def __init__(self, batch: int, partition: int, attempt: int = 0) -> None:
        self.batch, self.partition, self.attempt = batch, partition, attempt

    def getLocalProperty(self, key):
        return str(self.batch) if key == "streaming.sql.batchId" else None

    def partitionId(self):
        return self.partition

    def attemptNumber(self):
        return self.attempt


@pytest.mark.integration
def test_a_task_looks_up_the_decision_and_prepares_its_rows_on_one_connection_and_tables_are_made_once(
        stack, monkeypatch):
    """A batch asked PostgreSQL ~30 round trips, each slowed by the network faults' latency: the tables' check in
    every writer Spark builds (twice a batch), and two connections a task. Now: the tables once per process, one
    connection a task; the prepared transaction and its marker are still one, and a replay still prepares nothing."""
    import pyarrow as pa
    import pyspark
    from pyspark.sql.types import LongType, StructField, StructType

    from streamcert.connectors import pg_participant, pg_sink

    dsn, table, sink = stack.endpoints.postgres_dsn, f"out_{uuid.uuid4().hex[:8]}", f"sink-{uuid.uuid4().hex[:8]}"
    schema = StructType([StructField("id", LongType())])
    opened = []
    real_connect = psycopg.connect
    monkeypatch.setattr(pg_participant.psycopg, "connect", lambda *a, **k: opened.append(a) or real_connect(*a, **k))
    # a connection an earlier test of this worker left idle for the DSN would serve the task without a connect
    monkeypatch.setattr(pg_participant, "_KEPT", {})
    writer = pg_sink.PostgresStreamWriter(dsn, table, sink, schema)
    assert len(opened) == 1  # the tables made sure of
    writer = pg_sink.PostgresStreamWriter(dsn, table, sink, schema)
    assert len(opened) == 1  # the next writer in this process asks nothing
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: _Task(7, 1)))
    message = writer.write(iter([pa.record_batch([pa.array([1, 2, 3], pa.int64())], names=["id"])]))
    assert len(opened) == 2 and message.rows == 3 and len(message.txn_ids) == 1
    participant, log = PostgresParticipant(dsn), PostgresDecisionLog(dsn)
    assert participant.prepared(sink) == message.txn_ids and _ids(dsn, table) == []
    Coordinator(sink, participant, log, "test").commit(7, message.txn_ids)
    assert _ids(dsn, table) == [1, 2, 3]
    with real_connect(dsn) as conn:  # the marker committed with the rows
        assert conn.execute(f"select count(*) from {pg_participant.MARKERS_TABLE} where gid = %s",
                            (message.txn_ids[0],)).fetchone()[0] == 1
    before_replay = len(opened)
    replay = writer.write(iter([pa.record_batch([pa.array([1, 2, 3], pa.int64())], names=["id"])]))
    assert len(opened) == before_replay  # the first task's connection was kept for the worker's next task
    assert replay.skipped_replay and replay.txn_ids == [] and participant.prepared(sink) == []


@pytest.mark.integration
def test_a_kept_connection_the_server_dropped_is_replaced_and_the_task_still_prepares_once(stack, monkeypatch):
    """Kept connections outlive a batch; a server restart (or a network fault) ends them while they wait. The next
    task's first statement fails on it, and the task goes on on a new connection."""
    import pyarrow as pa
    import pyspark
    from pyspark.sql.types import LongType, StructField, StructType

    from streamcert.connectors import pg_participant, pg_sink

    dsn, table, sink = stack.endpoints.postgres_dsn, f"out_{uuid.uuid4().hex[:8]}", f"sink-{uuid.uuid4().hex[:8]}"
    writer = pg_sink.PostgresStreamWriter(dsn, table, sink, StructType([StructField("id", LongType())]))
    rows = [pa.record_batch([pa.array([5, 6], pa.int64())], names=["id"])]
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: _Task(1, 0)))
    first = writer.write(iter(rows))
    [kept] = pg_participant._KEPT[dsn][-1:]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("select pg_terminate_backend(%s)", (kept.info.backend_pid,))
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: _Task(2, 0)))
    second = writer.write(iter(rows))
    assert kept.closed and second.rows == 2 and len(second.txn_ids) == 1
    coordinator = Coordinator(sink, PostgresParticipant(dsn), PostgresDecisionLog(dsn), "test")
    coordinator.commit(1, first.txn_ids)
    coordinator.commit(2, second.txn_ids)
    assert _ids(dsn, table) == [5, 5, 6, 6] and coordinator.participant.prepared(sink) == []
