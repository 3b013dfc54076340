"""Shared fixtures: one real stack for the integration tests of a session."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

import os  # noqa: E402

# The project's tests check logic, not speed: Spark's JVMs (drivers started by the tests inherit this) use the quick
# JIT and start about a third faster. Certifications and benchmarks run the full JIT, as users do.
os.environ.setdefault("STREAMCERT_JIT", "quick")
# Spark's driver-side Python processes (planning daemons, streaming runners) forked from a preloaded server, as in
# certifications (harness/stack/python_forks.py); its own tests turn it on and off directly.
os.environ.setdefault("STREAMCERT_FORK_SERVER", "on")
# Checkpoint logs written with one rename and no forked readlink/chmod, as in certifications
# (harness/stack/spark_checkpoints.py).
os.environ.setdefault("STREAMCERT_CHECKPOINT_MANAGER", "filesystem")
# Two test workers keep both cores busy: a certification's warm standby drivers would only compete with the other
# worker's test (measured: the suite took 27.2 min with them, 24.4 without). Their own tests ask for them directly.
os.environ.setdefault("STREAMCERT_STANDBY", "off")

from streamcert.harness.stack.environment import Environment, EnvironmentConfig  # noqa: E402
from streamcert.harness.stack.spark import SparkConfig  # noqa: E402


@pytest.fixture(scope="session")
def stack():
    """Kafka, Toxiproxy, PostgreSQL and Spark (local[2,3]), started once for the session."""
    with Environment(EnvironmentConfig(provider="local", spark=SparkConfig())) as env:
        yield env


@pytest.fixture
def clean_links(stack):
    """Every test starts and ends with no toxic on any link and every link up."""
    for link in (stack.kafka_link, stack.postgres_link):
        link.clear()
    yield stack
    for link in (stack.kafka_link, stack.postgres_link):
        link.clear()


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory):
    """A 3-node Kafka cluster behind its own Toxiproxy, started for a module's tests and stopped when they end;
    tests leave it healed. Not once for the session: three idle brokers cost 6.6 s of CPU a minute (measured in
    session 27; a start 16 s), and one started by an early module idled through every later test of its worker."""
    from streamcert.harness.stack.kafka_cluster import LocalKafkaCluster
    from streamcert.harness.stack.toxiproxy import LocalToxiproxy

    folder = tmp_path_factory.mktemp("kafka-cluster")
    with LocalToxiproxy(folder / "toxiproxy") as toxiproxy, \
            LocalKafkaCluster(folder / "kafka", toxiproxy.api, nodes=3, heap_mb=256) as cluster:
        yield cluster


def _shared_unit(item) -> str | None:
    """What ``item`` must run beside (a file's or class's tests sharing a fixture of that scope), else None."""
    info = getattr(item, "_fixtureinfo", None)
    scopes = {definitions[-1].scope for definitions in (info.name2fixturedefs.values() if info else ())
              if definitions}
    path = item.nodeid.split("::")[0]
    if "package" in scopes:
        return path.rsplit("/", 1)[0]
    if "module" in scopes or "class" in scopes:
        return path
    return None


_DIST_KEY = "streamcert_dist"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """(pytest-xdist, in the controller, before a worker starts) Tell the worker which scheduler deals out the
    tests: xdist sets a worker's own ``dist`` option to "no"."""
    node.workerinput[_DIST_KEY] = node.config.getoption("dist", default="no")


@pytest.hookimpl(trylast=True)  # after ``-m``/``-k`` deselected: xdist cuts what is left
def pytest_collection_modifyitems(config, items):
    """Each xdist worker's share of the tests longest first, the shares as long as each other (tests/scheduling.py):
    a kill-run test left at the end of one share ran alone while the other core idled."""
    from tests.scheduling import load_durations, scheduled_order

    durations = load_durations()
    if not durations:
        return
    worker_input = getattr(config, "workerinput", None) or {}
    # only a worker collects under xdist, and its own config says dist "no": pytest_configure_node passed it on
    workers = int(worker_input.get("workercount", 1)) if worker_input.get(_DIST_KEY) == "worksteal" else 1
    order = scheduled_order([(item.nodeid, _shared_unit(item)) for item in items], durations, workers)
    items[:] = [items[index] for index in order]
