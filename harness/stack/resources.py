"""The small interfaces the environment's parts satisfy.

A :class:`Resource` starts and stops (idempotently, and ``stop`` is safe
before ``start``) and is a context manager. A :class:`ServerProcess` is a
resource whose process faults can target: crash it, pause it, restart it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Resource", "ServerProcess"]


@runtime_checkable
class Resource(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...

    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class ServerProcess(Resource, Protocol):
    @property
    def pid(self) -> int | None: ...

    def kill(self) -> None: ...

    def restart(self, clean: bool = True) -> None: ...

    def tail(self, lines: int = 20) -> str: ...
