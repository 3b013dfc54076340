"""Child processes that streamcert starts, watches and always stops.

Every process started for an environment carries the environment's *run token*
in its environment variables (``STREAMCERT_RUN_TOKEN``; :func:`token_env` sets
it). Grandchildren inherit it (Spark's executors and Python workers,
PostgreSQL's backends), so :func:`processes_with_token` finds everything a run
left behind, whoever started it, and :func:`reap` kills it.

Each also carries its run's *owner* (``STREAMCERT_RUN_OWNER``: the pid and
start time of the process that started the run), so a later run can tell the
servers of a live run from those of a run whose owner was killed
(:mod:`streamcert.harness.stack.runs` reaps the latter).

Processes are found and waited for with psutil. A process that has exited but
whose parent has not reaped it (a *zombie*) counts as gone: orphans are
re-parented to PID 1, which in a container often never reaps them.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import psutil

from streamcert.harness.errors import StartupFailed, StreamcertError
from streamcert.harness.progress import step
from streamcert.harness.waiting import wait_for

if TYPE_CHECKING:
    from streamcert.harness.stack.readiness import Readiness

__all__ = [
    "RUN_TOKEN_VAR",
    "OWNER_VAR",
    "Owner",
    "token_env",
    "run_owner",
    "tail_file",
    "ManagedProcess",
    "ProcessBacked",
    "run_logged",
    "token_carriers",
    "carriers_with_owner",
    "processes_with_token",
    "reap",
    "descendants_outside_group",
    "signal_processes",
    "runs_unstopped",
]

RUN_TOKEN_VAR = "STREAMCERT_RUN_TOKEN"
OWNER_VAR = "STREAMCERT_RUN_OWNER"

#: How long processes get to disappear after SIGKILL (only a process stuck in the kernel takes longer).
_EXIT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Owner:
    """The process that owns a run: its pid and start time (a pid alone may since name another process)."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int | None = None) -> "Owner":
        """The owner record of process ``pid`` (default: this process)."""
        pid = os.getpid() if pid is None else pid
        return cls(pid, round(psutil.Process(pid).create_time(), 2))

    @classmethod
    def parse(cls, spec: str | None) -> "Owner | None":
        """The owner written by :meth:`spec`, or None for a missing or garbled value."""
        pid, _, started = (spec or "").partition("@")
        try:
            return cls(int(pid), float(started))
        except ValueError:
            return None

    def spec(self) -> str:
        return f"{self.pid}@{self.started:.2f}"

    def alive(self) -> bool:
        """True while the very process that started the run runs (not a later one given the same pid)."""
        try:
            proc = psutil.Process(self.pid)
            return proc.status() != psutil.STATUS_ZOMBIE and abs(proc.create_time() - self.started) < 0.5
        except psutil.Error:
            return False


