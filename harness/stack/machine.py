"""The machine a run or a benchmark measured on, as one flat dict for result files.

Timings mean little without it: :func:`machine_info` says which platform, how
many CPUs and how much memory, which Python, Java and PySpark, and which
commit of streamcert's working tree (when it runs from a git checkout).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import psutil

from streamcert.harness.errors import StreamcertError
from streamcert.harness.stack.install import find_java

__all__ = ["machine_info", "git_commit", "DIRTY"]

#: This file's place in a source checkout: the git root is the folder that holds ``harness/``.
_IN_CHECKOUT = Path("harness") / "stack" / "machine.py"
#: The folders of a checkout that hold streamcert's code (pyproject's package-dir).
_SOURCE_FOLDERS = ("streamcert", "harness", "connectors", "conformance", "reports", "benchmarks")
#: Appended to :func:`git_commit` when the checkout's code differs from its commit.
DIRTY = "+dirty"


def machine_info() -> dict[str, Any]:
    """Platform, CPUs, memory and versions of this machine; a new dict on each call (callers may add to it)."""
    cpu_count = psutil.cpu_count(logical=True)
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": cpu_count,
        "cpus_usable": _usable_cpus(cpu_count),
        "memory_mib": psutil.virtual_memory().total // 2**20,
        "java": _java_version(),
        "pyspark": _package_version("pyspark"),
        "git_commit": git_commit(),
    }


def _usable_cpus(cpu_count: int | None) -> int | None:
    """What this process may use (a container's or taskset's CPU set), not what the machine has."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return cpu_count


@functools.lru_cache(maxsize=1)
def _java_version() -> str | None:
    # `java -version` starts a JVM (a few hundred ms): once per process is enough.
    try:
        return find_java().version_line
    except StreamcertError:
        return None


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit(source: Path | None = None) -> str | None:
    """The commit checked out in the git working tree streamcert runs from, ``+dirty`` when its code differs from it
    (a tracked file of its source folders changed); None when it is not a checkout.

    ``source`` is this module's file (a parameter for tests). An installed copy inside some other repository
    (a virtualenv in a checkout) is not mistaken for a checkout of streamcert.
    """
    source = (source or Path(__file__)).resolve()
    try:
        done = subprocess.run(["git", "-C", str(source.parent), "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        return None
    toplevel, commit = lines
    if (Path(toplevel) / _IN_CHECKOUT).resolve() != source:
        return None
    return commit + (DIRTY if _changed(Path(toplevel)) else "")


def _changed(toplevel: Path) -> bool:
    """Whether the code differs from the commit: a tracked file of the source folders changed (staged or not). A
    run from such a tree ran code no commit holds; its results must not name the commit alone."""
    try:
        done = subprocess.run(["git", "-C", str(toplevel), "status", "--porcelain", "--untracked-files=no", "--",
                               *_SOURCE_FOLDERS], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())
