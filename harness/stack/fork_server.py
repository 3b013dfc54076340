"""A fork server for the Python processes Spark starts on the driver: modules imported once, each process forked.

Runs as ``python -m streamcert.harness.stack.fork_server SOCKET`` (``@name``: an abstract socket), started by
:class:`~streamcert.harness.stack.python_forks.ForkServer` beside a Spark session, with the session's run token in
its environment, so its children carry it too (``/proc/<pid>/environ`` of a forked process is its parent's) and a
run's teardown finds them as it finds every other process of the run.

It binds its socket first (and says ``bound`` on its standard output, which it then closes), then imports pyspark's
planning and streaming modules, pyarrow, pandas and the client libraries the connectors use, then serves. For each
request of :mod:`~streamcert.harness.stack.fork_launcher` it forks a child that takes the request's standard
streams, environment, working folder, ``sys.path`` (from its ``PYTHONPATH``) and arguments, puts itself in a process
group of its own and runs the module as ``__main__``, as ``python -m`` would. The server answers ``pid N`` once the
child runs and ``exit N`` when it ends (a negative N: the signal that killed it); a request whose connection closes
first (its launcher was killed) has its child's process group killed.

Forking is only safe from a process with one thread: the imports are made with pyarrow's jemalloc background
thread and OpenBLAS's threads off, and a server that still finds a second thread refuses every request (the
launchers then start Python as usual). It exits on SIGTERM or when its parent exits, and leaves its children be:
they end as they would have without it (the JVM closes their pipes and sockets), and one that does not (a
connector's thread that outlives its query) stays visible to the checks that look for leftover processes.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
import traceback

__all__ = ["PRELOADED", "THREAD_SETTINGS", "serve", "main"]

#: Imported before the first fork. Only third-party code: the project's own modules (connectors, mutants, a
#: connector package under test) are imported by each child, so a changed file on disk is always the one run. The
#: modules the children run as ``__main__`` (``pyspark.daemon``, the streaming runners) are left out: ``runpy``
#: warns when the module it runs is imported already; what they import is here.
PRELOADED = (
    "pyspark", "pyspark.worker", "pyspark.worker_util", "pyspark.serializers", "pyspark.cloudpickle",
    "pyspark.accumulators", "pyspark.sql.types", "pyspark.sql.datasource", "pyspark.sql.datasource_internal",
    "pyspark.sql.pandas.types", "pyspark.sql.pandas.serializers", "pyspark.sql.streaming.datasource",
    "pyspark.sql.streaming.stateful_processor_api_client", "pyspark.sql.worker.lookup_data_sources",
    "pyspark.sql.worker.create_data_source", "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source", "pyspark.sql.worker.python_streaming_sink_runner",
    "pyspark.sql.worker.commit_data_source_write", "pyspark.sql.worker.data_source_pushdown_filters", "pyarrow",
    "pandas", "numpy", "confluent_kafka", "psycopg",
)
#: Set before the imports: libraries that would otherwise start threads at import, which a fork would not copy.
THREAD_SETTINGS = {"JE_ARROW_MALLOC_CONF": "background_thread:false", "OPENBLAS_NUM_THREADS": "1",
                   "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_REQUEST_TIMEOUT_S = 10.0
_PARENT_CHECK_S = 1.0


def _preload() -> list[str]:
    """Import :data:`PRELOADED`; the names that failed (a library not installed is simply not preloaded)."""
    failed = []
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that cannot import here is imported by the child, as without us
            failed.append(name)
    return failed


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _recv_exact(conn: socket.socket, size: int, first: bytes) -> bytes:
    data = bytearray(first)
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the launcher closed its connection mid-request")
        data.extend(chunk)
    return bytes(data)


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(_REQUEST_TIMEOUT_S)
    data, fds, _flags, _addr = socket.recv_fds(conn, 8192, 3)
    try:
        if len(data) < 4 or len(fds) != 3:
            raise ConnectionError(f"a malformed request ({len(data)} bytes, {len(fds)} descriptors)")
        (size,) = struct.unpack("!I", data[:4])
        payload = _recv_exact(conn, size, data[4:])
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    conn.settimeout(None)
    return json.loads(payload), fds


class _Server:
    def __init__(self, listener: socket.socket, safe: bool) -> None:
        self.listener = listener
        self.safe = safe
        self.parent = os.getppid()
        self.children: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        os.set_blocking(self.wake_read, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: None)
        self.terminated = False
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_read, selectors.EVENT_READ, "signal")

    def run(self) -> None:
        while not self.terminated and os.getppid() == self.parent:
            for key, _mask in self.selector.select(_PARENT_CHECK_S):
                if key.data == "accept":
                    self._accept()
                elif key.data == "signal":
                    self._on_signals()
                else:
                    self._on_launcher_gone(key.data)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError, ConnectionError):
            conn.close()
            return
        try:
            refused = "" if self.safe else "threads"
            if not refused:
                try:
                    pid = os.fork()
                except OSError as exc:  # out of processes or memory: the launcher starts Python itself
                    refused = type(exc).__name__
                else:
                    if pid == 0:
                        self._become_child(request, fds, conn)
        finally:
            for fd in fds:
                os.close(fd)
        if refused:
            try:
                conn.sendall(f"refused {refused}\n".encode())
            except OSError:
                pass
            conn.close()
            return
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:  # its launcher died while we forked
            _kill_group(pid)
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def _become_child(self, request: dict, fds: list[int], conn: socket.socket) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.setpgid(0, 0)
            self.selector.close()
            for own in (self.listener, conn, *self.children.values()):
                own.close()
            os.close(self.wake_read)
            os.close(self.wake_write)
            atexit._clear()  # the server's exit handlers are not the child's
            code = _run_child(request, fds)
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException:  # noqa: BLE001 - the child reports and exits; it must never return into the server
            traceback.print_exc()
        finally:
            os._exit(code)

    def _on_signals(self) -> None:
        try:
            received = os.read(self.wake_read, 512)
        except BlockingIOError:
            received = b""
        if signal.SIGTERM in received:
            self.terminated = True
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            try:
                self.selector.unregister(conn)
            except KeyError:  # its launcher is gone already
                pass
            try:
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()

    def _on_launcher_gone(self, pid: int) -> None:
        """A launcher's connection became readable: it closed (it was killed), so its child goes too."""
        conn = self.children[pid]
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if data:
            return  # launchers send nothing after their request; ignore anything else
        self.selector.unregister(conn)
        _kill_group(pid)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_child(request: dict, fds: list[int]) -> int:
    """Become ``python <argv>`` as the launcher was asked to, in this forked process; return its exit code."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if os.environ.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(write_through=True)
    python_path = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [request["cwd"], *python_path, *_BASE_PATH]
    importlib.invalidate_caches()
    argv = request["argv"]
    module = argv[1]
    sys.argv = [argv[0], *argv[2:]]  # run_module puts the module's file in sys.argv[0], as ``python -m`` does
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - what ``python -m`` prints for an uncaught error, and its exit code
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
            pass
    return code


#: ``sys.path`` without the server's own working folder: each child puts its request's in front.
_BASE_PATH: list[str] = []


def serve(address: str) -> int:
    """Bind ``address``, preload, and serve until told to stop; the process's exit code."""
    from streamcert.harness.stack.fork_launcher import socket_address

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_address(address))
    listener.listen(64)  # requests queue while the imports run: a planning call waits for them, as it would import
    _say_bound()
    os.environ.update(THREAD_SETTINGS)
    _BASE_PATH[:] = sys.path[1:]
    failed = _preload()
    gc.freeze()  # the preloaded objects stay out of the children's collections: fewer pages copied, less CPU
    safe = _threads() == 1
    if failed or not safe:
        print(f"streamcert fork server: not preloaded {failed}; threads {_threads()}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        _Server(listener, safe).run()
    finally:
        listener.close()
        if not address.startswith("@"):
            try:
                os.unlink(address)
            except OSError:
                pass
    return 0


def _say_bound() -> None:
    """Tell the starter the socket takes requests, then let go of that pipe (children get the launchers' streams)."""
    sys.stdout.write("bound\n")
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m streamcert.harness.stack.fork_server SOCKET", file=sys.stderr)
        return 2
    return serve(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
