"""MUTANT, BROKEN ON PURPOSE: a batch aggregator that emits a flushed batch one micro-batch late, from scratch space.

The bug (seed 004, method 3: emitting buffered records in ``snapshotState``, behind the barrier): when a group
flushes, the aggregator clears the group's buffer in the state *of this micro-batch* but hands the batch to the
sink in the *next* one, keeping it meanwhile in the executor's scratch space (Spark's per-application files folder,
which any Python worker of the executor can read). The checkpoint then says the records left the aggregator while
they are in neither the state nor the sink. Without faults every record arrives, a little later (AGG-1, AGG-2 and
AGG-3 hold); a driver killed after a flush's micro-batch committed and before the next one did restarts with a new
scratch folder, and those records are gone. AGG-4 must catch it, as lost records.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd

from streamcert.connectors.aggregator import BatchAggregator, Flush
from streamcert.connectors.declarations import BatchAggregatorUnderTest

__all__ = ["CONNECTOR"]


def _scratch(key_group: int) -> str:
    from pyspark import SparkFiles

    folder = os.path.join(SparkFiles.getRootDirectory(), "deferred-batches")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"group-{key_group}.pickle")


class LateAggregator(BatchAggregator):
    def _finish(self, key_group: int, flush: Flush, next_batch: int, registered: int | None,
                now: int) -> Iterator[Any]:
        path = _scratch(key_group)
        if os.path.exists(path):  # what the previous micro-batch flushed
            with open(path, "rb") as handle:
                yield pickle.load(handle)
            os.remove(path)
        frames = list(super()._finish(key_group, flush, next_batch, registered, now))
        if frames:
            # BUG: the buffer is already cleared in this micro-batch's state; the batch waits for the next one
            with open(path, "wb") as handle:
                pickle.dump(pd.concat(frames, ignore_index=True), handle)
            self.handle.registerTimer(now + 1)  # so the next micro-batch calls this group again


class EmitsAfterBarrier(BatchAggregatorUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-aggregator-emits-after-barrier"

    def processor(self) -> Any:
        return LateAggregator


CONNECTOR = EmitsAfterBarrier()
