"""Rescale helpers: reading the pinned state partitions, stopping between batches, and refusing to repartition an
unfinished batch."""

from __future__ import annotations

import json

import pytest

from streamcert.harness.run.checkpoint import batch_conf, state_partitions
from streamcert.harness.errors import StartupFailed
from streamcert.harness.run.checkpoint import checkpoint_state
from streamcert.harness.run.state import repartition_state, stop_cleanly


def _batch(checkpoint, batch: int, partitions: int, committed: bool) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": str(partitions)}}
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{{\"t\": {{\"0\": 5}}}}\n")
    if committed:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_state_partitions_come_from_the_latest_batch(tmp_path):
    assert state_partitions(tmp_path) is None
    _batch(tmp_path, 0, 4, committed=True)
    _batch(tmp_path, 1, 2, committed=True)
    assert state_partitions(tmp_path) == 2 and batch_conf(tmp_path, 0)["spark.sql.shuffle.partitions"] == "4"


def test_a_checkpoint_with_a_planned_uncommitted_batch_is_not_repartitioned(tmp_path):
    _batch(tmp_path, 0, 4, committed=True)
    _batch(tmp_path, 1, 4, committed=False)
    with pytest.raises(StartupFailed, match="Batch 1 .* not committed"):
        repartition_state(tmp_path, 2)


class _Driver:
    """A driver stand-in over a real checkpoint folder: what it was asked, in order."""

    def __init__(self, checkpoint) -> None:
        self.checkpoint_path, self.calls = checkpoint, []

    def checkpoint(self):
        return checkpoint_state(self.checkpoint_path)

    def stop_gracefully(self, timeout: float) -> dict:
        self.calls.append("stop_gracefully")
        return {"how": "between batches"}

    def stop(self) -> None:
        self.calls.append("stop")


def test_a_clean_stop_asks_the_python_driver_first_and_never_signals_the_whole_group_first(tmp_path):
    _batch(tmp_path, 0, 4, committed=True)
    driver = _Driver(tmp_path)
    assert stop_cleanly(driver) == 0
    # stop() alone sends SIGTERM to the JVM and the source runner too: the query then fails mid-plan
    assert driver.calls == ["stop_gracefully", "stop"]
