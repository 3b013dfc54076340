"""The PostgreSQL 2PC sink retries a lost or refused connection (the database restarting) instead of failing the
query; found by the certification's SNK-7 run, where a database kill during the driver's commit ended the query.
Other errors are not retried, and a database that stays away fails with the option that bounds the wait."""

from __future__ import annotations

import psycopg
import pytest

from streamcert.connectors.pg_sink import _retrying


def test_a_lost_connection_is_tried_again_until_it_works():
    calls = []

    def action():
        calls.append(1)
        if len(calls) < 3:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return "committed"

    assert _retrying("the commit of batch 4", 10_000, action) == "committed" and len(calls) == 3


def test_a_database_that_stays_away_fails_naming_the_bound():
    def action():
        raise psycopg.OperationalError("connection refused")

    with pytest.raises(RuntimeError, match="the commit of batch 4 failed.*retryTimeoutMs=0"):
        _retrying("the commit of batch 4", 0, action)


def test_other_errors_are_not_retried():
    calls = []

    def action():
        calls.append(1)
        raise psycopg.errors.UndefinedTable("no such table")

    with pytest.raises(psycopg.errors.UndefinedTable):
        _retrying("x", 10_000, action)
    assert len(calls) == 1


def test_a_session_lost_with_its_connection_is_dropped_so_the_next_try_connects_again():
    class _Session:
        closed = 0

        def close(self):
            self.closed += 1

    session, calls = _Session(), []

    def action():
        calls.append(session.closed)
        if len(calls) < 3:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return "prepared"

    assert _retrying("the prepare of batch 4", 10_000, action, session) == "prepared"
    assert calls == [0, 1, 2]  # every try after a loss began without the lost connection
