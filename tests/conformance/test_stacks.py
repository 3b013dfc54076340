"""A certification's stacks: one broker for most runs, a 3-broker cluster for the failover runs, each started when
first needed and stopped when the next takes over; a stack the caller gave is used for its broker count and never
stopped here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamcert.conformance.certify import _Stacks
from streamcert.harness.stack import environment


class _FakeEnvironment:
    made: list["_FakeEnvironment"] = []

    def __init__(self, config) -> None:
        self.config, self.started, self.stopped = config, False, False
        _FakeEnvironment.made.append(self)

    def start(self):
        self.started = True
        return self

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def fake_environments(monkeypatch):
    _FakeEnvironment.made = []
    monkeypatch.setattr(environment, "Environment", _FakeEnvironment)
    return _FakeEnvironment.made


def test_each_broker_count_gets_its_stack_and_the_one_before_is_stopped(fake_environments):
    with _Stacks("local") as stacks:
        one = stacks(1)
        assert stacks(1) is one and one.started and one.config.brokers == 1
        three = stacks(3)
        assert three.config.brokers == 3 and three.started and one.stopped
    assert three.stopped and len(fake_environments) == 2


def test_a_given_stack_serves_its_broker_count_and_is_never_stopped(fake_environments):
    given = SimpleNamespace(config=SimpleNamespace(brokers=1), stop=lambda: pytest.fail("stopped a given stack"))
    with _Stacks("local", given) as stacks:
        assert stacks(1) is given
        cluster = stacks(3)
        assert cluster.config.brokers == 3 and stacks(1) is given
    assert cluster.stopped


def test_a_cluster_cannot_be_had_from_an_external_or_container_provider_and_the_runs_needing_one_are_skipped(
        fake_environments, monkeypatch):
    from streamcert.harness.stack import providers

    monkeypatch.setattr(providers, "select_provider", lambda wanted: wanted)
    with _Stacks("external") as stacks:
        assert stacks.cannot_start(1) is None
        assert "external provider gives it no control of the brokers" in stacks.cannot_start(3)
    with _Stacks("local") as stacks:
        assert stacks.cannot_start(3) is None
    given = SimpleNamespace(config=SimpleNamespace(brokers=3))
    with _Stacks("external", given) as stacks:
        assert stacks.cannot_start(3) is None  # the caller's own cluster
    assert fake_environments == []
