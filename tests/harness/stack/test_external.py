"""External systems are started once per stack, proxied endpoint by endpoint, refused when their endpoints are not
what they declare (or, before they start, could be mistaken for the stack's own fault targets), and stopped, also
half-started ones."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.external import ExternalSystems
from streamcert.spi.external import Endpoint, ExternalSystem


class _System(ExternalSystem):
    name = "thing"
    endpoint_names = ("api",)

    def __init__(self, endpoints=None, fail: Exception | None = None) -> None:
        self.started = self.stopped = 0
        self._endpoints = {"api": Endpoint("127.0.0.1", 4242)} if endpoints is None else endpoints
        self._fail = fail

    def start(self, workdir: str) -> None:
        self.started += 1
        if self._fail is not None:
            raise self._fail

    def stop(self) -> None:
        self.stopped += 1

    def endpoints(self):
        return self._endpoints


class _Link:
    def __init__(self, name: str, upstream: str) -> None:
        self.name, self.upstream, self.listen = name, upstream, "127.0.0.1:5555"


class _Api:
    def __init__(self) -> None:
        self.links: list[_Link] = []

    def create_link(self, name, upstream, listen_port=None):
        self.links.append(_Link(name, upstream))
        return self.links[-1]


def test_a_system_starts_once_and_its_endpoints_are_proxied(tmp_path):
    system, api = _System(), _Api()
    systems = ExternalSystems(tmp_path, api, run_token="abcdef0123")
    first = systems.started(system)
    assert systems.started(system) is first and system.started == 1
    assert first.direct == {"api": "127.0.0.1:4242"} and first.proxied == {"api": "127.0.0.1:5555"}
    assert [link.upstream for link in api.links] == ["127.0.0.1:4242"] and systems.link("api") is api.links[0]
    assert (tmp_path / "systems" / "thing").is_dir()
    systems.stop()
    systems.stop()
    assert system.stopped == 1


def test_without_toxiproxy_a_connector_gets_the_systems_own_addresses(tmp_path):
    assert ExternalSystems(tmp_path).started(_System()).proxied == {"api": "127.0.0.1:4242"}


def test_endpoints_that_differ_from_the_declared_names_are_refused(tmp_path):
    system = _System({"other": Endpoint("127.0.0.1", 1)})
    with pytest.raises(ConfigurationError, match="declares endpoints"):
        ExternalSystems(tmp_path).started(system)


@pytest.mark.parametrize("name", ["driver", "executor", "1st", "two words"])
def test_an_endpoint_name_a_fault_could_mistake_for_a_stack_target_is_refused_before_the_system_starts(tmp_path,
                                                                                                       name):
    from types import SimpleNamespace

    from streamcert.harness.systems.resolve import addresses

    system = _System({name: Endpoint("127.0.0.1", 1)})
    system.endpoint_names = (name,)
    with pytest.raises(ConfigurationError, match="could not tell"):
        addresses(SimpleNamespace(systems=ExternalSystems(tmp_path)), system)
    assert system.started == 0


def test_a_system_that_fails_to_start_is_named_stopped_and_not_kept(tmp_path):
    system = _System(fail=RuntimeError("port taken"))
    systems = ExternalSystems(tmp_path)
    with pytest.raises(StartupFailed, match="'thing'.*port taken"):
        systems.started(system)
    with pytest.raises(StartupFailed):
        systems.started(system)  # tried again, not taken as started
    systems.stop()
    assert system.stopped == 2
