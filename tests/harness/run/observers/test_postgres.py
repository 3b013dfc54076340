"""The PostgreSQL observer on the real server: a table created after it started, rows of a prepared transaction
invisible until COMMIT PREPARED, keys read when the table has them."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from streamcert.harness.run.observers import OutputTarget, observer_for
from streamcert.harness.run.workload import encode_value
from streamcert.harness.waiting import wait_for

pytestmark = pytest.mark.integration


def test_rows_become_visible_only_when_their_prepared_transaction_commits(stack):
    dsn = stack.endpoints.postgres_dsn
    table, gid = f"obs_{uuid.uuid4().hex[:8]}", f"obs-{uuid.uuid4().hex[:8]}"
    with observer_for(OutputTarget("postgres", table, postgres_dsn=dsn)) as observer, \
            psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"create table {table} (key text, value bytea)")
        conn.execute(f"insert into {table} values ('a', %s), ('b', %s)",
                     (encode_value(1, 1, 1.0, 64), encode_value(2, 1, 1.0, 64)))
        wait_for(lambda: observer.count() == 2, what="the two committed rows", timeout=20)
        with psycopg.connect(dsn) as prepared:
            prepared.execute(f"insert into {table} values ('a', %s)", (encode_value(3, 2, 1.0, 64),))
            prepared.execute(f"prepare transaction '{gid}'")
        time.sleep(1.5)  # several observer rounds
        shown_early = observer.count() > 2
        conn.execute(f"commit prepared '{gid}'")
        wait_for(lambda: observer.count() == 3, what="the row committed at COMMIT PREPARED", timeout=20)
    frame = observer.frame()
    assert shown_early is False
    assert list(frame["id"]) == [1, 2, 3] and list(frame["key"]) == ["a", "b", "a"]
    assert observer.carries_keys is True and observer.error is None


def test_the_observer_reconnects_after_the_database_was_killed(stack):
    dsn = stack.endpoints.postgres_dsn
    table = f"obs_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"create table {table} (value bytea)")
        conn.execute(f"insert into {table} values (%s)", (encode_value(1, 1, 1.0, 64),))
    with observer_for(OutputTarget("postgres", table, postgres_dsn=dsn)) as observer:
        wait_for(lambda: observer.count() == 1, what="the first row", timeout=20)
        stack.postgres.kill()
        time.sleep(1.0)  # rounds against a dead server
        stack.postgres.restart(clean=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"insert into {table} values (%s)", (encode_value(2, 1, 1.0, 64),))
        wait_for(lambda: observer.count() == 2, what="the row written after the restart", timeout=30)
    assert observer.error is None and observer.transient_errors >= 1
    assert observer.carries_keys is False


def _prepare(dsn: str, table: str, gid: str, ids: list[int]) -> None:
    with psycopg.connect(dsn) as conn:
        for record in ids:
            conn.execute(f"insert into {table} values ('a', %s)", (encode_value(record, record, 1.0, 64),))
        conn.execute(f"prepare transaction '{gid}'")


@pytest.mark.parametrize("orders_commits", [True, False], ids=["commit-times", "rounds-only"])
def test_one_rounds_transactions_are_ordered_by_commit_not_by_where_their_rows_lie(stack, orders_commits):
    dsn = stack.endpoints.postgres_dsn
    table, early, late = f"obs_{uuid.uuid4().hex[:8]}", f"obs-{uuid.uuid4().hex[:8]}", f"obs-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"create table {table} (key text, value bytea)")
        _prepare(dsn, table, late, [4, 5])  # first into the heap, committed last
        _prepare(dsn, table, early, [1, 2, 3])
        conn.execute(f"commit prepared '{early}'")
        conn.execute(f"commit prepared '{late}'")
        heap = [row[0] for row in conn.execute(f"select ctid::text from {table} order by ctid")]
    observer = observer_for(OutputTarget("postgres", table, postgres_dsn=dsn))
    if not orders_commits:
        observer.orders_commits = False  # as on a server without track_commit_timestamp
    with observer:  # started after both commits: one round finds the five rows
        wait_for(lambda: observer.count() == 5, what="the five committed rows", timeout=20)
    frame = observer.frame().sort_values(["position", "seq"], kind="stable")
    assert len(heap) == 5 and observer.error is None
    if orders_commits:
        assert observer.orders_commits is True
        assert list(frame["id"]) == [1, 2, 3, 4, 5] and list(frame["position"]) == [0, 0, 0, 1, 1]
    else:
        assert list(frame["position"]) == [0] * 5  # one round, no order within it
