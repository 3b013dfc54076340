"""MUTANT, BROKEN ON PURPOSE: a batch aggregator that cuts a size batch once a group holds more than the limit.

The bug: the size flush is ``while len(pending) > max_batch_size`` where ``>=`` was meant, and it cuts what it holds
at that point: every size-flushed batch holds one record more than ``max_batch_size`` (an off-by-one of the kind a
"flush when full" rule invites). Nothing is lost or reordered; AGG-2 (a size-flushed batch holds exactly the limit,
no batch more) must catch it, and only it of the requirements its runs judge.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.aggregator import BatchAggregator
from streamcert.connectors.declarations import BatchAggregatorUnderTest

__all__ = ["CONNECTOR"]


class OverLimitAggregator(BatchAggregator):
    def __init__(self, max_batch_size: int, max_wait_ms: int, key_groups: int) -> None:
        # BUG: full means more than the limit, and the batch cut then holds limit + 1 records
        super().__init__(max_batch_size + 1, max_wait_ms, key_groups)


class SizeOverLimit(BatchAggregatorUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-aggregator-size-over-limit"

    def processor(self) -> Any:
        return OverLimitAggregator


CONNECTOR = SizeOverLimit()
