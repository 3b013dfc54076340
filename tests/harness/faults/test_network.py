"""Each network fault really happens: the toxic is listed by Toxiproxy and latency rose, or the link is down."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import psycopg
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.network import NetworkFault
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.history import History
from streamcert.harness.stack import smoke
from streamcert.harness.stack.kafka_clients import create_topic


def _topic() -> str:
    return f"faults-{uuid.uuid4().hex[:8]}"


def _context(env, history: History, tmp_path) -> FaultContext:
    return FaultContext(environment=env, history=history, workdir=tmp_path)


@pytest.mark.integration
def test_latency_fault_is_listed_raises_latency_and_is_recorded(clean_links, tmp_path):
    env, history = clean_links, History()
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic)
    fault = build_fault(FaultSpec("latency", "kafka", 0, 1, {"latency": 250, "jitter": 0}, "upstream"),
                        _context(env, history, tmp_path))
    assert isinstance(fault, NetworkFault)
    fault.start()
    toxics = env.kafka_link.toxics()
    assert [t["attributes"]["latency"] for t in toxics.values()] == [250]
    assert next(iter(toxics.values()))["stream"] == "upstream"
    slowed = smoke._round_trip_ms(env.endpoints.bootstrap_servers, topic, samples=2)
    fault.stop()
    fault.stop()  # idempotent
    assert env.kafka_link.toxics() == {}
    assert slowed >= 250
    kinds = [e["kind"] for e in history.events()]
    assert kinds == ["fault-start", "fault-stop"]
    assert history.events()[0]["toxic"] == "latency_upstream"


@pytest.mark.integration
def test_down_on_the_database_link_refuses_then_heals(clean_links, tmp_path):
    env, history = clean_links, History()
    fault = build_fault(FaultSpec("down", "postgres", 0, 1), _context(env, history, tmp_path))
    fault.start()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(env.endpoints.postgres_dsn, connect_timeout=2)
    fault.stop()
    with psycopg.connect(env.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


TOXIC_PARAMS = {
    "latency": {"latency": 100, "jitter": 10}, "bandwidth": {"rate": 100}, "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0}, "slow_close": {"delay": 100},
    "slicer": {"average_size": 16, "size_variation": 4, "delay": 1}, "limit_data": {"bytes": 1024},
}


@pytest.mark.integration
@pytest.mark.parametrize("target", ["kafka", "postgres"])
@pytest.mark.parametrize("stream", ["upstream", "downstream"])
@pytest.mark.parametrize("toxic", sorted(TOXIC_PARAMS))
def test_every_toxic_is_listed_by_toxiproxy_while_active(clean_links, toxic, stream, target, tmp_path):
    env, history = clean_links, History()
    fault = build_fault(FaultSpec(toxic, target, 0, 1, TOXIC_PARAMS[toxic], stream), _context(env, history, tmp_path))
    link = env.kafka_link if target == "kafka" else env.postgres_link
    fault.start()
    try:
        [listed] = link.toxics().values()
        assert (listed["type"], listed["stream"]) == (toxic, stream)
        assert {k: listed["attributes"][k] for k in TOXIC_PARAMS[toxic]} == TOXIC_PARAMS[toxic]
    finally:
        fault.stop()
    assert link.toxics() == {}


@pytest.mark.integration
@pytest.mark.parametrize("toxic, params", [("reset_peer", {"timeout": 0}), ("timeout", {"timeout": 0}),
                                           ("limit_data", {"bytes": 64})])
def test_breaking_toxics_break_database_connections(clean_links, toxic, params, tmp_path):
    env = clean_links
    fault = build_fault(FaultSpec(toxic, "postgres", 0, 1, params, "downstream"), _context(env, History(), tmp_path))
    fault.start()
    try:
        with pytest.raises(psycopg.OperationalError):
            with psycopg.connect(env.endpoints.postgres_dsn, connect_timeout=2) as conn:
                conn.execute("select repeat('x', 100000)").fetchone()
    finally:
        fault.stop()
    with psycopg.connect(env.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


@pytest.mark.integration
def test_bandwidth_toxic_slows_a_large_transfer(clean_links, tmp_path):
    env = clean_links

    def fetch_seconds() -> float:
        with psycopg.connect(env.endpoints.postgres_dsn) as conn:
            began = time.monotonic()
            conn.execute("select repeat('x', 300000)").fetchone()
            return time.monotonic() - began

    baseline = fetch_seconds()
    fault = build_fault(FaultSpec("bandwidth", "postgres", 0, 1, {"rate": 100}, "downstream"),
                        _context(env, History(), tmp_path))
    fault.start()
    try:
        slowed = fetch_seconds()
    finally:
        fault.stop()
    assert slowed >= 2.0 > baseline  # 300 KB at 100 KB/s


# -- without a stack ------------------------------------------------------------------------------

class _RecordingLink:
    """What NetworkFault calls on a Toxiproxy link, recorded (the integration tests use the real one)."""

    name = "kafka"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def add_toxic(self, toxic_type, *, stream, **attributes):
        self.calls.append(("add", toxic_type, stream, attributes))
        return f"{toxic_type}_{stream}"

    def remove_toxic(self, name):
        self.calls.append(("remove", name))

    def disable(self):
        self.calls.append(("disable",))

    def enable(self):
        self.calls.append(("enable",))


def test_only_the_attributes_the_schedule_gives_reach_toxiproxy(tmp_path):
    link = _RecordingLink()
    env = SimpleNamespace(link={"kafka": link}.get)
    fault = build_fault(FaultSpec("slicer", "kafka", 0, 1, {"average_size": 32}, "upstream"),
                        _context(env, History(), tmp_path))
    fault.start()
    fault.stop()
    assert link.calls == [("add", "slicer", "upstream", {"average_size": 32}), ("remove", "slicer_upstream")]


def test_a_network_fault_without_a_link_or_an_environment_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigurationError, match="servers or links") as info:
        build_fault(FaultSpec("down", "kafka", 0, 1), FaultContext(history=History(), workdir=tmp_path))
    assert "FaultContext(environment=" in str(info.value)
    fault = build_fault(FaultSpec("down", "postgres", 0, 1),
                        _context(SimpleNamespace(link=lambda name: None), History(), tmp_path))
    with pytest.raises(ConfigurationError, match="no Toxiproxy link to postgres"):
        fault.start()
    assert fault.active is False
