"""What every observer shares: a thread that reads new output while the run goes on, and the decoded frame.

An observer runs in a thread of the harness's process. Each round its :meth:`Observer._read_new` returns the
rows that became visible since the last round (``key``, ``value`` and where each was found); the base class
stamps them with the time it saw them (``visible_at``), lets the connector unpack them into one row per
workload record (:meth:`~streamcert.spi.connector.Connector.unpack_output`), and decodes each record's id,
seq and produced-at time from the bytes (the workload's header), so nothing depends on the connector carrying
extra columns. Adding an output kind means one subclass in its own module of this package, with a ``kind``.

Delivery order is what a reader of the output could see: ``position`` numbers the rows in the order they became
visible, and rows that became visible at once (one commit of a table, found in one round) share a position. By
default a round's rows are in the order :meth:`Observer._read_new` returns them (a topic's offsets); an output
whose rows have no order within a round returns a :data:`VISIBILITY_ORDER` column instead (equal values: visible
at once; higher: later), and the order checkers take the rows of one position in any order.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from streamcert.harness.run.workload import decode_values
from streamcert.harness.stack.kafka_clients import TopicSettings

__all__ = ["OutputTarget", "Observer", "OUTPUT_COLUMNS", "VISIBILITY_ORDER", "ReadLag"]

#: Columns of every observer's frame, in this order, then the kind's own location columns.
OUTPUT_COLUMNS = ("id", "key", "seq", "produced_at", "visible_at", "position")
#: Optional column of :meth:`Observer._read_new`'s rows: their order within the round, equal values tied.
VISIBILITY_ORDER = "visibility_order"


#: Seconds between two samples of what the observer has left unread (bounded memory over a long run).
_LAG_SAMPLE_S = 0.5


@dataclass(frozen=True)
class ReadLag:
    """How far the observer's reading fell behind the output: records a reader could already see and it had not
    read, sampled after its rounds. Rows are stamped ``visible_at`` when read, so a lagging observer makes every
    latency longer than the connector's: a benchmark near the observer's read rate measures the observer."""

    samples: int
    max_unread: int
    mean_unread: float
    #: Share of the samples with more than one round's worth unread (:attr:`Observer.round_records`; any unread
    #: record for a kind whose rounds have no cap)
    behind_share: float

    def as_dict(self) -> dict[str, float | int]:
        return {"samples": self.samples, "max_unread": self.max_unread, "mean_unread": round(self.mean_unread, 1),
                "behind_share": round(self.behind_share, 4)}


@dataclass(frozen=True)
class OutputTarget:
    """Where a connector's output is: ``name`` is the topic, table or folder; the addresses lead through the proxy."""

    kind: str
    name: str
    bootstrap_servers: str = ""
    postgres_dsn: str | None = None
    #: The server's own address (Kafka bootstrap or PostgreSQL DSN, not the proxy's) for :meth:`Observer.visible_mark`:
    #: a fault timed by the output must see a commit at once, even while a toxic slows the link; None: the proxy's
    mark_address: str | None = None
    #: A Kafka output topic's durability settings (the scenario's ``topics``); None: the cluster's defaults
    topic_settings: TopicSettings | None = None


