"""The real resource classes satisfy the harness's interfaces, and stop() is safe before start()."""

from pathlib import Path

import pytest

from streamcert.harness.stack.containers import (ContainerServer, _ContainerKafka, _ContainerPostgres,
                                                 _ContainerToxiproxy)
from streamcert.harness.stack.environment import Environment, EnvironmentConfig
from streamcert.harness.stack.kafka import LocalKafka
from streamcert.harness.stack.postgres import LocalPostgres
from streamcert.harness.stack.readiness import Readiness
from streamcert.harness.stack.resources import KafkaServer, PostgresServer, Resource, ServerProcess, ToxiproxyServer
from streamcert.harness.stack.spark import SparkResource
from streamcert.harness.stack.toxiproxy import LocalToxiproxy


class _NoContainer:
    """Stands for a testcontainers container that was never started: any use of it is a test failure."""

    def __getattr__(self, name):
        raise AssertionError(f"the container was used ({name}) before start")


@pytest.mark.parametrize("factory", [
    lambda tmp: LocalKafka(tmp / "k"),
    lambda tmp: LocalPostgres(tmp / "p"),
    lambda tmp: LocalToxiproxy(tmp / "t"),
    lambda tmp: ContainerServer("Kafka", _NoContainer(), Readiness("nothing", lambda: False), timeout=1),
    lambda tmp: _ContainerKafka(_NoContainer(), 40001, timeout=1),
    lambda tmp: _ContainerPostgres(_NoContainer(), 40002, timeout=1),
    lambda tmp: _ContainerToxiproxy(_NoContainer(), 40003, timeout=1),
])
def test_servers_are_server_processes(factory, tmp_path: Path):
    server = factory(tmp_path)
    assert isinstance(server, ServerProcess)
    server.stop()
    server.stop()  # idempotent
    server.kill()
    server.pause()
    server.resume()
    assert server.pid is None


@pytest.mark.parametrize("factory, kind", [
    (lambda tmp: LocalKafka(tmp / "k"), KafkaServer),
    (lambda tmp: _ContainerKafka(_NoContainer(), 40001, timeout=1), KafkaServer),
    (lambda tmp: LocalPostgres(tmp / "p"), PostgresServer),
    (lambda tmp: _ContainerPostgres(_NoContainer(), 40002, timeout=1), PostgresServer),
    (lambda tmp: LocalToxiproxy(tmp / "t"), ToxiproxyServer),
    (lambda tmp: _ContainerToxiproxy(_NoContainer(), 40003, timeout=1), ToxiproxyServer),
])
def test_local_and_container_servers_of_a_kind_offer_the_same_addresses(factory, kind, tmp_path: Path):
    server = factory(tmp_path)
    assert isinstance(server, kind)
    others = {KafkaServer, PostgresServer, ToxiproxyServer} - {kind}
    assert not any(isinstance(server, other) for other in others)


@pytest.mark.parametrize("factory", [
    lambda tmp: SparkResource(),
    lambda tmp: Environment(EnvironmentConfig(provider="local")),
])
def test_other_parts_are_resources_and_stop_before_start_is_safe(factory, tmp_path: Path):
    resource = factory(tmp_path)
    assert isinstance(resource, Resource)
    resource.stop()
    resource.stop()


def test_an_object_without_stop_is_not_a_resource():
    class Half:
        def start(self):
            return self

    assert not isinstance(Half(), Resource)


def test_a_resource_without_the_fault_operations_is_not_a_server_process():
    assert not isinstance(SparkResource(), ServerProcess)
    assert not isinstance(Environment(EnvironmentConfig(provider="local")), ServerProcess)
