"""Readiness without a server: the wait quotes what it saw, and each probe fails fast where nothing listens."""

from __future__ import annotations

import socket
import time

import psycopg
import pytest
import requests

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.postgres import postgres_dsn
from streamcert.harness.stack.readiness import (Readiness, kafka_answers, kafka_readiness, postgres_answers,
                                                postgres_readiness, toxiproxy_answers, toxiproxy_readiness)
from streamcert.harness.stack.toxiproxy import ToxiproxyApi


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on (bound, never listening, so nobody else takes it meanwhile)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_wait_returns_what_the_probe_gave_once_it_answers():
    answers = iter([False, None, "2.12.0"])
    assert Readiness("the test server", lambda: next(answers)).wait(5, interval=0.001) == "2.12.0"


def test_wait_times_out_naming_the_server_quoting_the_probe_and_giving_the_hint():
    def refused():
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(StartupFailed) as info:
        Readiness("the test server", refused, hint="start it").wait(0.2, interval=0.01)
    text = str(info.value)
    assert "No answer from the test server after 0s" in text and "nobody home" in text and "Hint: start it" in text


def test_wait_gives_up_at_once_with_evidence_and_a_replaced_hint():
    began = time.monotonic()
    with pytest.raises(StartupFailed) as info:
        Readiness("the test server", lambda: False, hint="the strategy's own").wait(
            60, abort=lambda: "it exited with code 3", evidence=lambda: "FATAL: port taken", hint="docker logs x")
    text = str(info.value)
    assert time.monotonic() - began < 5
    assert "exited with code 3" in text and "FATAL: port taken" in text
    assert "Hint: docker logs x" in text and "the strategy's own" not in text


def test_kafka_probe_says_no_at_once_where_nothing_listens(closed_port):
    began = time.monotonic()
    assert kafka_answers(f"127.0.0.1:{closed_port}") is False
    assert time.monotonic() - began < 2


def test_postgres_probe_raises_where_nothing_listens(closed_port):
    with pytest.raises(psycopg.OperationalError):
        postgres_answers(postgres_dsn("127.0.0.1", closed_port))


def test_toxiproxy_probe_raises_where_nothing_listens(closed_port):
    with pytest.raises(requests.ConnectionError):
        toxiproxy_answers(ToxiproxyApi("127.0.0.1", closed_port))


def test_each_strategy_names_its_server_and_address(closed_port):
    assert kafka_readiness(f"127.0.0.1:{closed_port}").server == f"the Kafka broker on 127.0.0.1:{closed_port}"
    assert kafka_readiness("h:1", server="Kafka through h:1").server == "Kafka through h:1"
    assert postgres_readiness(postgres_dsn("127.0.0.1", closed_port)).server == f"PostgreSQL at 127.0.0.1:{closed_port}"
    assert toxiproxy_readiness(ToxiproxyApi("127.0.0.1", closed_port)).server == \
        f"the Toxiproxy API on http://127.0.0.1:{closed_port}"
    assert all(strategy.hint for strategy in (kafka_readiness("h:1"), postgres_readiness("host=h"),
                                              toxiproxy_readiness(ToxiproxyApi("h", 1))))


def test_a_strategy_polls_its_probe_until_the_deadline(closed_port):
    with pytest.raises(StartupFailed) as info:
        postgres_readiness(postgres_dsn("127.0.0.1", closed_port), hint="is it running?").wait(0.5)
    assert f"No answer from PostgreSQL at 127.0.0.1:{closed_port}" in str(info.value)
    assert "OperationalError" in str(info.value) and "Hint: is it running?" in str(info.value)
