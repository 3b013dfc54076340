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
    """Return the cache folder, creating it when missing.

    A setting that cannot be a writable folder (a file, a read-only or uncreatable path) is a
    ConfigurationError naming the variable it came from.
    """
    from streamcert.harness.stack.settings import writable_folder

    hint = "Point STREAMCERT_CACHE at a folder you can write (it holds Kafka's jars and Toxiproxy, ~150 MB)."
    explicit = os.environ.get("STREAMCERT_CACHE")
    if explicit:
        return writable_folder(Path(explicit).expanduser(), f"STREAMCERT_CACHE={explicit}", hint)
    if os.environ.get("XDG_CACHE_HOME"):
        folder = Path(os.environ["XDG_CACHE_HOME"]) / "streamcert"
        return writable_folder(folder, f"The cache folder {folder} (from XDG_CACHE_HOME)", hint)
    folder = Path.home() / ".cache" / "streamcert"
    return writable_folder(folder, f"The cache folder {folder} (the default; STREAMCERT_CACHE is unset)", hint)


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
