"""Settings a user gives through environment variables, checked where they are read.

Each reader takes the variable's name and its value and returns the parsed setting, or raises
:class:`~streamcert.harness.errors.ConfigurationError` whose message names the variable and the value that was
wrong (passwords masked) and whose hint says what a good value looks like. Nothing here waits: a setting is
right or wrong on sight; :func:`refused_address` adds the one network question that cannot heal by waiting
(does anything listen there at all?).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from streamcert.harness.errors import ConfigurationError

__all__ = ["variable_default", "switch_value", "host_port", "bootstrap_servers", "postgres_conninfo",
           "toxiproxy_address", "writable_folder", "folder_with", "executable", "refused_address"]


def host_port(variable: str, value: str, example: str = "127.0.0.1:9092") -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets) as (host, port)."""
    host, sep, port_text = value.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigurationError(f"{variable}={value!r} is not a host:port address "
                                 + ("(no port)." if not sep or not port_text else "(bad port)."),
                                 hint=f"Give host:port with a port between 1 and 65535, e.g. {variable}={example}.")
    return host, int(port_text)


def bootstrap_servers(variable: str, value: str) -> list[tuple[str, int]]:
    """A Kafka bootstrap list: comma-separated ``host:port``."""
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    if not entries:
        raise ConfigurationError(f"{variable}={value!r} names no broker.",
                                 hint=f"Give host:port[,host:port...], e.g. {variable}=127.0.0.1:9092.")
    return [host_port(variable, entry) for entry in entries]


def postgres_conninfo(variable: str, value: str) -> dict[str, str]:
    """A libpq connection string (``host=... port=...`` or ``postgresql://...``) as its parameters."""
    import psycopg
    import psycopg.conninfo

    from streamcert.harness.redaction import redact_text

    shown = redact_text(value)
    try:
        params = psycopg.conninfo.conninfo_to_dict(value)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(f"{variable}={shown!r} is not a PostgreSQL connection string: "
                                 f"{redact_text(str(exc)).strip()}.",
                                 hint=f"Give libpq's form, e.g. {variable}='host=127.0.0.1 port=5432 user=postgres "
                                      "dbname=postgres' or postgresql://user@127.0.0.1:5432/postgres.") from None
    port = str(params.get("port") or "5432")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"{variable}={shown!r} has port {port!r}, not a number between 1 and 65535.",
                                 hint="Correct the port (5432 is PostgreSQL's default).")
    return {key: str(val) for key, val in params.items()}


def toxiproxy_address(variable: str, value: str) -> tuple[str, int]:
    """A Toxiproxy API address, ``host:port`` or ``http://host:port``."""
    stripped = value.strip().rstrip("/")
    if stripped.startswith(("http://", "https://")):
        stripped = stripped.split("://", 1)[1]
    if "/" in stripped:
        raise ConfigurationError(f"{variable}={value!r} has a path; the Toxiproxy API is addressed by host:port.",
                                 hint=f"Give e.g. {variable}=127.0.0.1:8474.")
    return host_port(variable, stripped, example="127.0.0.1:8474")


def writable_folder(path: Path, source: str, hint: str) -> Path:
    """``path`` as a folder this process can write, created when missing; ``source`` says where it came from
    (``STREAMCERT_CACHE=/x``, or the default it was derived from)."""
    if path.exists() and not path.is_dir():
        raise ConfigurationError(f"{source} is a file, not a folder.", hint=hint)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(f"{source}: the folder cannot be created ({exc.strerror or exc}).",
                                 hint=hint) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigurationError(f"{source} is not writable by this user (uid {os.geteuid()}), or is on a "
                                 "read-only file system.", hint=hint)
    return path


def folder_with(variable: str, path: Path, patterns: tuple[str, ...], what: str) -> Path:
    """``path`` as an existing folder holding a file for each glob of ``patterns``."""
    if not path.is_dir():
        raise ConfigurationError(f"{variable}={path} is not a folder" + (" (it does not exist)." if not path.exists()
                                                                         else "."),
                                 hint=f"Point {variable} at {what}, or unset it.")
    missing = [pattern for pattern in patterns if not any(path.glob(pattern))]
    if missing:
        raise ConfigurationError(f"{variable}={path} holds no {', no '.join(missing)}.",
                                 hint=f"Point {variable} at {what}, or unset it.")
    return path


def executable(variable: str, path: Path, what: str, version_args: tuple[str, ...] = (),
               expect: str = "") -> str:
    """``path`` as a program that runs; with ``version_args``, the first line it prints (``expect`` in it)."""
    hint = f"Point {variable} at {what}, or unset it."
    if not path.is_file():
        raise ConfigurationError(f"{variable}: {path} " + ("is not a file." if path.exists() else "does not exist."),
                                 hint=hint)
    if not os.access(path, os.X_OK):
        raise ConfigurationError(f"{variable}: {path} is not executable.", hint=hint)
    if not version_args:
        return ""
    try:
        done = subprocess.run([str(path), *version_args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigurationError(f"{variable}: `{path} {' '.join(version_args)}` did not run: {exc}.",
                                 hint=hint) from None
    said = (done.stdout or done.stderr).strip()
    first = said.splitlines()[0] if said else ""
    if done.returncode != 0 or expect.lower() not in said.lower():
        raise ConfigurationError(f"{variable}: {path} is not {what}: `{path.name} {' '.join(version_args)}` "
                                 f"exited {done.returncode} and said {first[:200]!r}.", hint=hint)
    return first


def refused_address(host: str, port: int, timeout: float = 2.0) -> str | None:
    """Why nothing can ever answer at ``host:port`` (refused, unknown host), or None when it may.

    A timeout is not a refusal: a slow or filtered network may still answer later.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return "connection refused: nothing listens there"
    except socket.gaierror as exc:
        return f"the host name does not resolve ({exc.strerror or exc})"
    except OSError:
        return None


@contextlib.contextmanager
def variable_default(name: str, value: str) -> Iterator[str]:
    """``name=value`` in this process's environment (so the processes started inside inherit it) unless ``name`` is
    set already; yields ``value``, and removes only what it set."""
    if os.environ.get(name):
        yield value
        return
    os.environ[name] = value
    try:
        yield value
    finally:
        os.environ.pop(name, None)


def switch_value(name: str, choices: tuple[str, str], default: str, hint: str) -> str:
    """What the two-way switch variable ``name`` says (trimmed, any case), or ``default`` when it is unset; any other
    value is a :class:`ConfigurationError` naming it (raised before anything starts)."""
    value = (os.environ.get(name) or default).strip().lower()
    if value not in choices:
        raise ConfigurationError(f"{name}={os.environ.get(name)!r} is neither {choices[0]} nor {choices[1]}.",
                                 hint=hint)
    return value
