"""What Spark runs as its Python when a fork server is on: hands the process to the server, or becomes Python.

Spark starts a fresh interpreter for every Python data source planning call (``-m pyspark.daemon
pyspark.sql.worker.lookup_data_sources``, ``create_data_source``, ``plan_data_source_read``, ...), for a streaming
source's runner and for a stateful query's driver worker. Each imports pyspark, pyarrow and pandas again: about
0.5 s of CPU each, several times per driver start. With ``spark.pyspark.python`` pointing at this launcher, those
processes are forked from :mod:`~streamcert.harness.stack.fork_server`, which imported them once.

Called by Spark's JVM (driver or executor) wherever it would have started Python, with Python's own arguments.
For a module the server serves, it connects to the socket ``STREAMCERT_FORK_SOCKET`` names and sends its arguments,
environment, working folder and its standard input, output and error (the file descriptors themselves), then
stays as the process Spark sees: it forwards SIGTERM, SIGINT and SIGHUP to the forked child and exits as the child
did. If it is killed, the server kills the child (it sees the connection close). Everything else (the task
workers' daemon ``-m pyspark.daemon`` with ``pyspark.worker``, any other command line) and any failure to reach
the server ``exec``\\ s the real interpreter with the same arguments, so the process is what it would have been.

Standard library only, and started with ``-I -S``: it runs before every Python process Spark starts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

__all__ = ["SOCKET_VAR", "INTERPRETER_VAR", "ROUTED_MODULES", "ROUTED_DAEMON_PREFIX", "routed_module", "socket_address",
           "main"]

#: The server's socket (``@name``: a name in Linux's abstract namespace, which leaves no file behind a killed
#: server); unset, every process execs the real interpreter.
SOCKET_VAR = "STREAMCERT_FORK_SOCKET"
#: The real interpreter (the server's own), exec'd for anything the server does not serve.
INTERPRETER_VAR = "STREAMCERT_FORK_PYTHON"
#: Modules Spark runs directly (``python -m module``) that the server forks.
ROUTED_MODULES = ("pyspark.sql.streaming.python_streaming_source_runner",
                  "pyspark.sql.streaming.transform_with_state_driver_worker")
#: ``-m pyspark.daemon <worker module>`` is served when the worker module starts with this: the planning workers.
#: The task workers' daemon (``pyspark.worker``) is not: faults find task workers by their command line and their
#: parent, and a preloaded task daemon saved nothing when measured (it forks one or two workers per driver).
ROUTED_DAEMON_PREFIX = "pyspark.sql.worker."
#: Seconds to reach the server before falling back to the real interpreter.
_CONNECT_TIMEOUT_S = 2.0
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def routed_module(argv: list[str]) -> str | None:
    """The module the server would run for Python arguments ``argv`` (without the interpreter), else None."""
    if len(argv) < 2 or argv[0] != "-m":
        return None
    module = argv[1]
    if module in ROUTED_MODULES:
        return module
    if module == "pyspark.daemon" and len(argv) == 3 and argv[2].startswith(ROUTED_DAEMON_PREFIX):
        return module
    return None


def socket_address(value: str) -> str:
    """The address a :data:`SOCKET_VAR` value names: ``@name`` is ``name`` in the abstract namespace."""
    return "\0" + value[1:] if value.startswith("@") else value


def _become_python(interpreter: str, argv: list[str]) -> None:
    os.execv(interpreter, [interpreter, *argv])


def _send_request(conn: socket.socket, argv: list[str]) -> None:
    payload = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    header = struct.pack("!I", len(payload))
    socket.send_fds(conn, [header + payload[:4096]], [0, 1, 2])
    if len(payload) > 4096:
        conn.sendall(payload[4096:])


def _read_line(conn: socket.socket, pending: bytearray) -> str | None:
    while b"\n" not in pending:
        try:
            chunk = conn.recv(64)
        except InterruptedError:
            continue
        if not chunk:
            return None
        pending.extend(chunk)
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line.decode()


def _detach_standard_streams() -> None:
    """The child holds the JVM's pipes now; this process keeping them open would hide the child's exit from it."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _exit_as(code: int) -> None:
    if code < 0:  # the child died of a signal: so does this process, so Spark sees the same
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF if code >= 0 else 1)


def main(argv: list[str]) -> None:
    interpreter = os.environ.get(INTERPRETER_VAR) or sys.executable
    address = os.environ.get(SOCKET_VAR)
    if not address or routed_module(argv) is None:
        _become_python(interpreter, argv)
    # before the request: the child may run (and Spark may signal it) before its pid reaches this process
    relay = _SignalRelay()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(_CONNECT_TIMEOUT_S)
        conn.connect(socket_address(address))
        conn.settimeout(None)
        _send_request(conn, argv)
        pending = bytearray()
        started = _read_line(conn, pending)
    except OSError:
        started = None
    if not started or not started.startswith("pid "):
        conn.close()
        relay.exit_if_signalled()
        _become_python(interpreter, argv)  # the server is gone or refused: run as Spark asked, without it
    child = int(started.split()[1])
    relay.to(child)
    _detach_standard_streams()
    ended = _read_line(conn, pending)
    if ended and ended.startswith("exit "):
        _exit_as(int(ended.split()[1]))
    _wait_for_exit(child)  # the server went away first: this process stands for the child until it ends
    _exit_as(1)


class _SignalRelay:
    """Forwards SIGTERM, SIGINT and SIGHUP to the child, holding those that come before its pid is known."""

    def __init__(self) -> None:
        self.child: int | None = None
        self.held: list[int] = []
        for signum in _FORWARDED:
            signal.signal(signum, self._received)

    def _received(self, signum: int, _frame: object) -> None:
        if self.child is None:
            self.held.append(signum)
        else:
            _forward(self.child, signum)

    def to(self, child: int) -> None:
        self.child = child
        for signum in self.held:
            _forward(child, signum)

    def exit_if_signalled(self) -> None:
        """No child will come: a signal held for it is this process's end, as it would have been without us."""
        for signum in _FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        if self.held:
            _exit_as(-self.held[0])


def _wait_for_exit(pid: int) -> None:
    """Wait until ``pid`` (not this process's child, so no ``waitpid``) has exited."""
    import select

    try:
        handle = os.pidfd_open(pid)
    except OSError:  # already gone
        return
    try:
        while not select.select([handle], [], [], 60.0)[0]:
            pass
    finally:
        os.close(handle)


def _forward(child: int, signum: int) -> None:
    try:
        os.kill(child, signum)
    except OSError:  # it has just exited; its exit code is on its way
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
