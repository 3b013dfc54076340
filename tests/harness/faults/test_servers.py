"""Server faults really happen: the broker pid changed and acknowledged data survived; it paused; PostgreSQL
restarted."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import psutil
import psycopg
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext, FaultNotApplicable
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.faults.servers import BrokerFault, DatabaseFault
from streamcert.harness.run.history import History
from streamcert.harness.stack.resources import ServerProcess
from streamcert.harness.stack.kafka_clients import create_topic, produce, read_topic


def _topic() -> str:
    return f"faults-{uuid.uuid4().hex[:8]}"


def _context(env, history: History, tmp_path) -> FaultContext:
    return FaultContext(environment=env, history=history, workdir=tmp_path)


@pytest.mark.integration
def test_broker_kill_changes_the_pid_and_keeps_acknowledged_data(stack, tmp_path):
    env, history = stack, History()
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"a")])
    fault = build_fault(FaultSpec("broker_kill", "kafka", 0, 1), _context(env, history, tmp_path))
    assert isinstance(fault, BrokerFault)
    before = env.kafka.pid
    fault.start()
    assert env.kafka.pid is None
    fault.stop()
    assert env.kafka.pid not in (None, before)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"b")])
    assert [v for *_r, v in read_topic(env.endpoints.bootstrap_servers, topic)] == [b"a", b"b"]
    assert history.events("fault-start")[0]["pid_before"] == before


@pytest.mark.integration
def test_broker_pause_stops_the_process_until_healed(stack, tmp_path):
    env, history = stack, History()
    fault = build_fault(FaultSpec("broker_pause", "kafka", 0, 1), _context(env, history, tmp_path))
    fault.start()
    try:
        time.sleep(0.1)
        assert psutil.Process(env.kafka.pid).status() == psutil.STATUS_STOPPED
    finally:
        fault.stop()
    assert psutil.Process(env.kafka.pid).status() != psutil.STATUS_STOPPED


@pytest.mark.integration
def test_broker_clean_restart_changes_the_pid_and_keeps_data(stack, tmp_path):
    env, history = stack, History()
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"kept")])
    before = env.kafka.pid
    fault = build_fault(FaultSpec("broker_restart", "kafka", 0, 1), _context(env, history, tmp_path))
    fault.start()
    fault.stop()
    assert env.kafka.pid not in (None, before)
    assert history.events("fault-start")[0]["pid_after"] == env.kafka.pid
    assert [v for *_r, v in read_topic(env.endpoints.bootstrap_servers, topic)] == [b"kept"]


@pytest.mark.integration
def test_database_kill_restarts_postgres(stack, tmp_path):
    history = History()
    before = stack.postgres.pid
    fault = build_fault(FaultSpec("database_kill", "postgres", 0, 1), _context(stack, history, tmp_path))
    assert isinstance(fault, DatabaseFault)
    fault.start()
    assert stack.postgres.pid is None
    fault.stop()
    assert stack.postgres.pid not in (None, before)
    with psycopg.connect(stack.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


# -- without a stack ------------------------------------------------------------------------------

class _Server:
    """A ServerProcess whose operations are recorded (the integration tests use real servers)."""

    def __init__(self) -> None:
        self.pid, self.calls = 100, []

    def start(self):
        return self

    def stop(self):
        self.calls.append("stop")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def tail(self, lines=20):
        return ""

    def kill(self):
        self.calls.append("kill")
        self.pid = None

    def restart(self, clean):
        self.calls.append(f"restart(clean={clean})")
        self.pid = 200

    def pause(self):
        self.calls.append("pause")

    def resume(self):
        self.calls.append("resume")


@pytest.mark.parametrize("kind, calls", [("broker_kill", ["kill", "restart(clean=False)"]),
                                         ("broker_restart", ["restart(clean=True)"]),
                                         ("broker_pause", ["pause", "resume"])])
def test_each_broker_action_does_what_its_name_says(kind, calls, tmp_path):
    server = _Server()
    fault = build_fault(FaultSpec(kind, "kafka", 0, 1), _context(SimpleNamespace(kafka=server), History(), tmp_path))
    fault.start()
    fault.start()  # idempotent
    fault.stop()
    fault.stop()
    assert server.calls == calls


def test_the_recording_server_is_a_server_process():
    assert isinstance(_Server(), ServerProcess)


@pytest.mark.parametrize("server", [None, SimpleNamespace(kill=lambda: None)], ids=["none", "kill-only"])
def test_a_server_the_environment_does_not_control_is_a_clear_error(server, tmp_path):
    """An object with a kill method is not enough: the fault needs the whole ServerProcess protocol."""
    fault = build_fault(FaultSpec("broker_kill", "kafka", 0, 1),
                        _context(SimpleNamespace(kafka=server), History(), tmp_path))
    with pytest.raises(FaultNotApplicable, match="needs a server process this stack controls"):
        fault.start()


def test_a_database_the_environment_does_not_control_is_a_clear_error(tmp_path):
    fault = build_fault(FaultSpec("database_kill", "postgres", 0, 1),
                        _context(SimpleNamespace(postgres=None), History(), tmp_path))
    with pytest.raises(FaultNotApplicable, match="needs a server process this stack controls"):
        fault.start()
    assert isinstance(FaultNotApplicable("x"), ConfigurationError)  # a user-facing error wherever it escapes


def test_a_fault_the_stack_cannot_carry_out_is_recorded_as_skipped_with_its_reason(tmp_path):
    from streamcert.harness.faults.timeline import recorded

    history = History()
    spec = FaultSpec("broker_restart", "kafka", 0, 1)
    fault = build_fault(spec, _context(SimpleNamespace(kafka=None), history, tmp_path))
    recorded(history, spec, "start", fault.start)
    recorded(history, spec, "stop", fault.stop)
    [event] = [e for e in history.events() if e["kind"].startswith("fault-")]
    assert event["kind"] == "fault-skip" and event["fault"] == "broker_restart"
    assert "the external provider's servers are the user's" in event["reason"]
