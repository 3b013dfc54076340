"""Free loopback ports.

Ports come from the kernel (bind to port 0) and are remembered for the life
of the process, so two servers of one environment never receive the same port
even before either has bound it.
"""

from __future__ import annotations

import socket
import threading

from streamcert.harness.errors import StartupFailed

__all__ = ["LOOPBACK", "free_port", "port_is_free", "ensure_port_free"]

LOOPBACK = "127.0.0.1"

_handed_out: set[int] = set()
_lock = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """Return a port on ``host`` that is free now and was not handed out before by this process."""
    with _lock:
        for _ in range(64):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise StartupFailed(
        f"Could not find a free TCP port on {host} after 64 tries.",
        hint="Too many ports are in use on loopback; stop leftover servers (streamcert env check lists them).",
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
