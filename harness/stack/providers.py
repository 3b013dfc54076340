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
from streamcert.harness.redaction import redact_text
from streamcert.harness.stack.settings import bootstrap_servers, postgres_conninfo, refused_address, toxiproxy_address

__all__ = ["PROVIDERS", "ExternalEndpoints", "docker_available", "select_provider", "external_endpoints",
           "refuse_unreachable"]

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
    # Read on sight, so a malformed setting is an error naming its variable, not a retry loop.
    if found.bootstrap_servers:
        bootstrap_servers("STREAMCERT_KAFKA_BOOTSTRAP", found.bootstrap_servers)
    if found.postgres_dsn:
        postgres_conninfo("STREAMCERT_POSTGRES_DSN", found.postgres_dsn)
    if found.toxiproxy_api:
        toxiproxy_address("STREAMCERT_TOXIPROXY_API", found.toxiproxy_api)
    return found


def refuse_unreachable(endpoints: ExternalEndpoints) -> None:
    """Raise at once when one of the user's servers cannot answer at all (refused, unknown host).

    Readiness waits are for servers that are starting; a user's running server that refuses connections will
    not start answering within them, so it is not retried.
    """
    addresses = []
    if endpoints.bootstrap_servers:
        addresses += [("STREAMCERT_KAFKA_BOOTSTRAP", endpoints.bootstrap_servers, address)
                      for address in bootstrap_servers("STREAMCERT_KAFKA_BOOTSTRAP", endpoints.bootstrap_servers)]
    if endpoints.postgres_dsn:
        params = postgres_conninfo("STREAMCERT_POSTGRES_DSN", endpoints.postgres_dsn)
        if not str(params.get("host") or "/").startswith("/"):  # a Unix socket folder is not probed here
            addresses.append(("STREAMCERT_POSTGRES_DSN", redact_text(endpoints.postgres_dsn),
                              (str(params["host"]), int(params.get("port") or 5432))))
    if endpoints.toxiproxy_api:
        addresses.append(("STREAMCERT_TOXIPROXY_API", endpoints.toxiproxy_api,
                          toxiproxy_address("STREAMCERT_TOXIPROXY_API", endpoints.toxiproxy_api)))
    for variable, value, (host, port) in addresses:
        why = refused_address(host, port)
        if why is not None:
            raise ConfigurationError(
                f"The external provider cannot reach {host}:{port} from {variable}={value!r}: {why}.",
                hint=f"Start that server, or correct {variable}; the external provider uses servers you run "
                     "(`--provider local` starts its own).")
    if endpoints.postgres_dsn:
        _refuse_rejected_login(endpoints.postgres_dsn)


#: What a PostgreSQL server says when it will never accept this DSN, however long one waits.
_LOGIN_REJECTED = ("password authentication failed", "no password supplied", "does not exist",
                   "no pg_hba.conf entry", "permission denied")


def _refuse_rejected_login(dsn: str) -> None:
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        said = redact_text(str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)).rstrip(".")
        if any(marker in said for marker in _LOGIN_REJECTED):
            raise ConfigurationError(
                f"Your PostgreSQL server refused STREAMCERT_POSTGRES_DSN={redact_text(dsn)!r}: {said}.",
                hint="Correct the user, password (or passfile=) and dbname in STREAMCERT_POSTGRES_DSN; the user "
                     "needs to create tables and prepared transactions (max_prepared_transactions > 0).") from None
