"""Rescaling a stateful query: a clean stop, then pyspark's offline state repartition (4.2+).

Spark pins the number of state partitions in the checkpoint (``spark.sql.shuffle.partitions`` in each
``offsets/N``); setting it again on restart is ignored. ``_streamingCheckpointManager.repartition``
rewrites the state of a *stopped* query into another number of partitions as a new batch that reads
no input. It refuses a checkpoint whose last batch did not commit (unless told to skip that batch,
which would lose its input for the state: never done here), so the query is first stopped between
batches (:func:`stop_cleanly`) and the repartition runs in its own short-lived Spark driver
(:func:`repartition_state`), since one process holds one Spark driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from streamcert.harness.run.checkpoint import checkpoint_state, state_partitions
from streamcert.harness.errors import StartupFailed

__all__ = ["stop_cleanly", "repartition_state"]


def stop_cleanly(driver, attempts: int = 4, batch_timeout: float = 180.0, stop_timeout: float = 60.0) -> int:
    """Stop ``driver`` (a :class:`~streamcert.harness.run.driver.DriverProcess`) with its last batch committed;
    return it.

    The driver's stop lets the batch in flight commit and plans no next one
    (:func:`~streamcert.harness.run.graceful_stop.stop_between_batches`); when it could not (the bound
    passed, a Spark without the internals it uses) and a batch is left planned, the driver is started again
    from the checkpoint (which replays and commits that batch) and stopped again.
    """
    for _attempt in range(attempts):
        # the Python driver alone is asked (stop_gracefully); a SIGTERM to the whole process group, as stop() sends,
        # reaches the JVM and the Python source runner too, and fails the query mid-plan instead
        driver.stop_gracefully(stop_timeout)
        driver.stop()
        state = driver.checkpoint()
        if state.pending is None and state.latest_commit is not None:
            return state.latest_commit
        pending = state.pending
        driver.start()
        driver.wait_for(lambda d, p=pending: (d.checkpoint().latest_commit or -1) >= (p or 0),
                        f"batch {pending} committed after a restart", timeout=batch_timeout)
    raise StartupFailed(f"The query at {driver.spec.checkpoint} could not be stopped between batches "
                        f"in {attempts} attempts.",
                        hint="Each stop interrupted a batch: look at the driver log for a batch that does not "
                             "finish within 30 s, or a trigger interval shorter than a batch on a Spark whose "
                             "progress lock streamcert cannot reach.")


def repartition_state(checkpoint: str | Path, partitions: int, *, spark_conf: dict[str, str] | None = None,
                      timeout: float = 300.0, log: Path | None = None) -> dict[str, Any]:
    """Repartition the stopped query's state at ``checkpoint`` into ``partitions``; return before/after."""
    checkpoint = Path(checkpoint)
    before = state_partitions(checkpoint)
    state = checkpoint_state(checkpoint)
    if state.pending is not None:
        raise StartupFailed(f"Batch {state.pending} of {checkpoint} is planned but not committed; "
                            "the state cannot be repartitioned.", hint="Stop the query with stop_cleanly first.")
    command = [sys.executable, "-m", "streamcert.harness.run.state", str(checkpoint), str(int(partitions)),
               json.dumps(spark_conf or {})]
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        completed = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                                   env={**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON",
                                                                                      sys.executable)})
    finally:
        if log:
            out.close()
    if completed.returncode != 0:
        raise StartupFailed(f"The offline state repartition of {checkpoint} to {partitions} failed "
                            f"(exit {completed.returncode}).", hint=f"See {log or 'its output'}.")
    return {"before": before, "after": state_partitions(checkpoint),
            "batch": checkpoint_state(checkpoint).latest_commit}


def _main(checkpoint: str, partitions: int, conf: dict[str, str]) -> int:
    from streamcert.harness.stack.spark import SparkConfig, spark_session

    spark = spark_session(SparkConfig(master="local[2]", conf=conf, app_name="streamcert-repartition"))
    try:
        spark._streamingCheckpointManager.repartition(checkpoint, partitions, True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])))
