"""Unit tests: provider selection and the external provider's settings."""

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.providers import PROVIDERS, external_endpoints, select_provider


@pytest.mark.parametrize("docker, expected", [(True, "testcontainers"), (False, "local")])
def test_auto_prefers_docker_when_it_answers(docker, expected):
    assert select_provider("auto", docker_probe=lambda: docker) == expected


@pytest.mark.parametrize("name", ["local", "external"])
def test_explicit_providers_do_not_need_docker(name):
    assert select_provider(name, docker_probe=lambda: False) == name


def test_testcontainers_without_docker_is_a_clear_error():
    with pytest.raises(ConfigurationError) as info:
        select_provider("testcontainers", docker_probe=lambda: False)
    assert "Docker daemon" in str(info.value) and "--provider local" in str(info.value)


def test_unknown_provider_lists_the_known_ones():
    with pytest.raises(ConfigurationError) as info:
        select_provider("kubernetes", docker_probe=lambda: True)
    text = str(info.value)
    assert "'kubernetes'" in text
    assert all(name in text for name in PROVIDERS)


def test_external_needs_at_least_one_endpoint():
    with pytest.raises(ConfigurationError) as info:
        external_endpoints({})
    assert "STREAMCERT_KAFKA_BOOTSTRAP" in str(info.value)
    found = external_endpoints({"STREAMCERT_KAFKA_BOOTSTRAP": "h:9092", "STREAMCERT_TOXIPROXY_API": "h:8474"})
    assert found.bootstrap_servers == "h:9092" and found.postgres_dsn is None and found.toxiproxy_api == "h:8474"
