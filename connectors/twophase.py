"""The generic two-phase-commit protocol of the reference sinks (seed 002/003, SPEC §3.2).

One coordinator (Spark's driver) and many participants (task transactions in an
external system):

- **pre-commit**, in ``write()`` on executors: open a participant transaction whose
  id encodes (sink id, batch id, partition, attempt), write, *prepare*, return the id;
- **commit**, in ``commit(messages, batchId)`` on the driver: first record the decision
  for the batch durably (the decision log), then commit every prepared transaction it
  names. Idempotent: Spark may call it again for the same batch after a crash, and the
  recorded decision, not the new messages, says what to commit. Prepared transactions of
  the batch that the decision does not name are orphans of failed or zombie attempts:
  rolled back, never committed;
- **abort**: roll back the attempt's prepared transactions (never a decided batch's);
- **recover**, after a restart: prepared transactions of earlier batches whose decision
  names them are committed, all others rolled back (done at each commit, for batches before
  it: the first commit after a restart is where recovery happens);
- a replayed batch whose decision is recorded writes nothing.

Participants and the decision log are small ABCs so other systems can plug in.
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from streamcert.spi.errors import ConfigurationError
from streamcert.spi.fault_points import reached

__all__ = ["TxnId", "Participant", "DecisionLog", "Coordinator", "in_commit_order", "validate_sink_id"]

_SINK_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PREFIX = "sc2pc"


def validate_sink_id(sink_id: str) -> str:
    if not _SINK_ID.fullmatch(sink_id or ""):
        raise ConfigurationError(f"sinkId {sink_id!r} is not valid.",
                                 hint="Use 1-64 letters, digits, '_' or '-'; keep it stable across restarts.")
    return sink_id


@dataclass(frozen=True)
class TxnId:
    """A participant transaction's id: ``sc2pc|sink|batch|partition|attempt|nonce``."""

    sink_id: str
    batch_id: int
    partition: int
    attempt: int
    nonce: str

    @classmethod
    def new(cls, sink_id: str, batch_id: int, partition: int, attempt: int) -> "TxnId":
        return cls(sink_id, batch_id, partition, attempt, uuid.uuid4().hex[:12])

    def __str__(self) -> str:
        return f"{_PREFIX}|{self.sink_id}|{self.batch_id}|{self.partition}|{self.attempt}|{self.nonce}"

    @classmethod
    def parse(cls, text: str) -> "TxnId | None":
        parts = text.split("|")
        if len(parts) != 6 or parts[0] != _PREFIX:
            return None
        try:
            return cls(parts[1], int(parts[2]), int(parts[3]), int(parts[4]), parts[5])
        except ValueError:
            return None

    @staticmethod
    def prefix(sink_id: str) -> str:
        return f"{_PREFIX}|{sink_id}|"


class Participant(ABC):
    """An external system holding prepared transactions. Called on the driver (commit/rollback/prepared)."""

    @abstractmethod
    def prepared(self, sink_id: str) -> list[str]:
        """Ids of this sink's transactions that are prepared and not yet resolved."""

    @abstractmethod
    def commit_prepared(self, txn_id: str) -> None:
        """Commit a prepared transaction; no error if it is no longer prepared."""

    @abstractmethod
    def rollback_prepared(self, txn_id: str) -> None:
        """Roll back a prepared transaction; no error if it is no longer prepared."""


class DecisionLog(ABC):
    """Durable ``(sink id, batch id) -> transaction ids``, written once."""

    @abstractmethod
    def record(self, sink_id: str, batch_id: int, txn_ids: list[str]) -> list[str]:
        """Record the decision unless one exists; return the decision that stands."""

    @abstractmethod
    def decision(self, sink_id: str, batch_id: int) -> list[str] | None:
        """The recorded decision, or None."""


def in_commit_order(txn_ids: Iterable[str]) -> list[str]:
    """Transaction ids by batch, then partition (then attempt): a reader who watches the commits one by one sees
    a batch after the ones before it, and a partition's records (a key's) in the order the tasks split them.
    Ids that are not this protocol's come last, as text."""
    def order(text: str) -> tuple:
        txn = TxnId.parse(text)
        return (0, txn.batch_id, txn.partition, txn.attempt, text) if txn else (1, 0, 0, 0, text)

    return sorted(txn_ids, key=order)


class Coordinator:
    """Runs on the driver: the commit, abort and recovery rules above, for one sink."""

    def __init__(self, sink_id: str, participant: Participant, log: DecisionLog, fault_point_prefix: str) -> None:
        self.sink_id = validate_sink_id(sink_id)
        self.participant = participant
        self.log = log
        self.fault_point_prefix = fault_point_prefix

    def decided(self, batch_id: int) -> bool:
        return self.log.decision(self.sink_id, batch_id) is not None

    def commit(self, batch_id: int, txn_ids: Iterable[str]) -> list[str]:
        """Resolve earlier batches (recovery), record (or reuse) this batch's decision, commit what it names,
        roll back orphans up to this batch."""
        self.recover(before_batch=batch_id)
        reached(f"{self.fault_point_prefix}.before-decision")
        decision = self.log.record(self.sink_id, batch_id, in_commit_order(set(txn_ids)))
        reached(f"{self.fault_point_prefix}.after-decision")
        for txn in in_commit_order(decision):
            self.participant.commit_prepared(txn)
        self._roll_back_orphans(up_to_batch=batch_id)
        return decision

    def abort(self, batch_id: int, txn_ids: Iterable[str]) -> None:
        """Roll back an attempt's prepared transactions; a decided batch is committed instead, never undone."""
        if self.decided(batch_id):
            self.commit(batch_id, [])
            return
        for txn in txn_ids:
            self.participant.rollback_prepared(txn)

    def recover(self, before_batch: int | None = None) -> dict[str, list[str]]:
        """Commit prepared transactions their batch's decision names, roll back the rest.

        Runs at the start of every ``commit(N)`` for batches before N. It must not run for batch N or later
        when it cannot know whether they are in flight: Spark builds the writer object again in each Python
        worker it uses, so "when the writer is created" is not "when the query starts".
        """
        committed, rolled_back = [], []
        for text in in_commit_order(self.participant.prepared(self.sink_id)):
            txn = TxnId.parse(text)
            if before_batch is not None and (txn is None or txn.batch_id >= before_batch):
                continue
            decision = self.log.decision(self.sink_id, txn.batch_id) if txn else None
            if decision is not None and text in decision:
                self.participant.commit_prepared(text)
                committed.append(text)
            else:
                self.participant.rollback_prepared(text)
                rolled_back.append(text)
        return {"committed": committed, "rolled_back": rolled_back}

    def _roll_back_orphans(self, up_to_batch: int) -> None:
        for text in self.participant.prepared(self.sink_id):
            txn = TxnId.parse(text)
            if txn is None or txn.batch_id > up_to_batch:
                continue  # a later batch may still be in flight
            decision = self.log.decision(self.sink_id, txn.batch_id)
            if decision is None or text not in decision:
                self.participant.rollback_prepared(text)