class Observer(ABC):
    """Reads back a connector's output while the run goes on; a context manager, ``stop()`` is idempotent."""

    #: The output kind this observer reads: what a sink declares as ``SinkConnector.output_kind``.
    kind: ClassVar[str] = ""
    #: Whether the output stores each record's key; where it does not, the runner takes keys from the ledger.
    carries_keys: ClassVar[bool] = True
    #: Pause between two rounds of :meth:`_read_new` that found nothing.
    idle_s: ClassVar[float] = 0.1
    #: Pause after a transient error (a fault took the server away) before the next round.
    retry_s: ClassVar[float] = 0.5
    #: Most records one round reads (a kind that caps its rounds); unread beyond it is more than a round behind.
    round_records: ClassVar[int] = 0

    def __init__(self, target: OutputTarget, unpack: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> None:
        self.target = target
        self.unpack = unpack or (lambda frame: frame)
        self.error: str | None = None
        #: Errors of :meth:`_read_new` that passed by themselves (a server killed or cut off by a fault).
        self.transient_errors = 0
        self._chunks: list[pd.DataFrame] = []
        #: Per chunk, each row's rank within the chunk (0, 1, ...; rows visible at once share one).
        self._ranks: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._unread: list[int] = []
        self._next_lag_sample = 0.0

    def __enter__(self) -> "Observer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name=f"observer-{self.target.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def count(self) -> int:
        with self._lock:
            return sum(len(chunk) for chunk in self._chunks)

    def visible_mark(self) -> Any:
        """A cheap value that changes as soon as the output shows something new: what a fault timed by the output
        polls every few milliseconds (:class:`~streamcert.harness.faults.driver.DriverKillOnOutputFault`).

        Called in the harness's fault thread. The default is :meth:`count` (as fast as the observer's rounds);
        a kind that can look faster (a folder's commit log) overrides it.
        """
        return self.count()

    def read_lag(self) -> ReadLag | None:
        """What the observer left unread as the run went on; None when its kind cannot tell (see
        :meth:`_unread_count`)."""
        with self._lock:
            unread = list(self._unread)
        if not unread:
            return None
        values = np.asarray(unread, dtype=np.int64)
        behind = values > self.round_records if self.round_records else values > 0
        return ReadLag(samples=len(values), max_unread=int(values.max()), mean_unread=float(values.mean()),
                       behind_share=float(behind.mean()))

    def frame(self) -> pd.DataFrame:
        """Records seen so far, in arrival order: :data:`OUTPUT_COLUMNS` plus the kind's location columns."""
        with self._lock:
            chunks, ranks = list(self._chunks), list(self._ranks)
        if not chunks:
            return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in (
                ("id", "int64"), ("key", "object"), ("seq", "int64"), ("produced_at", "float64"),
                ("visible_at", "float64"), ("position", "int64"))})
        frame = pd.concat(chunks, ignore_index=True)
        starts = np.cumsum([0] + [int(rank.max()) + 1 if rank.size else 0 for rank in ranks[:-1]])
        positions = [start + rank for start, rank in zip(starts, ranks, strict=True)]
        frame["position"] = np.concatenate(positions).astype(np.int64)
        return frame[[*OUTPUT_COLUMNS, *(c for c in frame.columns if c not in OUTPUT_COLUMNS)]]

    # -- for subclasses -------------------------------------------------------------------

    @classmethod
    def output_name(cls, stem: str, run_id: str, workdir: Path) -> str:
        """The name of a run's output of this kind (a topic, table or folder), unique per run; called in the
        harness before the query is built, and handed to the sink as ``QueryContext.output``."""
        return f"{stem}-out-{run_id}"

    def prepare(self, partitions: int) -> None:  # noqa: B027 - most outputs need nothing made beforehand
        """Make what must exist before the query starts (a Kafka topic with ``partitions``); called once, in the
        harness, before the observer starts. The default makes nothing (the sink creates its table or folder)."""

    def _open(self) -> None:  # noqa: B027 - an optional hook; most observers need no connection
        """Called once in the observer's thread before the first round (connect, subscribe)."""

    def _close(self) -> None:  # noqa: B027 - an optional hook, paired with _open
        """Called once in the observer's thread after the last round, also after an error."""

    @abstractmethod
    def _read_new(self) -> pd.DataFrame | None:
        """Rows that became visible since the last call: ``key``, ``value`` and location columns; None if none.
        In the order they became visible, or with a :data:`VISIBILITY_ORDER` column saying it.

        Called in the observer's thread, over and over until the observer stops; may block briefly.
        """

    def _unread_count(self) -> int | None:
        """Records a reader could already see that this observer has not read, as its client knows without asking
        the server; called in the observer's thread after a round, at most every :data:`_LAG_SAMPLE_S`. None
        (the default): the kind cannot tell."""
        return None

    def _transient(self, error: Exception) -> bool:
        """Whether ``error`` from :meth:`_read_new` passes by itself (the server restarting): then it is counted
        in ``transient_errors`` and the next round runs after ``retry_s``. Default: no error is."""
        return False

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._open()
            while not self._stopping.is_set():
                try:
                    raw = self._read_new()
                except Exception as exc:
                    if not self._transient(exc):
                        raise
                    self.transient_errors += 1
                    self._stopping.wait(self.retry_s)
                    continue
                seen_at = time.time()
                self._sample_unread()
                if raw is None or raw.empty:
                    self._stopping.wait(self.idle_s)
                    continue
                self._append(raw, seen_at)
        except Exception as exc:  # the run reports it; a dead observer must not look like an empty output
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                self._close()
            except Exception:  # closing a client of a server that is gone: nothing left to save
                pass

    def _sample_unread(self) -> None:
        now = time.monotonic()
        if now < self._next_lag_sample:
            return
        self._next_lag_sample = now + _LAG_SAMPLE_S
        unread = self._unread_count()
        if unread is not None:
            with self._lock:
                self._unread.append(int(unread))

    def _append(self, raw: pd.DataFrame, seen_at: float) -> None:
        records = self.unpack(raw).reset_index(drop=True)
        rank = _visibility_ranks(records)
        decoded = decode_values(records["value"].tolist())
        keys = records["key"] if "key" in records.columns else [None] * len(records)
        decoded["key"] = [_text(key) for key in keys]
        decoded["visible_at"] = seen_at
        extra = [c for c in records.columns
                 if c not in ("key", "value", VISIBILITY_ORDER) and c not in decoded.columns]
        for column in extra:
            decoded[column] = records[column].to_numpy()
        columns = ["id", "key", "seq", "produced_at", "visible_at", *extra]
        with self._lock:
            self._chunks.append(decoded[columns])
            self._ranks.append(rank)


def _visibility_ranks(records: pd.DataFrame) -> np.ndarray:
    """Each row's rank within its round: row order, or the dense rank of its :data:`VISIBILITY_ORDER`."""
    if VISIBILITY_ORDER not in records.columns:
        return np.arange(len(records), dtype=np.int64)
    return np.unique(records[VISIBILITY_ORDER].to_numpy(), return_inverse=True)[1].reshape(-1).astype(np.int64)


def _text(key: Any) -> Any:
    """A key as text: Kafka and PostgreSQL hand over bytes, an unpacked aggregator output may hold text."""
    if isinstance(key, memoryview):
        key = key.tobytes()
    if isinstance(key, (bytes, bytearray)):
        return bytes(key).decode(errors="replace")
    return key
