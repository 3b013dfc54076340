"""A real Spark standalone cluster (master + workers from pyspark's own launcher): start, run a job, lose a worker,
get it back, stop with nothing left."""

from __future__ import annotations

import time

import psutil
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.spark_standalone import LocalSparkCluster, spark_home


def test_pyspark_ships_the_launcher():
    assert (spark_home() / "bin" / "spark-class").exists()


@pytest.mark.parametrize("workers, cores, memory_mb, said", [
    (0, 1, 1024, "at least one worker"),
    (2, 0, 1024, "at least one worker of one core"),
    (2, 1, 256, "below 450 MiB"),
])
def test_a_cluster_spark_cannot_run_is_refused_before_anything_starts(tmp_path, workers, cores, memory_mb, said):
    with pytest.raises(ConfigurationError, match=said):
        LocalSparkCluster(tmp_path, workers=workers, cores=cores, memory_mb=memory_mb)


def test_stop_before_start_and_twice_is_safe(tmp_path):
    cluster = LocalSparkCluster(tmp_path, workers=1)
    cluster.stop()
    cluster.stop()


@pytest.mark.integration
def test_a_killed_worker_is_seen_dead_and_comes_back_and_stop_leaves_nothing(tmp_path):
    token = "standalone-test-token"
    with LocalSparkCluster(tmp_path, workers=2, memory_mb=512, run_token=token) as cluster:
        assert len(cluster.wait_for_workers(2)) == 2
        assert cluster.url.startswith("spark://127.0.0.1:")
        pids = cluster.server_pids()
        assert all(pid is not None for pid in pids.values())
        cluster.kill_worker(1)
        assert cluster.workers[1].pid is None
        deadline = time.monotonic() + 30
        while len(cluster.alive_workers()) != 1:  # the master sees the loss (the worker's connection drops)
            assert time.monotonic() < deadline, cluster.master.status()
            time.sleep(0.5)
        cluster.restart_worker(1)
        assert len(cluster.wait_for_workers(2)) == 2
    leftovers = [proc for proc in psutil.process_iter(["environ"])
                 if (proc.info.get("environ") or {}).get("STREAMCERT_RUN_TOKEN") == token]
    assert leftovers == []
