"""The fork server beside a Spark session, as a resource: its launcher file, its socket, its process.

:func:`~streamcert.harness.stack.spark.spark_session` starts one when ``SparkConfig.fork_server`` is on, before the
driver JVM (the imports run while the JVM starts), points ``PYSPARK_PYTHON`` at :meth:`ForkServer.python` and puts
:meth:`ForkServer.environment` in the JVM's environment; :func:`~streamcert.harness.stack.spark.stop_spark` stops
it. Whether it is on by default comes from ``STREAMCERT_FORK_SERVER`` (``on`` or ``off``).

The launcher (:mod:`~streamcert.harness.stack.fork_launcher`) is written once per interpreter into the cache, as
an executable script whose first line runs this interpreter with ``-I -S`` (:func:`launcher_path`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import select
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack import fork_launcher
from streamcert.harness.stack.cache import cache_dir
from streamcert.harness.stack.settings import switch_value, variable_default

__all__ = ["SWITCH_VAR", "CERTIFICATION_FORK_SERVER", "fork_server_mode", "fork_server_default", "default_fork_server",
           "launcher_path", "ForkServer"]

#: ``on`` or ``off``: whether Spark sessions start a fork server when their SparkConfig does not say.
SWITCH_VAR = "STREAMCERT_FORK_SERVER"
_SWITCH_VALUES = ("on", "off")
_STOP_TIMEOUT_S = 5.0
_BIND_TIMEOUT_S = 30.0
#: The longest interpreter path a launcher names on its first line (the kernel reads 255 bytes of it).
_FIRST_LINE_LIMIT = 200


#: Whether a certification's Spark sessions have a fork server when ``STREAMCERT_FORK_SERVER`` does not say.
CERTIFICATION_FORK_SERVER = "on"


def fork_server_mode(default: str = "off") -> str:
    """``on`` or ``off``: what ``STREAMCERT_FORK_SERVER`` says, or ``default`` when it is unset; a value other than
    on or off is a :class:`ConfigurationError` (raised before anything starts)."""
    return switch_value(SWITCH_VAR, _SWITCH_VALUES, default,
                        hint=f"Set {SWITCH_VAR}=on to fork Spark's driver-side Python processes from a preloaded "
                             "server, off to start each one fresh, or unset it.")


def fork_server_default() -> bool:
    """Whether a SparkConfig that does not say has a fork server: ``STREAMCERT_FORK_SERVER``, off when unset."""
    return fork_server_mode() == "on"


@contextlib.contextmanager
def default_fork_server(mode: str) -> Iterator[str]:
    """``STREAMCERT_FORK_SERVER=mode`` for the sessions and processes started inside (driver children, standbys
    and a driver pool inherit it) unless the variable is set already; yields the mode in effect."""
    with variable_default(SWITCH_VAR, fork_server_mode(mode)) as effective:
        yield effective


def launcher_path(interpreter: str | None = None) -> Path:
    """The executable launcher for ``interpreter`` (this one by default), written into the cache if missing.

    Its first line runs the interpreter itself, unless the interpreter's path is one a first line cannot hold (Linux
    splits it at the first blank and reads at most 255 bytes of it): then a ``/bin/sh`` script execs the
    interpreter on a copy of the launcher's source."""
    interpreter = interpreter or sys.executable
    source = Path(fork_launcher.__file__).read_text(encoding="utf-8")
    folder = cache_dir() / "fork-launcher"
    if len(interpreter) <= _FIRST_LINE_LIMIT and not any(char.isspace() for char in interpreter):
        return _written_once(folder, f"#!{interpreter} -IS\n{source}", executable=True)
    script = _written_once(folder, source, suffix=".py")
    return _written_once(folder, f'#!/bin/sh\nexec {shlex.quote(interpreter)} -IS {shlex.quote(str(script))} "$@"\n',
                         executable=True)


def _written_once(folder: Path, text: str, suffix: str = "", executable: bool = False) -> Path:
    path = folder / f"python-{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}")
        staged.write_text(text, encoding="utf-8")
        staged.chmod(0o755 if executable else 0o644)
        os.replace(staged, path)  # atomic: a launcher is never seen half-written by a concurrent run
    return path


class ForkServer:
    """A fork server process and its socket (a context manager; ``stop()`` is idempotent and safe without
    ``start()``). The server inherits this process's environment, run tokens included."""

    #: The variables :meth:`environment` sets.
    VARIABLES = (fork_launcher.SOCKET_VAR, fork_launcher.INTERPRETER_VAR)

    def __init__(self) -> None:
        self._address: str | None = None
        self._process: subprocess.Popen | None = None
        self._launcher: Path | None = None

    def __enter__(self) -> "ForkServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "ForkServer":
        """Start the server and wait until its socket takes requests (it imports after that: launchers that come
        early wait in its queue). What it says of itself goes to this process's standard error."""
        if self._process is not None:
            return self
        self._launcher = launcher_path()
        self._address = f"@streamcert-fork-{secrets.token_hex(8)}"
        self._process = subprocess.Popen(
            [sys.executable, "-m", "streamcert.harness.stack.fork_server", self._address],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, close_fds=True)
        try:
            said = self._first_line(_BIND_TIMEOUT_S)
        finally:
            self._process.stdout.close()
        if said != b"bound\n":
            self.stop()
            raise StartupFailed(f"The fork server did not bind its socket within {_BIND_TIMEOUT_S:.0f} s "
                                f"(it said {said!r}).", hint=f"Set {SWITCH_VAR}=off to start Spark's Python "
                                "processes without it, and report what this process printed above.")
        return self

    def _first_line(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self._process.stdout], [], [], timeout)
        return self._process.stdout.readline() if ready else b""

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def python(self) -> str:
        """What Spark should run as Python: the launcher."""
        if self._launcher is None:
            raise RuntimeError("the fork server has not started")
        return str(self._launcher)

    def environment(self) -> dict[str, str]:
        """The variables a launcher needs, for the JVM's environment (its Python processes inherit them)."""
        if self._address is None:
            raise RuntimeError("the fork server has not started")
        return {fork_launcher.SOCKET_VAR: self._address, fork_launcher.INTERPRETER_VAR: sys.executable}

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
