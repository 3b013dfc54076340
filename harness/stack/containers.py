"""The testcontainers provider: the same topology as the local one, in Docker containers.

One Docker network holds three containers. Toxiproxy reaches the broker and the
database by their network aliases; every port is published on 127.0.0.1 only,
and each link's port has the same number inside the Toxiproxy container and on
the host, so the broker can advertise ``127.0.0.1:<link port>`` to clients.
The broker's INTERNAL listener binds the same port number inside its container
and on the host for the same reason (it is advertised to the broker itself).

Used when a Docker daemon answers (``--provider auto`` picks it then).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from streamcert.harness.stack.install import KAFKA_VERSION
from streamcert.harness.stack.kafka import KafkaPorts, new_cluster_id, render_server_properties
from streamcert.harness.stack.ports import LOOPBACK, free_port
from streamcert.harness.stack.postgres import DATABASE, SUPERUSER, postgres_dsn
from streamcert.harness.stack.readiness import Readiness, kafka_readiness, postgres_readiness, toxiproxy_readiness
from streamcert.harness.stack.toxiproxy import Link, ToxiproxyApi

__all__ = ["KAFKA_IMAGE", "TOXIPROXY_IMAGE", "POSTGRES_IMAGE", "kafka_container_env", "ContainerServer",
           "ContainerStack", "start_container_stack"]

KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
TOXIPROXY_IMAGE = "ghcr.io/shopify/toxiproxy:2.12.0"
POSTGRES_IMAGE = "postgres:16-alpine"
_KAFKA_ALIAS, _POSTGRES_ALIAS = "kafka", "postgres"
_CONTROLLER_PORT, _EXTERNAL_PORT = 9093, 9094


def kafka_container_env(properties: str) -> dict[str, str]:
    """``server.properties`` text as the apache/kafka image's environment variables.

    The image maps ``KAFKA_A_B`` to ``a.b``, ``__`` to ``_`` and ``___`` to ``-``.
    """
    env = {}
    for line in properties.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.split("=", 1)
        name = key.replace("_", "__").replace("-", "___").replace(".", "_").upper()
        env[f"KAFKA_{name}"] = value
    return env


def _publish_on_loopback(container: Any, container_port: int, host_port: int) -> None:
    # testcontainers' with_bind_ports binds all interfaces; streamcert binds loopback only.
    container.ports[f"{container_port}/tcp"] = (LOOPBACK, host_port)


class ContainerServer:
    """A container with the fault operations of a local server process: a
    :class:`~streamcert.harness.stack.resources.ServerProcess`. ``start`` and ``restart`` return once
    ``readiness`` says the server answers."""

    def __init__(self, name: str, container: Any, readiness: Readiness, timeout: float) -> None:
        self.name = name
        self.container = container
        self.readiness = readiness
        self._timeout = timeout
        self._started = False

    def __enter__(self) -> "ContainerServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        if not self._started:
            return None
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        return wrapped.attrs.get("State", {}).get("Pid") or None

    def start(self) -> None:
        if not self._started:
            self.container.start()
            self._started = True
        self._wait_ready()

    def _wait_ready(self) -> None:
        def exited() -> str | None:
            wrapped = self.container.get_wrapped_container()
            wrapped.reload()
            return f"container exited ({wrapped.status})" if wrapped.status in ("exited", "dead") else None

        self.readiness.wait(self._timeout, abort=exited, evidence=self.tail,
                            hint=f"`docker logs {self.container.get_container_id()}` shows more.")

    def stop(self) -> None:
        if self._started:
            self._started = False
            self.container.stop()

    def kill(self) -> None:
        if self._started:
            self.container.get_wrapped_container().kill()

    def pause(self) -> None:
        if self._started:
            self.container.get_wrapped_container().pause()

    def resume(self) -> None:
        if self._started:
            self.container.get_wrapped_container().unpause()

    def restart(self, clean: bool = True) -> None:
        if not self._started:
            self.start()
            return
        wrapped = self.container.get_wrapped_container()
        if clean:
            wrapped.stop(timeout=15)
        else:
            wrapped.kill()
        wrapped.start()
        self._wait_ready()

    def tail(self, lines: int = 20) -> str:
        try:
            stdout, stderr = self.container.get_logs()
        except Exception:  # the container may already be removed
            return ""
        text = (stdout + stderr).decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])


class _ContainerKafka(ContainerServer):
    def __init__(self, container: Any, internal_port: int, timeout: float) -> None:
        self.direct_bootstrap = f"{LOOPBACK}:{internal_port}"
        self.upstream = f"{_KAFKA_ALIAS}:{_EXTERNAL_PORT}"
        super().__init__("Kafka", container, kafka_readiness(self.direct_bootstrap), timeout)


class _ContainerPostgres(ContainerServer):
    def __init__(self, container: Any, host_port: int, timeout: float) -> None:
        self.dsn = postgres_dsn(LOOPBACK, host_port)
        super().__init__("PostgreSQL", container, postgres_readiness(self.dsn), timeout)


class _ContainerToxiproxy(ContainerServer):
    def __init__(self, container: Any, api_port: int, timeout: float) -> None:
        self.api = ToxiproxyApi(LOOPBACK, api_port)
        super().__init__("Toxiproxy", container, toxiproxy_readiness(self.api), timeout)


@dataclass
class ContainerStack:
    network: Any
    toxiproxy: _ContainerToxiproxy
    kafka: _ContainerKafka | None
    postgres: _ContainerPostgres | None
    kafka_link: Link | None
    postgres_link: Link | None


def start_container_stack(config: Any, run_token: str) -> ContainerStack:
    """Start network, Toxiproxy, Kafka and PostgreSQL containers as ``config`` asks; stop all on failure."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    network = Network().create()
    started: list[ContainerServer] = []
    labels = {"io.streamcert.run": run_token}
    try:
        kafka_link_port, pg_link_port, api_port = free_port(), free_port(), free_port()
        toxi = DockerContainer(TOXIPROXY_IMAGE).with_network(network).with_kwargs(labels=labels)
        toxi = toxi.with_command(["-host=0.0.0.0"])
        for port, host_port in ((8474, api_port), (kafka_link_port, kafka_link_port), (pg_link_port, pg_link_port)):
            _publish_on_loopback(toxi, port, host_port)
        toxiproxy = _ContainerToxiproxy(toxi, api_port, config.start_timeout)
        toxiproxy.start()
        started.append(toxiproxy)

        kafka = kafka_link = None
        if config.kafka:
            internal = free_port()
            props = render_server_properties(KafkaPorts(internal, _CONTROLLER_PORT, _EXTERNAL_PORT),
                                             (LOOPBACK, kafka_link_port), _container_log_dir(), bind_host="0.0.0.0")
            box = (DockerContainer(KAFKA_IMAGE).with_network(network).with_network_aliases(_KAFKA_ALIAS)
                   .with_kwargs(labels=labels).with_env("CLUSTER_ID", new_cluster_id())
                   .with_env("KAFKA_HEAP_OPTS", f"-Xmx{config.kafka_heap_mb}m"))
            for key, value in kafka_container_env(props).items():
                box = box.with_env(key, value)
            _publish_on_loopback(box, internal, internal)
            kafka = _ContainerKafka(box, internal, config.start_timeout)
            kafka.start()
            started.append(kafka)
            kafka_link = toxiproxy.api.create_link("kafka", kafka.upstream, kafka_link_port, bind_host="0.0.0.0")

        postgres = postgres_link = None
        if config.postgres:
            pg_port = free_port()
            box = (DockerContainer(POSTGRES_IMAGE).with_network(network).with_network_aliases(_POSTGRES_ALIAS)
                   .with_kwargs(labels=labels)
                   .with_env("POSTGRES_USER", SUPERUSER).with_env("POSTGRES_DB", DATABASE)
                   .with_env("POSTGRES_HOST_AUTH_METHOD", "trust")
                   .with_command(["postgres", "-c", "max_prepared_transactions=64", "-c", "fsync=off",
                                  "-c", "track_commit_timestamp=on"]))
            _publish_on_loopback(box, 5432, pg_port)
            postgres = _ContainerPostgres(box, pg_port, config.start_timeout)
            postgres.start()
            started.append(postgres)
            postgres_link = toxiproxy.api.create_link("postgres", f"{_POSTGRES_ALIAS}:5432", pg_link_port,
                                                      bind_host="0.0.0.0")
        return ContainerStack(network, toxiproxy, kafka, postgres, kafka_link, postgres_link)
    except BaseException:
        for server in reversed(started):
            try:
                server.stop()
            except Exception:  # keep tearing down; the original error is what matters
                pass
        network.remove()
        raise


def _container_log_dir() -> PurePosixPath:
    return PurePosixPath("/tmp/kraft-combined-logs")
