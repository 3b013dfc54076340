"""MUTANT, BROKEN ON PURPOSE: a batch aggregator whose time flush waits for new input.

The bug: it registers no processing-time timer; a group's flush deadline is only looked at when new records of
that group arrive. Once the input stops, whatever a group holds stays buffered forever (seed 004's trap 2: state
that cannot emit until new input arrives). AGG-3 (no record waits longer than the limit) must catch it, as records
never emitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcert.connectors.aggregator import BatchAggregator, Flush
from streamcert.connectors.declarations import BatchAggregatorUnderTest

__all__ = ["CONNECTOR"]


class WaitingAggregator(BatchAggregator):
    def _finish(self, key_group: int, flush: Flush, next_batch: int, registered: int | None,
                now: int) -> Iterator[Any]:
        # BUG: no timer for the deadline; only the next input of this group can flush by time
        yield from super()._finish(key_group, Flush(flush.batches, flush.remaining, None), next_batch, None, now)


class WaitsForInput(BatchAggregatorUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-aggregator-waits-for-input"

    def processor(self) -> Any:
        return WaitingAggregator


CONNECTOR = WaitsForInput()
