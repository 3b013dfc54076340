"""The small interfaces the environment's parts satisfy.

A :class:`Resource` starts and stops (idempotently, and ``stop`` is safe
before ``start``) and is a context manager. A :class:`ServerProcess` is a
resource whose process faults can target: crash it, pause it, restart it,
read its log. Local servers (a child process) and container servers (a Docker
container) both are one; :class:`KafkaServer`, :class:`PostgresServer` and
:class:`ToxiproxyServer` add what the environment reads from each kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from streamcert.harness.stack.toxiproxy import ToxiproxyApi

__all__ = ["Resource", "ServerProcess", "KafkaServer", "PostgresServer", "ToxiproxyServer"]


@runtime_checkable
class Resource(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class ServerProcess(Resource, Protocol):
    """A server the fault operations act on; ``pid`` is None unless it runs."""

    @property
    def pid(self) -> int | None: ...

    def kill(self) -> None:
        """Crash it (SIGKILL): no shutdown hooks run."""

    def restart(self, clean: bool = True) -> None:
        """Stop it (cleanly, or by SIGKILL) and start it again with the same data; return once it answers."""

    def pause(self) -> None:
        """Freeze it: connections stay open, nothing answers."""

    def resume(self) -> None: ...

    def tail(self, lines: int = 20) -> str:
        """The last lines of its log ('' when there is none yet)."""


@runtime_checkable
class KafkaServer(ServerProcess, Protocol):
    @property
    def direct_bootstrap(self) -> str:
        """A listener clients reach without the proxy (admin work, raw-broker baselines)."""

    @property
    def upstream(self) -> str:
        """The address the proxy forwards clients to."""


@runtime_checkable
class PostgresServer(ServerProcess, Protocol):
    @property
    def dsn(self) -> str:
        """DSN straight to the server (bypasses the proxy)."""


@runtime_checkable
class ToxiproxyServer(ServerProcess, Protocol):
    @property
    def api(self) -> "ToxiproxyApi": ...
