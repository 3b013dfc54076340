"""What is in flight on a link: the kernel's view of real loopback connections (a request without its answer is
awaiting, one answered is not), PostgreSQL's running statements by kind, and an unknown (never an empty list) when
``ss`` is missing."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest

from streamcert.harness.faults import in_flight
from streamcert.harness.faults.in_flight import connections_to, postgres_statements, statement_kind
from streamcert.harness.stack.postgres import HARNESS_APPLICATION

needs_ss = pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")


@pytest.fixture
def server():
    listener = socket.create_server(("127.0.0.1", 0))
    yield listener
    listener.close()


def _connection(server: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    return client, accepted


@needs_ss
def test_a_request_without_its_answer_is_awaiting_and_an_answered_one_is_not(server):
    client, accepted = _connection(server)
    with client, accepted:
        client.sendall(b"request")
        accepted.recv(16)
        time.sleep(0.02)
        [seen] = connections_to([server.getsockname()[1]])
        assert seen.awaiting_answer and seen.bytes_sent == 7 and seen.pid is not None
        accepted.sendall(b"answer")
        client.recv(16)
        time.sleep(0.02)
        [seen] = connections_to([server.getsockname()[1]])
        assert not seen.awaiting_answer and seen.bytes_received == 6


@needs_ss
def test_an_idle_connection_is_not_awaiting_and_other_ports_are_left_out(server):
    client, accepted = _connection(server)
    with client, accepted:
        [seen] = connections_to([server.getsockname()[1]])
        assert not seen.awaiting_answer
        assert connections_to([1]) == []


def test_without_ss_the_view_is_unknown_not_empty(monkeypatch):
    monkeypatch.setattr(in_flight.shutil, "which", lambda _name: None)
    assert connections_to([5432]) is None


@pytest.mark.parametrize("query, kind", [
    ("COPY t (id) FROM STDIN", "COPY"), ("  -- batch 3\n prepare transaction 'sc-1'", "PREPARE TRANSACTION"),
    ("COMMIT PREPARED 'sc-1'", "COMMIT PREPARED"), ("commit", "COMMIT"), ("INSERT INTO t VALUES (1)", "INSERT"),
    ("/* c */ SELECT 1", "SELECT"), ("VACUUM", "OTHER"), ("", "NONE"), (None, "NONE"), ("BEGIN;", "BEGIN"),
    ("COMMITTED_READS()", "OTHER"),
])
def test_statements_are_told_apart_by_their_leading_keywords(query, kind):
    assert statement_kind(query) == kind


@pytest.mark.integration
def test_a_running_postgresql_statement_is_seen_with_its_kind(stack):
    import psycopg

    dsn = stack.endpoints.postgres_direct_dsn

    def sleep() -> None:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("SELECT pg_sleep(1.5)")

    sleeper = threading.Thread(target=sleep)
    sleeper.start()
    try:
        with psycopg.connect(dsn, autocommit=True, application_name=HARNESS_APPLICATION) as looker:
            deadline = time.monotonic() + 5
            found: list = []
            while time.monotonic() < deadline and not found:
                found = [s for s in postgres_statements(looker) or [] if "pg_sleep" in s["statement"]]
                time.sleep(0.05)
            assert not [s for s in postgres_statements(looker) if "pg_stat_activity" in s["statement"]]  # its own
    finally:
        sleeper.join()
    assert found and found[0]["state"] == "active" and found[0]["kind"] == "SELECT"


@needs_ss
def test_connections_of_other_processes_are_left_out_when_owners_are_given(server):
    import os

    client, accepted = _connection(server)
    with client, accepted:
        port = server.getsockname()[1]
        assert len(connections_to([port], {os.getpid()})) == 1
        assert connections_to([port], {os.getpid() + 100_000}) == []
