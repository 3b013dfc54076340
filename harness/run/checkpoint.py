"""Reading a Structured Streaming checkpoint from outside the query.

Spark writes ``offsets/N`` (the planned end offsets of batch N) before it runs
the batch and ``commits/N`` after the sink committed it. Between the two is
the window where exactly-once is decided: a driver killed there must replay
batch N with the same offsets. These helpers let a fault (or a test) see where
a query is, for any connector.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CheckpointState", "batch_ids", "read_batch", "read_offsets", "batch_conf", "state_partitions",
           "checkpoint_state"]


def batch_ids(checkpoint: Path, log: str) -> list[int]:
    """Batch ids present in ``checkpoint/<log>`` (``offsets`` or ``commits``), ascending."""
    folder = Path(checkpoint) / log
    if not folder.is_dir():
        return []
    return sorted(int(entry.name) for entry in folder.iterdir() if entry.name.isdigit())


def read_batch(checkpoint: Path, batch_id: int) -> tuple[dict[str, Any], list[Any]]:
    """``offsets/<batch_id>`` read once: the batch's metadata (``batchTimestampMs``, ``conf``, ...) and its source
    offsets, one parsed JSON value per source (None if absent)."""
    lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
    # line 0: version marker, line 1: batch metadata, then one line per source
    offsets = [None if line.strip() in ("", "-") else json.loads(line) for line in lines[2:]]
    return json.loads(lines[1]), offsets


def read_offsets(checkpoint: Path, batch_id: int) -> list[Any]:
    """The source offsets recorded for ``batch_id``: one parsed JSON value per source (None if absent)."""
    return read_batch(checkpoint, batch_id)[1]


def batch_conf(checkpoint: Path, batch_id: int) -> dict[str, str]:
    """The session settings Spark pinned in ``offsets/<batch_id>`` (shuffle partitions, state store, ...)."""
    return dict(read_batch(checkpoint, batch_id)[0].get("conf", {}))


def state_partitions(checkpoint: Path) -> int | None:
    """The number of state partitions of the latest batch (Spark keeps it for the life of the checkpoint)."""
    batches = batch_ids(checkpoint, "offsets")
    if not batches:
        return None
    value = batch_conf(checkpoint, batches[-1]).get("spark.sql.shuffle.partitions")
    return int(value) if value is not None else None


@dataclass(frozen=True)
class CheckpointState:
    latest_offsets: int | None
    latest_commit: int | None

    @property
    def pending(self) -> int | None:
        """The batch whose offsets are written and whose commit is not: the exactly-once window."""
        if self.latest_offsets is None:
            return None
        if self.latest_commit is None or self.latest_offsets > self.latest_commit:
            return self.latest_offsets
        return None


def checkpoint_state(checkpoint: Path) -> CheckpointState:
    offsets = batch_ids(checkpoint, "offsets")
    commits = batch_ids(checkpoint, "commits")
    return CheckpointState(offsets[-1] if offsets else None, commits[-1] if commits else None)
