"""MUTANT, BROKEN ON PURPOSE: a batch aggregator whose key groups are "virtual keys" tied to the parallelism.

The bug (seed 004, method 1): a record's group is ``hash(key) % parallelism`` (one buffer per parallel instance,
the virtual key), so the number of groups follows the query's parallelism and nothing pins it to the checkpoint.
After a rescale (the state repartitioned, the query restarted with another parallelism) keys map to other groups,
and their new records are flushed while older records of the same keys still wait in the old group's buffer.
AGG-5 (per-key order across a rescale) must catch it, as keys out of order.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from streamcert.connectors.aggregator import BatchAggregator
from streamcert.connectors.declarations import BatchAggregatorUnderTest

__all__ = ["CONNECTOR"]


class VirtualKeyAggregator(BatchAggregator):
    def _meta(self, key_group: int) -> tuple[int, int | None]:
        if not self.meta.exists():
            return 0, None
        next_batch, deadline, _key_groups = self.meta.get()  # BUG: a changed group count is not refused
        return int(next_batch), (int(deadline) if deadline is not None and deadline >= 0 else None)


class VirtualKeys(BatchAggregatorUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-aggregator-virtual-keys"

    def processor(self) -> Any:
        return VirtualKeyAggregator

    def transform(self, frame: Any, context: Any) -> Any:
        # BUG: one group per parallel instance of *this* run, not a number fixed for the checkpoint's life
        return super().transform(frame, dataclasses.replace(context, options={**context.options,
                                                                              "key_groups": context.parallelism}))


CONNECTOR = VirtualKeys()
