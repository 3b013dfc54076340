"""Readiness probes against the real servers of the session stack, directly and through the proxy."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.readiness import (READY_TOPIC, kafka_answers, kafka_readiness, postgres_answers,
                                                postgres_readiness, toxiproxy_answers, toxiproxy_readiness)

pytestmark = pytest.mark.integration


def test_kafka_answers_directly_and_through_the_proxy_and_its_topic_exists(stack):
    from confluent_kafka.admin import AdminClient

    from streamcert.harness.stack.kafka_clients import client_conf

    assert kafka_answers(stack.endpoints.kafka_direct_bootstrap) is True
    assert kafka_answers(stack.endpoints.bootstrap_servers) is True
    topics = AdminClient(client_conf(stack.endpoints.kafka_direct_bootstrap)).list_topics(timeout=10).topics
    assert READY_TOPIC in topics


def test_kafka_behind_a_downed_link_is_not_ready(clean_links):
    env = clean_links
    env.kafka_link.disable()
    try:
        assert kafka_answers(env.endpoints.bootstrap_servers) is False
        with pytest.raises(StartupFailed) as info:
            kafka_readiness(env.endpoints.bootstrap_servers).wait(1)
    finally:
        env.kafka_link.enable()
    assert f"No answer from the Kafka broker on {env.endpoints.bootstrap_servers}" in str(info.value)
    assert kafka_readiness(env.endpoints.bootstrap_servers).wait(30) is True


def test_postgres_answers_directly_and_through_the_proxy(stack):
    assert postgres_answers(stack.endpoints.postgres_direct_dsn) is True
    assert postgres_answers(stack.endpoints.postgres_dsn) is True
    assert postgres_readiness(stack.endpoints.postgres_dsn).wait(10) is True


def test_postgres_behind_a_downed_link_is_not_ready_and_the_error_says_why(clean_links):
    env = clean_links
    env.postgres_link.disable()
    try:
        with pytest.raises(StartupFailed) as info:
            postgres_readiness(env.endpoints.postgres_dsn).wait(1)
    finally:
        env.postgres_link.enable()
    assert "OperationalError" in str(info.value)


def test_toxiproxy_answers_with_its_version(stack):
    version = toxiproxy_answers(stack.toxiproxy_api)
    assert isinstance(version, str) and version
    assert toxiproxy_readiness(stack.toxiproxy_api).wait(5) == version
