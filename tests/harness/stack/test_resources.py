"""The real resource classes satisfy the harness's interfaces, and stop() is safe before start()."""

from pathlib import Path

import pytest

from streamcert.harness.stack.environment import Environment, EnvironmentConfig
from streamcert.harness.stack.kafka import LocalKafka
from streamcert.harness.stack.postgres import LocalPostgres
from streamcert.harness.stack.resources import Resource, ServerProcess
from streamcert.harness.stack.spark import SparkResource
from streamcert.harness.stack.toxiproxy import LocalToxiproxy


@pytest.mark.parametrize("factory", [
    lambda tmp: LocalKafka(tmp / "k"),
    lambda tmp: LocalPostgres(tmp / "p"),
])
def test_servers_are_server_processes(factory, tmp_path: Path):
    server = factory(tmp_path)
    assert isinstance(server, ServerProcess)
    server.stop()
    server.stop()  # idempotent
    assert server.pid is None


@pytest.mark.parametrize("factory", [
    lambda tmp: LocalToxiproxy(tmp / "t"),
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
