"""Integration tests: the environment's lifecycle leaves no process behind, whatever happens."""

import pytest

from harness.environment import Environment, EnvironmentConfig
from harness.errors import StartupFailed

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
    from harness.errors import ConfigurationError
    from harness.spark import SparkResource

    assert stack.spark is not None
    with pytest.raises(ConfigurationError, match="already running in this process"):
        SparkResource().start()
