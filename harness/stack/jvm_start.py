"""How Spark's JVMs start: from a class archive, and with the quick JIT when asked, so a restarted driver runs sooner.

A certification restarts the driver many times (every kill, every rescale) and each start used to spend most of
its 20-25 s loading and compiling Spark's classes. Measured here (a session and a first small job, 2 cores, under
load): 24 s without either, 14-18 s with the archive, 9-11 s with the archive and the quick JIT.

- **Class data sharing** (``-XX:SharedArchiveFile``): the classes a Spark driver loads from pyspark's jars, parsed
  and verified once, kept in a dynamic archive in the cache and mapped by every later driver and executor JVM.
  It is built once per Java runtime and pyspark installation, by a short warm-up query in a child process
  (``-XX:ArchiveClassesAtExit``), under a cache lock. A JVM whose class path differs from the archive's
  ignores it silently; a build that fails is noted (``<archive>.failed``, tried again a day later) and Spark
  starts without one.
- **Quick JIT** (``jit="quick"``, ``-XX:TieredStopAtLevel=1``): only the fast C1 compiler. Drivers start a
  third faster; a long-lived JVM's batches run slower, but a certification's JVMs live seconds to minutes (a kill
  run restarts its driver every 10-40 s) and its batches are small, so C2 spends the cores it compiles on before
  it pays back. Measured on the reference aggregator's quick kill run (`certify --connector
  streamcert-batch-aggregator --requirements AGG-4 --quick --seed 1`, 2 cores, one after the other): 280 s with
  the quick JIT against 355 s with the full one (0.79), the first batch after a restart 19.5 s against 25.8 s
  (median of 5), a steady batch 1.7 s against 2.6 s (median of 27 and 26); same verdict, every planned kill cell
  reached in both. So a certification runs the quick JIT unless ``STREAMCERT_JIT`` says otherwise
  (:func:`default_jit`, :data:`CERTIFICATION_JIT`; its results record the mode in ``versions.spark_jit``);
  benchmarks run the full JIT, as a long-running user query does; the project's own tests set
  ``STREAMCERT_JIT=quick``.

``STREAMCERT_CLASS_ARCHIVE=off`` turns the archive off. Runs in whichever process starts a Spark session:
:func:`ensure_class_archive` is called before a session or a driver process starts, :func:`start_up_options` when
the session's JVM options are composed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.cache import cache_dir, cache_lock
from streamcert.harness.stack.settings import variable_default

__all__ = ["ARCHIVE_SWITCH_VAR", "CERTIFICATION_JIT", "JIT_MODES", "JIT_VAR", "class_archive_path",
           "class_archive_state", "default_jit", "ensure_class_archive", "jit_mode", "start_up_options"]

#: Set to ``off`` to start Spark without the class archive (it is never built or used then).
ARCHIVE_SWITCH_VAR = "STREAMCERT_CLASS_ARCHIVE"
JIT_MODES = ("quick", "full")
#: The JIT of Spark's JVMs when a SparkConfig does not say: ``full`` (the default) or ``quick``.
JIT_VAR = "STREAMCERT_JIT"
#: The JIT of a certification's JVMs when ``STREAMCERT_JIT`` does not say (measured in the module docstring).
CERTIFICATION_JIT = "quick"
_BUILD_TIMEOUT_S = 300.0
#: A failed build is tried again after a day (it may have failed on a machine too busy for the warm-up).
_RETRY_FAILED_AFTER_S = 86400.0
#: What the warm-up that builds an archive runs (:mod:`~streamcert.harness.stack.jvm_warm_up`): a new version builds
#: new archives, so a machine's cached ones gain what the warm-up now loads (2: the status UI's REST API).
_WARM_UP_VERSION = "warm-up 2"
#: Archives kept in the cache (one per pyspark installation); older ones are removed when a new one is built.
_ARCHIVES_KEPT = 4
_log = logging.getLogger(__name__)


def _archive_enabled() -> bool:
    return os.environ.get(ARCHIVE_SWITCH_VAR, "").lower() not in ("off", "0", "false", "no")


def _runtime_fingerprint() -> str:
    """What an archive is valid for: the Java runtime and the jars on the driver's class path, by path (a JVM
    whose class path names other files, say another virtualenv's pyspark, ignores the archive)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar")) if jars.is_dir() else []
    text = "\n".join([*_java_identity(), pyspark.__version__, str(jars), *listing, _WARM_UP_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _java_identity() -> tuple[str, str]:
    """The Java runtime's path and version line, asked once per process (``java -version`` is a process start; a
    session start asks for the archive's path up to three times)."""
    from streamcert.harness.stack.install import find_java

    java = find_java()
    return os.path.realpath(java.path), java.version_line


def class_archive_path() -> Path:
    """Where the class archive of this Java runtime and pyspark installation lives (it may not exist yet)."""
    return cache_dir() / "jvm" / f"spark-classes-{_runtime_fingerprint()}.jsa"


def class_archive_state() -> tuple[str, str]:
    """``(state, detail)``: ``built`` (its path), ``missing`` (built at the next Spark start), ``failed`` (why),
    or ``off``."""
    if not _archive_enabled():
        return "off", f"{ARCHIVE_SWITCH_VAR} is off"
    path = class_archive_path()
    failed = path.with_suffix(".failed")
    if path.is_file():
        return "built", str(path)
    if _failed_recently(failed):
        return "failed", f"{failed.read_text(errors='replace').strip()} (delete {failed} to try again)"
    return "missing", f"built at the next Spark start into {path}"


def jit_mode(default: str = "full") -> str:
    """The JIT mode ``STREAMCERT_JIT`` asks for, or ``default`` when it is unset; a :class:`ConfigurationError`
    naming a value that is not a mode (raised before anything starts, not at the first JVM's start)."""
    mode = os.environ.get(JIT_VAR) or default
    if mode not in JIT_MODES:
        raise ConfigurationError(f"{JIT_VAR}={mode}: {mode!r} is not a JIT mode of Spark's JVMs.",
                                 hint=f"Use one of {', '.join(JIT_MODES)}, or unset {JIT_VAR}.")
    return mode


@contextlib.contextmanager
def default_jit(mode: str) -> Iterator[str]:
    """``STREAMCERT_JIT=mode`` for the JVMs and processes started inside (driver children, their standbys and a
    driver pool inherit it) unless the variable is set already; yields the mode in effect."""
    with variable_default(JIT_VAR, jit_mode(mode)) as effective:
        yield effective


def start_up_options(jit: str = "full") -> str:
    """The JVM options for a Spark driver or executor: the quick JIT when asked, the class archive when built."""
    if jit not in JIT_MODES:
        source = f"{JIT_VAR}={jit}" if os.environ.get(JIT_VAR) == jit else f"SparkConfig(jit={jit!r})"
        raise ConfigurationError(f"{source}: {jit!r} is not a JIT mode of Spark's JVMs.",
                                 hint=f"Use one of {', '.join(JIT_MODES)} (SparkConfig.jit, or {JIT_VAR}).")
    options = ["-XX:TieredStopAtLevel=1"] if jit == "quick" else []
    if _archive_enabled():
        path = class_archive_path()
        if path.is_file():
            options.append(f"-XX:SharedArchiveFile={path}")
    return " ".join(options)


def ensure_class_archive() -> Path | None:
    """Build the class archive unless it exists (or is switched off, or failed to build before); its path, or None.

    Blocks while another process builds it. The build runs a warm-up query in a child process (about half a
    minute, once per machine) and moves the archive into place only when the JVM wrote it completely.
    """
    if not _archive_enabled():
        return None
    path = class_archive_path()
    failed = path.with_suffix(".failed")
    if path.is_file():
        return path
    if _failed_recently(failed):
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock("spark-class-archive"):
        if path.is_file() or _failed_recently(failed):
            return path if path.is_file() else None
        reason = _build(path)
        if reason is None:
            _prune(keep=path)
    if reason is None:
        return path
    failed.write_text(reason)
    _log.warning("Spark starts without a class archive (slower driver starts): %s Delete %s to try again.",
                 reason, failed)
    return None


def _prune(keep: Path, most: int = _ARCHIVES_KEPT) -> None:
    """Each pyspark installation (a fresh clone's virtualenv, say) gets an archive of ~190 MB: keep the newest
    few. A JVM that maps a removed archive keeps its pages; the next start of its installation builds it again."""
    archives = sorted(keep.parent.glob("spark-classes-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in archives if p != keep][max(0, most - 1):]:
        old.unlink(missing_ok=True)
        old.with_suffix(".failed").unlink(missing_ok=True)


def _failed_recently(marker: Path) -> bool:
    try:
        return time.time() - marker.stat().st_mtime < _RETRY_FAILED_AFTER_S
    except OSError:
        return False


def _build(path: Path) -> str | None:
    """Dump the archive through a warm-up child; None when it worked, else why not."""
    partial = Path(tempfile.mkdtemp(dir=path.parent)) / path.name
    env = dict(os.environ, **{ARCHIVE_SWITCH_VAR: "off"})
    command = [sys.executable, "-m", "streamcert.harness.stack.jvm_warm_up", str(partial)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"the warm-up query did not end within {_BUILD_TIMEOUT_S:.0f} s."
    try:
        if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            return f"the warm-up query exited with {done.returncode} and wrote no archive ({tail[-400:]})."
        os.replace(partial, path)
        return None
    finally:
        partial.unlink(missing_ok=True)
        partial.parent.rmdir()
