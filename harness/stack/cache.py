"""The one folder where streamcert keeps what it downloads (Kafka jars, Toxiproxy).

Set ``STREAMCERT_CACHE`` to move it; otherwise ``$XDG_CACHE_HOME/streamcert`` or
``~/.cache/streamcert``. Installers take a file lock per artefact so that
parallel test processes do not download the same thing twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

__all__ = ["cache_dir", "cache_lock"]


def cache_dir() -> Path:
    """Return the cache folder, creating it when missing."""
    explicit = os.environ.get("STREAMCERT_CACHE")
    if explicit:
        root = Path(explicit).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(base) / "streamcert"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Hold an exclusive lock named ``name`` inside the cache folder (blocks until free)."""
    lock_dir = cache_dir() / "locks"
    lock_dir.mkdir(exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
