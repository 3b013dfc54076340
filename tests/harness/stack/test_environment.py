"""Integration tests: the environment's lifecycle leaves no process behind, whatever happens."""

import pytest

from streamcert.harness.stack.environment import Environment, EnvironmentConfig
from streamcert.harness.errors import StartupFailed

pytestmark = pytest.mark.integration


def test_teardown_after_an_exception_leaves_no_process():
    # Spark's teardown is covered by the CLI smoke test, which runs in its own process:
    # one process holds one Spark driver, and the session fixture may own it.
    env = Environment(EnvironmentConfig(provider="local"))
    with pytest.raises(RuntimeError, match="boom"):
        with env:
            assert env.leftover_processes() >= 3  # toxiproxy, kafka, postgres (+ its backends)
            raise RuntimeError("boom")
    assert env.leftover_processes() == 0
    assert env.workdir is not None and not env.workdir.exists()
    env.stop()  # idempotent


def test_a_failed_start_tears_down_what_did_start(monkeypatch):
    """Kafka's JVM dies at start (an impossible heap): the error shows its output; Toxiproxy is stopped too."""
    env = Environment(EnvironmentConfig(provider="local", postgres=False, kafka_heap_mb=1, start_timeout=30))
    with pytest.raises(StartupFailed) as info:
        env.start()
    text = str(info.value)
    assert "Kafka" in text and "Hint:" in text
    assert "Too small maximum heap" in text  # the JVM's own words, as evidence
    assert env.leftover_processes() == 0


def test_a_second_spark_owner_in_one_process_is_refused(stack):
    """The session fixture owns this process's Spark driver; a second owner gets a clear error, not a shared JVM."""
    from streamcert.harness.errors import ConfigurationError
    from streamcert.harness.stack.spark import SparkResource

    assert stack.spark is not None
    with pytest.raises(ConfigurationError, match="already running in this process"):
        SparkResource().start()


def test_external_provider_uses_given_servers_and_routes_the_database_through_their_toxiproxy(stack, monkeypatch):
    """The session stack plays the user's servers: nothing is started, a run-specific link is made and removed."""
    import psycopg

    monkeypatch.setenv("STREAMCERT_KAFKA_BOOTSTRAP", stack.endpoints.kafka_direct_bootstrap)
    monkeypatch.setenv("STREAMCERT_POSTGRES_DSN", stack.endpoints.postgres_direct_dsn)
    api = stack.toxiproxy_api
    monkeypatch.setenv("STREAMCERT_TOXIPROXY_API", f"{api.host}:{api.port}")
    before = stack.server_pids()
    with Environment(EnvironmentConfig(provider="external")) as env:
        assert env.provider == "external" and env.server_pids() == {"kafka": None, "toxiproxy": None,
                                                                      "postgres": None}
        assert env.endpoints.bootstrap_servers == stack.endpoints.kafka_direct_bootstrap
        link_name = env.postgres_link.name
        with api.session() as client:
            assert link_name != "postgres" and link_name in client.proxies()
        with psycopg.connect(env.endpoints.postgres_dsn) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        env.postgres_link.disable()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(env.endpoints.postgres_dsn, connect_timeout=2)
    with api.session() as client:
        assert link_name not in client.proxies()
    assert stack.server_pids() == before