def token_env(token: str, base: Mapping[str, str] | None = None, var: str = RUN_TOKEN_VAR) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) with ``var=token``; an empty token adds nothing.

    The run's owner goes along (``OWNER_VAR``): inherited when ``base`` already carries the same run, else this
    process, so the servers a scenario's driver process starts still belong to the run, not to that driver.
    """
    env = dict(os.environ if base is None else base)
    if token:
        env[OWNER_VAR] = run_owner(token, env, var).spec()
        env[var] = token
    return env


def run_owner(token: str, environ: Mapping[str, str] | None = None, var: str = RUN_TOKEN_VAR) -> Owner:
    """The owner of run ``token`` as seen from ``environ`` (default: this process's environment): the one it names
    when it already carries that run, else this process."""
    environ = os.environ if environ is None else environ
    inherited = Owner.parse(environ.get(OWNER_VAR)) if environ.get(var) == token else None
    return inherited or Owner.of()


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
    fault operations. ``stop`` and ``kill`` return once every process of the
    group is gone. ``stop`` is idempotent and safe before ``start``.
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
        # Once the group is gone its id may be reused by an unrelated group: never signal it again.
        self._group_gone = False

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
            self._group_gone = False
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

    def exited(self) -> str | None:
        """Why the process is not running, as a sentence; None while it runs (or before ``start``)."""
        code = self.exit_code()
        return None if code is None else f"{self.name} exited with code {code} before it was ready"

    def tail(self, lines: int = 20) -> str:
        return tail_file(self.log_path, lines)

    def _signal_group(self, signum: int) -> None:
        if self._popen is None or self._group_gone:
            return
        try:
            os.killpg(self._popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self, timeout: float, group: bool = True) -> bool:
        """Send the stop signal to the group (or, ``group`` false, to the leader alone, which then stops its own
        children) and wait up to ``timeout`` s for the leader to exit; whether it did.

        Nothing is forced: :meth:`stop` (or :meth:`kill`) afterwards removes whatever is left.
        """
        if self._popen is None or self._popen.poll() is not None:
            return self._popen is not None
        self._signal_group(signal.SIGCONT)
        if group:
            self._signal_group(self.stop_signal)
        else:
            self._popen.send_signal(self.stop_signal)
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

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
        self.kill()

    def kill(self) -> None:
        """SIGKILL the whole process group and return once every member is gone (a crash, not a shutdown)."""
        if self._popen is None or self._group_gone:
            return
        self._signal_group(signal.SIGKILL)
        self._popen.wait()
        _wait_until_group_gone(self._popen.pid, self.name)
        self._group_gone = True

    def pause(self) -> None:
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_group(signal.SIGCONT)

    def wait_ready(self, readiness: "Readiness", timeout: float, heap_hint: str = "a larger -Xmx") -> object:
        """Wait until ``readiness`` says the server answers; fail at once, with the log's last lines, if it exits.

        The failure's hint names the cause the last lines show (heap too small, disk full...) when there is one.
        """
        from streamcert.harness.stack.diagnosis import with_diagnosis

        try:
            return readiness.wait(timeout, abort=self.exited, evidence=self.tail)
        except StreamcertError as exc:
            raise with_diagnosis(exc, self.tail(60), folder=self.log_path.parent, heap_hint=heap_hint) from None


def _live_group_members(pgid: int) -> list[int]:
    """Pids of the processes of group ``pgid`` that have not exited (zombies have)."""
    members = []
    for proc in psutil.process_iter(["status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return members


def _wait_until_group_gone(pgid: int, name: str, timeout: float = _EXIT_TIMEOUT) -> None:
    # Not psutil.wait_procs: it waits for a non-child until its pid disappears, and an orphaned member's zombie
    # may never be reaped (PID 1 of a container often does not), so it would always wait the full timeout.
    wait_for(lambda: not _live_group_members(pgid), what=f"exit of every process of {name} (group {pgid})",
             timeout=timeout, interval=0.02, error=StreamcertError,
             evidence=lambda: f"still alive: {_live_group_members(pgid)}",
             hint=f"A process that outlives SIGKILL is stuck in the kernel (state D); `ps -o pid,stat,wchan -g {pgid}` "
             "shows where.")


class ProcessBacked:
    """Mixin for a resource run as one :class:`ManagedProcess` kept in ``self._process``.

    The class defines ``start()``; the mixin gives the context-manager protocol, ``pid`` (None unless running),
    ``tail``, and ``stop`` / ``kill`` that are idempotent and safe before ``start``: together the
    :class:`~streamcert.harness.stack.resources.ServerProcess` interface.
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

    def tail(self, lines: int = 20) -> str:
        """The last lines the server wrote ('' before it started)."""
        return self._process.tail(lines) if self._process is not None else ""


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
        if code != 0:
            progress.fail("killed at its time limit" if code == -9 else f"exit code {code}")
    return code, "\n".join(last)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _carriers(var: str) -> Iterator[tuple[psutil.Process, str]]:
    """Live processes other than this one whose environment has ``var``, with its value."""
    for proc, value, _ in carriers_with_owner(var):
        yield proc, value


def carriers_with_owner(var: str = RUN_TOKEN_VAR) -> Iterator[tuple[psutil.Process, str, Owner | None]]:
    """Live processes other than this one whose environment has ``var``: each with its token and its run's owner
    (None when the process does not say: started by a streamcert without owners)."""
    own = os.getpid()
    for proc in psutil.process_iter(["status"]):
        if proc.pid == own or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            environ = proc.environ()
        except psutil.Error:  # gone meanwhile, or another user's
            continue
        value = environ.get(var)
        if value is not None:
            yield proc, value, Owner.parse(environ.get(OWNER_VAR))


def token_carriers(var: str = RUN_TOKEN_VAR) -> dict[int, str]:
    """Pid -> token of every live process (other than this one) carrying ``var``, whichever run it belongs to."""
    return {proc.pid: value for proc, value in _carriers(var)}


def processes_with_token(token: str, var: str = RUN_TOKEN_VAR) -> list[int]:
    """Pids of live processes (other than this one) whose environment has ``var=token``."""
    return sorted(proc.pid for proc, value in _carriers(var) if value == token)


def reap(token: str, timeout: float = 5.0, var: str = RUN_TOKEN_VAR) -> int:
    """SIGKILL every process whose environment has ``var=token``; return how many there were.

    Rescans until two scans in a row find none: a process may fork while it is being reaped, and one in the
    middle of ``exec`` shows an empty environment for an instant. What still lives after ``timeout`` seconds
    (stuck in the kernel) is left for the caller to count with :func:`processes_with_token`.
    """
    killed: set[int] = set()
    empty_scans = 0

    def none_left() -> bool:
        nonlocal empty_scans
        found = [proc for proc, value in _carriers(var) if value == token]
        for proc in found:
            try:
                proc.kill()  # psutil checks the pid still names the process it scanned
            except psutil.Error:
                pass
            killed.add(proc.pid)
        empty_scans = 0 if found else empty_scans + 1
        return empty_scans >= 2

    try:
        wait_for(none_left, what=f"exit of every process carrying {var}={token}", timeout=timeout,
                 interval=0.05, error=StreamcertError)
    except StreamcertError:
        pass  # teardown goes on; leftovers stay visible to processes_with_token
    return len(killed)


def descendants_outside_group(pid: int) -> list[psutil.Process]:
    """The processes under ``pid`` (children, theirs...) that moved to a process group other than ``pid``'s own: a
    signal to the group misses them (a fork server's children each take a group of their own)."""
    try:
        leader = psutil.Process(pid)
        group = os.getpgid(pid)
        descendants = leader.children(recursive=True)
    except (psutil.Error, ProcessLookupError):
        return []
    outside = []
    for process in descendants:
        try:
            if os.getpgid(process.pid) != group:
                outside.append(process)
        except ProcessLookupError:  # it ended meanwhile
            continue
    return outside


def signal_processes(processes: Sequence[psutil.Process], signum: int) -> list[int]:
    """Send ``signum`` to each of ``processes`` still running (psutil checks a pid still names the process it
    found); the pids signalled."""
    done = []
    for process in processes:
        try:
            process.send_signal(signum)
            done.append(process.pid)
        except psutil.Error:  # it ended meanwhile
            continue
    return done


def runs_unstopped(process: psutil.Process) -> bool:
    """Whether ``process`` runs: neither stopped (by SIGSTOP: a freeze another fault holds) nor gone."""
    try:
        return process.status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False
