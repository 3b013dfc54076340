"""PySpark's worker daemon with the modules every worker imports loaded once, before it forks.

Spark runs Python work (a data source's reads and writes, its planning, UDFs) in processes forked from a daemon,
``python -m pyspark.daemon``, one per driver or executor JVM and worker module. Stock PySpark imports the worker's
modules *after* each fork, on purpose: pyarrow and numpy start native threads as they load, and a process forked
while other threads run may inherit a lock one of them held. So every forked worker pays pyarrow, pandas and the
data source modules again (0.5-0.8 s of CPU each, measured here), and a certification forks hundreds: every driver
restart starts new daemons and forks new workers, on the first batch's critical path.

This daemon (Spark's ``spark.python.daemon.module``, which :func:`spark_conf` sets for every session streamcert
starts unless ``STREAMCERT_PYTHON_PRELOAD=off``) imports them first, with the threads they would start switched off
(OpenBLAS's pool to one thread, the background thread of pyarrow's jemalloc off). It checks that the process still
has a single thread and only then runs PySpark's own daemon loop, so each fork starts with the modules loaded.
Should a thread exist all the same (a newer pyarrow, another BLAS), it does not fork from there: it replaces itself
with the stock daemon, which imports after each fork as before.

Spark uses it for the task workers' daemon (``pyspark.worker``), on the driver under ``local`` and on each
executor; its planning runners (a data source's lookup, creation and read planning) start PySpark's own daemon
whatever the setting says (seen in Spark 4.3).

Started by Spark with the worker module as its argument, as ``pyspark.daemon`` is.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator

__all__ = ["DAEMON_MODULE", "DAEMON_MODULES", "PRELOAD_SWITCH_VAR", "PRELOADED_MODULES", "PRELOADED_VAR",
           "QUIET_THREADS", "main", "preload", "spark_conf", "thread_count"]

#: This module, as Spark names it.
DAEMON_MODULE = "streamcert.harness.stack.python_daemon"
#: The daemons a Python worker may be forked from, as they appear after ``-m`` in its command line.
DAEMON_MODULES = ("pyspark.daemon", DAEMON_MODULE)
#: Set to ``off`` for PySpark's own daemon (each worker imports its modules after the fork).
PRELOAD_SWITCH_VAR = "STREAMCERT_PYTHON_PRELOAD"

#: What a forked task worker imports anyway: the worker loop, the data source API, Arrow and pandas conversions,
#: and the client libraries of the shipped connectors. A module that fails to import is skipped (the worker
#: reports its own import error, as it would have).
PRELOADED_MODULES = (
    "pyspark.worker",
    "pyarrow",
    "pandas",
    "pyspark.sql.datasource",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.pandas.types",
    "pyspark.sql.conversion",
    "confluent_kafka",
    "psycopg",
)

#: Native thread pools that start as their library loads, switched off while the daemon preloads (only for the
#: daemon's own start: its workers see the environment Spark gave it).
QUIET_THREADS = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}

#: Set to the number of the modules the daemon preloaded when it runs PySpark's loop (workers inherit it: a test
#: or a worker can tell it was forked from here).
PRELOADED_VAR = "STREAMCERT_PRELOADED_DAEMON"


def spark_conf() -> dict[str, str]:
    """The Spark settings that make a session's daemons this module (none when switched off)."""
    if os.environ.get(PRELOAD_SWITCH_VAR, "").lower() in ("off", "0", "false", "no"):
        return {}
    return {"spark.python.daemon.module": DAEMON_MODULE}


@contextlib.contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    previous = {name: os.environ.get(name) for name in changes}
    os.environ.update({name: value for name, value in changes.items() if previous[name] is None})
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)


def preload(modules: tuple[str, ...] = PRELOADED_MODULES) -> list[str]:
    """Import ``modules`` with :data:`QUIET_THREADS` in the environment; the ones that imported."""
    loaded = []
    with _environment(QUIET_THREADS):
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a missing optional client library is the worker's business
                continue
            loaded.append(name)
    return loaded


def thread_count() -> int:
    """The process's OS threads (native ones included, which :mod:`threading` does not see)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc (macOS): only Python's own threads can be counted
        import threading

        return threading.active_count()


def main() -> None:
    """Preload, then run PySpark's daemon loop; or become the stock daemon when a thread would be forked over."""
    loaded = preload()
    threads = thread_count()
    if threads > 1:
        # stdout is the daemon's channel to the JVM (its port): the note goes to stderr, which Spark logs
        print(f"streamcert: the preloading Python daemon has {threads} threads after its imports; running "
              f"PySpark's own daemon instead (set {PRELOAD_SWITCH_VAR}=off to skip the preload)", file=sys.stderr)
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]])
    os.environ[PRELOADED_VAR] = str(len(loaded))
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
