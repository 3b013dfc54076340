"""MUTANT, BROKEN ON PURPOSE: a batch aggregator that puts a micro-batch's new records before those it buffered.

The bug: when a key group's new records arrive, the flush plan is made from ``incoming + buffered`` where
``buffered + incoming`` was meant (two lists of one type, the order of the arguments swapped). A batch cut from both
holds a key's newer records before its older ones, and the deadline is taken from the newest record. Nothing is
lost or duplicated: AGG-1 (per-key order inside and across batches) must catch it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcert.connectors.aggregator import TICK_GROUP, BatchAggregator, _ordered_items, plan_flush
from streamcert.connectors.declarations import BatchAggregatorUnderTest

__all__ = ["CONNECTOR"]


class NewFirstAggregator(BatchAggregator):
    def handleInputRows(self, key, rows, timerValues) -> Iterator[Any]:
        now = timerValues.getCurrentProcessingTimeInMs()
        group = int(key[0])
        if group == TICK_GROUP:
            for _frame in rows:
                pass
            return
        next_batch, deadline = self._meta(group)
        # BUG: the new records first, then what the group had buffered
        flush = plan_flush(_ordered_items(rows, now), list(self.buffer.get()), now, self.max_batch_size,
                           self.max_wait_ms)
        yield from self._finish(group, flush, next_batch, deadline, now)


class NewBeforeBuffered(BatchAggregatorUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-aggregator-new-before-buffered"

    def processor(self) -> Any:
        return NewFirstAggregator


CONNECTOR = NewBeforeBuffered()
