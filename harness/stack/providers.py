"""Which provider supplies the servers: ``local``, ``testcontainers`` or ``external``.

``auto`` picks testcontainers when a Docker daemon answers, else local. The
external provider uses servers the user already runs, named by environment
variables (``STREAMCERT_KAFKA_BOOTSTRAP``, ``STREAMCERT_POSTGRES_DSN``,
``STREAMCERT_TOXIPROXY_API``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping

from streamcert.harness.errors import ConfigurationError

__all__ = ["PROVIDERS", "ExternalEndpoints", "docker_available", "select_provider", "external_endpoints"]

PROVIDERS = ("auto", "local", "testcontainers", "external")


def docker_available(timeout: float = 3.0) -> bool:
    """True when a Docker daemon answers a ping within ``timeout`` seconds."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no socket, no permission, no daemon: all mean "not available"
        return False


def select_provider(requested: str, docker_probe: Callable[[], bool] = docker_available) -> str:
    """Resolve ``requested`` to a concrete provider, or raise a clear error."""
    if requested not in PROVIDERS:
        raise ConfigurationError(f"Unknown provider {requested!r}.",
                                 hint=f"Use one of: {', '.join(PROVIDERS)}.")
    if requested == "auto":
        return "testcontainers" if docker_probe() else "local"
    if requested == "testcontainers" and not docker_probe():
        raise ConfigurationError(
            "The testcontainers provider needs a Docker daemon, and none answered "
            f"(DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')}).",
            hint="Start Docker, or use `--provider local` (needs Java, Maven and Go) or `--provider auto`.",
        )
    return requested


@dataclass(frozen=True)
class ExternalEndpoints:
    bootstrap_servers: str | None
    postgres_dsn: str | None
    toxiproxy_api: str | None


def external_endpoints(environ: Mapping[str, str] | None = None) -> ExternalEndpoints:
    """Endpoints of user-run servers for the external provider; at least a broker or a database."""
    environ = os.environ if environ is None else environ
    found = ExternalEndpoints(
        environ.get("STREAMCERT_KAFKA_BOOTSTRAP") or None,
        environ.get("STREAMCERT_POSTGRES_DSN") or None,
        environ.get("STREAMCERT_TOXIPROXY_API") or None,
    )
    if not found.bootstrap_servers and not found.postgres_dsn:
        raise ConfigurationError(
            "The external provider needs your servers' addresses, and none were given.",
            hint="Set STREAMCERT_KAFKA_BOOTSTRAP=host:port and/or STREAMCERT_POSTGRES_DSN='host=... port=...' "
            "(and STREAMCERT_TOXIPROXY_API=host:port for network faults).",
        )
    return found
