"""A reference connector's worker freezes what it imported once, so pyspark's collection after each task is cheap.

Each case runs in a fresh interpreter: a freeze is for the life of a process, and the test process must not keep one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent("""
    import gc, json, os, time
    import pyarrow, pandas, confluent_kafka, psycopg
    import streamcert.connectors.kafka_sink, streamcert.connectors.kafka_source, streamcert.connectors.pg_sink
    from streamcert.connectors.worker_gc import freeze_imports, frozen_in_this_process

    def collect_ms():
        begin = time.perf_counter()
        gc.collect()
        return (time.perf_counter() - begin) * 1000

    report = {"tracked_before": len(gc.get_objects()), "collect_before_ms": collect_ms(),
              "frozen_before": frozen_in_this_process()}
    freeze_imports()
    frozen = gc.get_freeze_count()
    freeze_imports()  # a second call in the same process freezes nothing more
    report.update(tracked_after=len(gc.get_objects()), collect_after_ms=collect_ms(), frozen=frozen,
                  frozen_again=gc.get_freeze_count(), frozen_after=frozen_in_this_process())
    pipe_read, pipe_write = os.pipe()
    child = os.fork()
    if child == 0:  # pyspark's daemon forks its workers: a child freezes what it gained since, on its own call
        garbage = [[index] for index in range(5000)]
        seen = {"child_frozen_before": frozen_in_this_process()}
        freeze_imports()
        seen["child_frozen_after"] = frozen_in_this_process()
        seen["child_frozen_count"] = gc.get_freeze_count()
        os.write(pipe_write, json.dumps(seen).encode())
        os._exit(0)
    os.waitpid(child, 0)
    report.update(json.loads(os.read(pipe_read, 65536)))
    print(json.dumps(report))
""")


@pytest.fixture(scope="module")
def report() -> dict:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_imports_leave_the_collected_generations_once_frozen(report):
    assert not report["frozen_before"] and report["frozen_after"]
    assert report["tracked_before"] > 20_000  # pyarrow, pandas and the clients: what pyspark's collection walks
    assert report["frozen"] >= report["tracked_before"] * 0.9
    assert report["tracked_after"] < report["tracked_before"] / 10


def test_a_second_call_in_the_same_process_freezes_nothing_more(report):
    assert report["frozen_again"] == report["frozen"]


def test_a_forked_child_freezes_what_it_gained_since_on_its_own_first_call(report):
    assert not report["child_frozen_before"] and report["child_frozen_after"]
    assert report["child_frozen_count"] >= report["frozen"] + 5000


@pytest.mark.parametrize("module, methods", [
    ("streamcert.connectors.kafka_sink", ("KafkaTwoPhaseSink.streamWriter", "KafkaStreamWriter.write",
                                          "KafkaStreamWriter.commit")),
    ("streamcert.connectors.pg_sink", ("PostgresTwoPhaseSink.streamWriter", "PostgresStreamWriter.write",
                                       "PostgresStreamWriter.commit", "PostgresStreamWriter.abort")),
    ("streamcert.connectors.kafka_source", ("KafkaStreamReader.read",)),
    ("streamcert.connectors.aggregator", ("BatchAggregator.init",)),
])
def test_every_method_spark_runs_in_a_reused_worker_freezes_first(module, methods):
    import importlib
    import inspect

    loaded = importlib.import_module(module)
    for dotted in methods:
        owner, name = dotted.split(".")
        source = inspect.getsource(getattr(getattr(loaded, owner), name))
        body = source.split('"""')[-1] if source.count('"""') >= 2 else source
        assert "freeze_imports()" in body, f"{module}.{dotted} does not freeze the worker's imports"
