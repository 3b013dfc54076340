"""When a server counts as ready: one strategy per server kind, written once.

- Kafka: metadata names a broker, and the readiness topic ``__streamcert_ready`` exists or can be created
  (creating a topic needs the controller and a registered broker, which metadata alone does not prove);
- PostgreSQL: a connection is accepted and ``select 1`` answers;
- Toxiproxy: the HTTP API reports its version.

A :class:`Readiness` pairs such a probe with the server's name and a hint; :meth:`Readiness.wait` polls it
through :func:`streamcert.harness.waiting.wait_for`. The local servers, the container servers and the
environment's through-the-proxy check all use these, so "ready" means the same everywhere.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from streamcert.harness.waiting import wait_for

if TYPE_CHECKING:
    from streamcert.harness.stack.toxiproxy import ToxiproxyApi

__all__ = [
    "READY_TOPIC",
    "Readiness",
    "kafka_answers",
    "postgres_answers",
    "toxiproxy_answers",
    "kafka_readiness",
    "postgres_readiness",
    "toxiproxy_readiness",
]

READY_TOPIC = "__streamcert_ready"


@dataclass(frozen=True)
class Readiness:
    """How to tell that ``server`` is ready: ``probe()`` returns something truthy (it may raise while booting)."""

    server: str
    probe: Callable[[], object]
    hint: str = ""

    def wait(
        self,
        timeout: float,
        *,
        abort: Callable[[], str | None] | None = None,
        evidence: Callable[[], str] | None = None,
        hint: str | None = None,
        interval: float = 0.2,
    ) -> object:
        """Poll until the server answers and return what the probe gave; raise ``StartupFailed`` after ``timeout``.

        ``abort`` may say why to give up at once (the process exited); ``evidence`` gives what was seen (log
        lines); ``hint`` replaces the strategy's own.
        """
        return wait_for(self.probe, what=f"answer from {self.server}", timeout=timeout,
                        hint=self.hint if hint is None else hint, interval=interval, abort=abort,
                        evidence=evidence, progress=True)


# -- probes ------------------------------------------------------------------------

def kafka_answers(bootstrap: str, timeout: float = 3.0) -> bool:
    """True when metadata from ``bootstrap`` names a broker and the readiness topic exists (created if missing)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from streamcert.harness.stack.kafka_clients import client_conf

    host, port = _first_address(bootstrap)
    if not _accepts_connections(host, port):
        return False  # no client (and no librdkafka retry loop) while nothing listens
    admin = AdminClient(client_conf(bootstrap, **{"socket.timeout.ms": int(timeout * 1000)}))
    metadata = admin.list_topics(timeout=timeout)
    if not metadata.brokers:
        return False
    if READY_TOPIC in metadata.topics:
        return True
    futures = admin.create_topics([NewTopic(READY_TOPIC, 1, 1)], operation_timeout=timeout,
                                  request_timeout=timeout)
    try:
        futures[READY_TOPIC].result(timeout=3 * timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # a concurrent probe created it
            raise
    return True


def postgres_answers(dsn: str, timeout: float = 2.0) -> bool:
    """True when the server at ``dsn`` accepts a connection and answers ``select 1``."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=max(1, round(timeout)), autocommit=True) as conn:
        return conn.execute("select 1").fetchone() == (1,)


def toxiproxy_answers(api: "ToxiproxyApi", timeout: float = 1.0) -> str:
    """The version the Toxiproxy API reports (raises while it does not answer)."""
    return api.version(timeout=timeout)


# -- strategies ----------------------------------------------------------------------

def kafka_readiness(bootstrap: str, *, server: str | None = None, hint: str = "") -> Readiness:
    """Kafka at ``bootstrap`` (a broker's own listener, or a proxy in front of it)."""
    return Readiness(server or f"the Kafka broker on {bootstrap}", lambda: kafka_answers(bootstrap),
                     hint or "Look at the broker's log; a slow machine may need a longer start timeout.")


def postgres_readiness(dsn: str, *, server: str | None = None, hint: str = "") -> Readiness:
    """PostgreSQL at ``dsn``."""
    return Readiness(server or f"PostgreSQL at {_dsn_address(dsn)}", lambda: postgres_answers(dsn),
                     hint or "Look at the server's log; check the DSN and that it accepts loopback connections.")


def toxiproxy_readiness(api: "ToxiproxyApi", *, hint: str = "") -> Readiness:
    """The Toxiproxy API ``api``."""
    return Readiness(f"the Toxiproxy API on {api.url}", lambda: toxiproxy_answers(api),
                     hint or "Look at the Toxiproxy log.")


# -- helpers ---------------------------------------------------------------------------

def _first_address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _dsn_address(dsn: str) -> str:
    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    return f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
