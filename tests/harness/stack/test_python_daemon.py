"""The preloading Python daemon: it imports the task workers' modules with their native threads kept off, forks
only from a single-threaded process (else it becomes PySpark's own daemon), and a real session's task workers are
forked from it with the modules loaded."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from streamcert.harness.stack import python_daemon
from streamcert.harness.stack.python_daemon import (DAEMON_MODULE, PRELOAD_SWITCH_VAR, PRELOADED_MODULES,
                                                    PRELOADED_VAR, spark_conf)


def _python(code: str, **kwargs) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name not in python_daemon.QUIET_THREADS}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=env, **kwargs)


def test_sessions_name_the_preloading_daemon_unless_it_is_switched_off(monkeypatch):
    monkeypatch.delenv(PRELOAD_SWITCH_VAR, raising=False)
    assert spark_conf() == {"spark.python.daemon.module": DAEMON_MODULE}
    assert DAEMON_MODULE == python_daemon.__name__
    monkeypatch.setenv(PRELOAD_SWITCH_VAR, "off")
    assert spark_conf() == {}


def test_the_preload_loads_every_module_and_leaves_the_process_with_one_thread():
    done = _python("""
        import os, sys
        from streamcert.harness.stack.python_daemon import preload, thread_count
        loaded = preload()
        # the switches were only for the preload: a worker forked later sees the environment Spark gave
        print(len(loaded), thread_count(), "OPENBLAS_NUM_THREADS" in os.environ, "pandas" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(len(PRELOADED_MODULES)), "1", "False", "True"]


def test_a_daemon_that_has_a_thread_after_its_imports_becomes_pysparks_own():
    code = textwrap.dedent("""
        import sys, threading, time
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        sys.argv = ["python_daemon", "pyspark.worker"]
        from streamcert.harness.stack.python_daemon import main
        main()
    """)
    env = {**os.environ, "PYTHON_WORKER_FACTORY_SECRET": "s"}
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    try:
        port = struct.unpack("!i", process.stdout.read(4))[0]  # PySpark's daemon tells the JVM its port first
        assert 0 < port < 65536
        assert psutil.Process(process.pid).cmdline()[1:] == ["-m", "pyspark.daemon", "pyspark.worker"]
        process.stdin.close()  # the JVM went away: the daemon shuts down (PySpark's exit code for that is 1)
        process.wait(timeout=30)
        assert "running PySpark's own daemon instead" in process.stderr.read().decode()
    finally:
        process.kill()
        process.wait()


@pytest.mark.integration
def test_a_sessions_task_workers_are_forked_from_the_preloading_daemon(stack):
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def partitions(self):
            return [InputPartition(index) for index in range(4)]

        def read(self, partition):
            import os
            import sys

            yield partition.value, os.environ.get("STREAMCERT_PRELOADED_DAEMON", ""), "pandas" in sys.modules

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "preload_probe"

        def schema(self):
            return "part int, preloaded string, pandas boolean"

        def reader(self, schema):
            return Reader()

    spark = stack.spark
    spark.dataSource.register(Source)
    began = time.monotonic()
    rows = spark.read.format("preload_probe").load().collect()
    assert sorted(row.part for row in rows) == [0, 1, 2, 3], time.monotonic() - began
    assert {(row.preloaded, row.pandas) for row in rows} == {(str(len(PRELOADED_MODULES)), True)}, rows
    assert PRELOADED_VAR == "STREAMCERT_PRELOADED_DAEMON"
