"""When the query read each record: when Spark planned the first batch whose offset range holds it.

A batch aggregator can flush a record only after its query read it; while the query works through a backlog (after
a restart, under load) a record waits in the input, not in the aggregator. Its flush rule therefore measures a
record's wait from its arrival (:class:`~streamcert.harness.verify.checkers.AggregatorBatchChecker` reads a ledger
column ``arrived_at``), which the checkpoint gives without the connector's help: ``offsets/N`` holds batch N's end
offsets per source (a Kafka source's are ``{topic: {partition: offset}}``) and when it was planned; batch N reads
from batch N-1's end offsets to its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from streamcert.harness.run.checkpoint import batch_ids, read_batch

__all__ = ["arrival_times"]


def arrival_times(ledger: pd.DataFrame, checkpoint: Path, topic: str) -> np.ndarray:
    """Per ledger row (``partition``, ``offset``), the epoch second its batch was planned; NaN where no batch in the
    checkpoint's offsets log read it (never read, purged from the log, or a source whose offsets say otherwise)."""
    arrived = np.full(len(ledger), np.nan)
    if not {"partition", "offset"} <= set(ledger.columns):
        return arrived
    partitions = pd.to_numeric(ledger["partition"], errors="coerce").to_numpy(dtype=np.float64)
    offsets = pd.to_numeric(ledger["offset"], errors="coerce").to_numpy(dtype=np.float64)
    for planned, ranges in _batch_ranges(checkpoint, topic):
        for partition, (low, high) in ranges.items():
            inside = (partitions == partition) & (offsets >= low) & (offsets < high)
            arrived = np.where(inside & ~(arrived <= planned), planned, arrived)
    return arrived


def _batch_ranges(checkpoint: Path, topic: str) -> list[tuple[float, dict[int, tuple[float, float]]]]:
    """(planned at, {partition: (first offset, end offset)}) of each batch in the offsets log that read ``topic``."""
    batches, previous, previous_id = [], {}, -1
    for batch_id in batch_ids(checkpoint, "offsets"):
        try:
            metadata, offsets = read_batch(checkpoint, batch_id)
        except (OSError, ValueError, IndexError):  # a log file cut by a kill: the batch is planned again
            continue
        ends = [_topic_offsets(source, topic) for source in offsets]
        millis = metadata.get("batchTimestampMs")
        planned = millis / 1000 if isinstance(millis, (int, float)) else None
        end = next((found for found in ends if found), None)
        if end is None or planned is None:
            continue
        if batch_id == previous_id + 1:  # where a batch starts is known only from the one before it
            ranges = {partition: (previous.get(partition, 0.0), high) for partition, high in end.items()
                      if high > previous.get(partition, 0.0)}
            if ranges:
                batches.append((planned, ranges))
        previous, previous_id = end, batch_id
    return batches


def _topic_offsets(offsets: Any, topic: str) -> dict[int, float] | None:
    """``{partition: offset}`` of ``topic`` in one source's offset, or None when it does not name the topic."""
    if not isinstance(offsets, dict) or not isinstance(offsets.get(topic), dict):
        return None
    try:
        return {int(partition): float(offset) for partition, offset in offsets[topic].items()}
    except (TypeError, ValueError):
        return None
