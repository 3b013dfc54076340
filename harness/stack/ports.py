"""Free loopback ports, reserved across processes until the process that took them exits.

A server's port is chosen before the server binds it (a broker's listeners go into its
``server.properties``; a cluster's ports into every node's), so between the choice and the bind
two things can take the port:

* another streamcert process choosing at the same moment (two pytest-xdist workers each start a
  stack; the kernel's "bind to port 0" hands the same port to both when one closes it first);
* any client's outgoing connection, whose source port comes from the kernel's ephemeral range.

So ports are drawn at random from a range *below* the kernel's ephemeral range (read from
``/proc/sys/net/ipv4/ip_local_port_range``; ``STREAMCERT_PORT_RANGE=LOW-HIGH`` sets it), and each
one handed out is reserved by a file in a per-user folder naming the holding process; another
process skips it while that process lives. Reservations of a process that died are taken over.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

import psutil

from streamcert.harness.errors import ConfigurationError, StartupFailed

__all__ = ["LOOPBACK", "PORT_RANGE_VARIABLE", "free_port", "port_is_free", "ensure_port_free", "port_range"]

LOOPBACK = "127.0.0.1"
PORT_RANGE_VARIABLE = "STREAMCERT_PORT_RANGE"

#: ports below this are left to well-known and registered services
_LOWEST = 10240
#: a range smaller than this leaves too little room to draw from at random
_SMALLEST_RANGE = 1000
_TRIES = 256

_handed_out: set[int] = set()
_lock = threading.Lock()
_random = random.SystemRandom()


def port_range() -> tuple[int, int]:
    """The inclusive range streamcert draws server ports from on this machine."""
    configured = os.environ.get(PORT_RANGE_VARIABLE, "").strip()
    if configured:
        return _parse_range(configured)
    ephemeral_low, ephemeral_high = _ephemeral_range()
    if ephemeral_low - _LOWEST >= _SMALLEST_RANGE:
        return _LOWEST, ephemeral_low - 1
    if 65535 - ephemeral_high >= _SMALLEST_RANGE:
        return ephemeral_high + 1, 65535
    # The ephemeral range covers nearly everything: draw from it and rely on the bind check.
    return max(ephemeral_low, 1024), ephemeral_high


def free_port(host: str = LOOPBACK) -> int:
    """Return a port on ``host`` that is free now and reserved for this process until it exits."""
    low, high = port_range()
    with _lock, _ReservationFolder() as folder:
        for _ in range(_TRIES):
            port = _random.randint(low, high)
            if port in _handed_out or not folder.available(port) or not port_is_free(port, host):
                continue
            folder.reserve(port)
            _handed_out.add(port)
            return port
    raise StartupFailed(
        f"Could not find a free TCP port on {host} in {low}-{high} after {_TRIES} tries.",
        hint=f"Too many ports of that range are in use or reserved; stop leftover servers (streamcert env "
        f"check lists them) or give streamcert another range with {PORT_RANGE_VARIABLE}=LOW-HIGH.",
    )


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing listens on ``host:port`` and it can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers set SO_REUSEADDR, so a port with connections in TIME_WAIT is still usable.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def ensure_port_free(port: int, what: str, host: str = LOOPBACK) -> None:
    """Raise a clear error when ``port`` is already taken on ``host``."""
    if not port_is_free(port, host):
        raise StartupFailed(
            f"Cannot start {what}: port {host}:{port} is already in use.",
            hint=f"Stop whatever listens there (`ss -ltnp 'sport = :{port}'` shows it) "
            "or leave the port unset so streamcert picks a free one.",
        )


def _parse_range(text: str) -> tuple[int, int]:
    low_text, _, high_text = text.partition("-")
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        low, high = 0, -1
    if not 1024 <= low <= high <= 65535:
        raise ConfigurationError(
            f"{PORT_RANGE_VARIABLE}={text!r} is not a port range streamcert can use.",
            hint="Give two ports LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, outside the kernel's ephemeral "
            "range (/proc/sys/net/ipv4/ip_local_port_range), e.g. 20000-29999; or unset it.",
        )
    return low, high


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _folder_path() -> Path:
    return Path(tempfile.gettempdir()) / f"streamcert-ports-{os.getuid()}"


def _holder_alive(record: str) -> bool:
    """True when the process a reservation names (``pid start-time``) still runs."""
    try:
        pid_text, started_text = record.split()
        process = psutil.Process(int(pid_text))
        return abs(process.create_time() - float(started_text)) < 0.01
    except (ValueError, psutil.Error):
        return False


def _this_process() -> str:
    return f"{os.getpid()} {psutil.Process().create_time():.3f}"


class _ReservationFolder:
    """The per-user folder of reservations, locked (``flock``) while one process picks a port."""

    def __init__(self) -> None:
        self._path = _folder_path()
        self._lock_file: int | None = None

    def __enter__(self) -> _ReservationFolder:
        try:
            self._path.mkdir(mode=0o700, exist_ok=True)
            self._lock_file = os.open(self._path / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._lock_file, fcntl.LOCK_EX)
        except OSError:
            self._lock_file = None  # no shared folder: this process's own set still keeps its ports apart
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._lock_file is not None:
            os.close(self._lock_file)  # releases the flock
            self._lock_file = None

    def available(self, port: int) -> bool:
        if self._lock_file is None:
            return True
        try:
            record = (self._path / str(port)).read_text()
        except OSError:
            return True
        return not _holder_alive(record)

    def reserve(self, port: int) -> None:
        if self._lock_file is None:
            return
        try:
            (self._path / str(port)).write_text(_this_process())
        except OSError:
            return
        _register_release()


_release_registered = False


def _register_release() -> None:
    global _release_registered
    if not _release_registered:
        atexit.register(_release_own_reservations)
        _release_registered = True


def _release_own_reservations() -> None:
    """Remove the reservations this process holds (those of a killed process are taken over instead)."""
    folder, me = _folder_path(), _this_process()
    for port in _handed_out:
        path = folder / str(port)
        try:
            if path.read_text() == me:
                path.unlink()
        except OSError:
            pass
