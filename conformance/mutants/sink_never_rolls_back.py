"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL 2PC sink that never rolls back a failed attempt's transactions.

The bug: the driver commits what its decision names and leaves every other prepared transaction alone (no orphan
rollback, no recovery of earlier batches): a task attempt that failed after PREPARE leaves its transaction
prepared forever, holding its rows' locks and the server's prepared-transaction slots. Nothing wrong is visible,
so only SNK-2's look at the participant (``leftovers``) can catch it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink
from streamcert.connectors.twophase import Coordinator

__all__ = ["CONNECTOR"]


class _Coordinator(Coordinator):
    def recover(self, before_batch: int | None = None) -> dict[str, list[str]]:
        return {"committed": [], "rolled_back": []}  # BUG: earlier batches' leftovers stay prepared

    def _roll_back_orphans(self, up_to_batch: int) -> None:
        pass  # BUG: orphans of failed attempts stay prepared

    def abort(self, batch_id: int, txn_ids: Iterable[str]) -> None:
        pass  # BUG: nor are an aborted attempt's


class _Writer(PostgresStreamWriter):
    coordinator_class = _Coordinator


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-never-rolls-back"


class NeverRollsBack(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-never-rolls-back"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = NeverRollsBack()
