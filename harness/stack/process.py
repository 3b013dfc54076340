"""Child processes that streamcert starts, watches and always stops.

Every process started for an environment carries the environment's *run token*
in its environment variables (``STREAMCERT_RUN_TOKEN``). Grandchildren inherit
it (Spark's executors and Python workers, PostgreSQL's backends), so
:func:`processes_with_token` finds everything a run left behind by scanning
``/proc``, whoever started it, and :func:`reap` kills it.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from streamcert.harness.errors import StartupFailed
from streamcert.harness.progress import step

__all__ = [
    "RUN_TOKEN_VAR",
    "ManagedProcess",
    "ProcessBacked",
    "run_logged",
    "wait_until",
    "processes_with_token",
    "reap",
]

RUN_TOKEN_VAR = "STREAMCERT_RUN_TOKEN"


def tail_file(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a text file, or '' when it does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


class ManagedProcess:
    """A server process in its own session, its output in ``log_path``.

    ``start`` launches it; ``stop`` terminates the whole process group (then
    kills it after ``stop_timeout``); ``kill``, ``pause`` and ``resume`` are the
    fault operations. ``stop`` is idempotent and safe before ``start``.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
        stop_signal: int = signal.SIGTERM,
        stop_timeout: float = 15.0,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else dict(os.environ)
        self.cwd = cwd
        self.user = user
        self.stop_signal = stop_signal
        self.stop_timeout = stop_timeout
        self._popen: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self) -> None:
        if self.is_running():
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                user=self.user,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise StartupFailed(
                f"Cannot start {self.name}: {exc.filename or self.argv[0]} was not found.",
                hint="Run `streamcert env check` to see which prerequisite is missing.",
            ) from None
        finally:
            log.close()

    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def exit_code(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def tail(self, lines: int = 20) -> str:
        return tail_file(self.log_path, lines)

    def _signal_group(self, signum: int) -> None:
        if self._popen is None:
            return
        try:
            os.killpg(self._popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> None:
        """Stop gracefully, then forcefully; idempotent."""
        if self._popen is None:
            return
        if self._popen.poll() is None:
            self._signal_group(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self._signal_group(self.stop_signal)
            try:
                self._popen.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                pass
        # The leader may be gone while children of the group live on.
        self._signal_group(signal.SIGKILL)
        self._popen.wait()

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it (a crash, not a shutdown)."""
        if self._popen is None:
            return
        self._signal_group(signal.SIGKILL)
        self._popen.wait()

    def pause(self) -> None:
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_group(signal.SIGCONT)

    def wait_ready(
        self,
        check: Callable[[], bool],
        *,
        what: str,
        timeout: float,
        hint: str,
        interval: float = 0.2,
    ) -> None:
        """Poll ``check`` until it returns True; fail fast if the process exits."""

        def failed_early() -> str | None:
            code = self.exit_code()
            return None if code is None else f"{self.name} exited with code {code} before it was ready"

        wait_until(check, what=what, timeout=timeout, hint=hint, interval=interval,
                   abort=failed_early, evidence=self.tail)


class ProcessBacked:
    """Mixin for a resource run as one :class:`ManagedProcess` kept in ``self._process``.

    The class defines ``start()``; the mixin gives the context-manager protocol, ``pid`` (None unless running), and
    ``stop`` / ``kill`` that are idempotent and safe before ``start``.
    """

    _process: ManagedProcess | None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.is_running() else None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop gracefully, then forcefully; idempotent."""
        if self._process is not None:
            self._process.stop()

    def kill(self) -> None:
        """SIGKILL the process group: a crash, no shutdown hooks."""
        if self._process is not None:
            self._process.kill()

    def pause(self) -> None:
        """SIGSTOP the process group (a hung server: connections stay open, nothing answers)."""
        if self._process is not None:
            self._process.pause()

    def resume(self) -> None:
        if self._process is not None:
            self._process.resume()

    def restart(self, clean: bool = True) -> None:
        """Stop (cleanly, or by SIGKILL) and start again with the same settings and data."""
        (self.stop if clean else self.kill)()
        self._process = None
        self.start()  # every ProcessBacked class defines start()


def wait_until(
    check: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    hint: str,
    interval: float = 0.2,
    abort: Callable[[], str | None] | None = None,
    evidence: Callable[[], str] | None = None,
) -> None:
    """Wait for ``check()`` to be true, with progress; raise :class:`StartupFailed` otherwise.

    ``abort`` may return a reason to give up early (the server died);
    ``evidence`` supplies what was seen (log lines) for the error.
    """
    deadline = time.monotonic() + timeout
    last_error = ""
    with step(f"Waiting for {what}") as progress:
        while True:
            reason = abort() if abort else None
            if reason:
                raise StartupFailed(f"{what} did not start: {reason}.", hint=hint,
                                    details=evidence() if evidence else None)
            try:
                if check():
                    return
                last_error = ""
            except Exception as exc:  # readiness probes fail in many ways while a server boots
                last_error = f"{type(exc).__name__}: {exc}"
                progress.update(last_error)
            if time.monotonic() >= deadline:
                seen = f" The last probe said: {last_error}." if last_error else ""
                raise StartupFailed(f"{what} was not ready after {timeout:.0f}s.{seen}", hint=hint,
                                    details=evidence() if evidence else None)
            time.sleep(interval)


def run_logged(
    argv: Sequence[str],
    *,
    description: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, str]:
    """Run a short-lived tool (mvn, go, apt-get) showing its latest output line as progress.

    Returns ``(exit_code, last_lines)``; exit code -9 means it was killed at ``timeout``.
    """
    last = collections.deque(maxlen=40)
    with step(description) as progress:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
        )
        timer = threading.Timer(timeout, lambda: _kill_group(proc.pid))
        timer.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", errors="replace").rstrip()
                if line:
                    last.append(line)
                    progress.update(line)
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                _kill_group(proc.pid)
                proc.wait()
    return code, "\n".join(last)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def processes_with_token(token: str, var: str = RUN_TOKEN_VAR) -> list[int]:
    """Pids of live processes (other than this one) whose environment has ``var=token``."""
    needle = f"{var}={token}".encode()
    found = []
    own = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if state == "Z":  # a zombie is already dead; its parent just has not reaped it
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def reap(token: str, timeout: float = 5.0, var: str = RUN_TOKEN_VAR) -> int:
    """SIGKILL every process whose environment has ``var=token``; return how many there were.

    Rescans until none is left: a process may fork while it is being reaped.
    """
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = processes_with_token(token, var)
        if not pids or time.monotonic() >= deadline:
            return len(killed)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            killed.add(pid)
        time.sleep(0.05)
