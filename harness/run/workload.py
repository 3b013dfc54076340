"""The workload: seeded keyed records, a fast bulk loader, and the ledger of what the broker acknowledged.

A record is ``(key, seq, id, produced_at, payload)``: ``id`` is unique in the
run, ``seq`` counts the records of one key from 0 (committed records only),
``produced_at`` is when ``produce()`` was called. The record's value starts
with a fixed-width ASCII header carrying ``id``, ``seq`` and ``produced_at``,
so any connector's output can be decoded back (:func:`decode_values`) without
trusting the connector to carry extra columns; the rest is padding up to
``record_bytes``.

With ``event_time_step_ms`` (or ``event_time_lead_ms``) each record carries an event time as its Kafka timestamp:
a partition's records are ``event_time_step_ms`` apart in event time, and the last partition's lead the others' by
``event_time_lead_ms`` (a skewed backlog, seed 001). Event times are fixed when the load starts, ending a minute
before it (a broker refuses timestamps far in the future), and kept in the ledger's ``event_time`` column (ms).

With ``aborted_fraction > 0`` records are written in transactions of
``transaction_records`` and that share of transactions is aborted: those
records reach the log but must never appear downstream. Their ``seq`` is -1.

The :class:`Ledger` is the ground truth the checkers read: one row per record
whose fate the broker told us (``status`` ``acked`` or ``aborted``), plus
``indeterminate`` ones (the produce timed out: maybe written, maybe not). The
checkers get all three (:meth:`Ledger.for_checkers`), as Jepsen's set checker
does: an acknowledged record is owed (lost if never delivered); an
indeterminate one is not owed, and if delivered it is *recovered* (once) or
duplicated (twice or more), never unexpected; an aborted one must never appear.

With ``added_partitions`` the topic is created with ``partitions`` and gains that many more while the query runs (an
``add_partitions`` fault, SRC-5): the keys of the added partitions are the workload's tail, and the load writes
them only once the topic has those partitions (it waits at a transaction boundary, :func:`load_topic`'s ``grown``).

Both producers of the workload (:func:`load_topic` here and the locust users of
:mod:`~streamcert.harness.run.locust_kafka`) queue records with
:func:`produce_record`, note what the producer reports in a :class:`Deliveries`
and turn it into the ledger with :meth:`Ledger.from_deliveries`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.waiting import retry

__all__ = [
    "HEADER_BYTES",
    "WorkloadSpec",
    "plan",
    "encode_value",
    "decode_values",
    "record_id_of",
    "produce_record",
    "Deliveries",
    "Ledger",
    "load_topic",
    "event_times",
]

_MAGIC = b"SC1"
# magic(3) + id(16) + seq+1(12) + produced_at in microseconds(16) + '|'(1)
HEADER_BYTES = 48
_SKEWS = ("uniform", "zipf")
# A ledger record's status (see Ledger); anything else reaches the checkers as missing, which they refuse.
_STATUSES = ("acked", "indeterminate", "aborted")
# How long load_topic lets a full producer queue drain beyond the message timeout (by then every queued record
# has its delivery report, so the queue is empty): a queue still full then is a broken producer, not a slow one.
_FULL_QUEUE_GRACE_S = 30.0
# How long load_topic serves delivery reports between two tries when the producer's queue is full.
_FULL_QUEUE_POLL_S = 0.01


@dataclass(frozen=True)
class WorkloadSpec:
    """What to produce. Same spec and seed, same records (ids, keys, seqs, partitions, aborted set)."""

    total: int = 10_000
    keys: int = 100
    partitions: int = 4
    skew: str = "uniform"
    zipf_exponent: float = 1.2
    record_bytes: int = 100
    rate: float | None = None
    aborted_fraction: float = 0.0
    transaction_records: int = 100
    seed: int = 0
    #: event time between two records of a partition (ms); 0 with no lead: records carry their produce time
    event_time_step_ms: int = 0
    #: how far the last partition's event times lead the others' (ms)
    event_time_lead_ms: int = 0
    #: partitions the topic gains while the query runs: their keys' records are the workload's tail, written once
    #: the topic has them
    added_partitions: int = 0

    @property
    def final_partitions(self) -> int:
        """The topic's partitions once every added one exists."""
        return self.partitions + self.added_partitions

    @property
    def has_event_times(self) -> bool:
        return bool(self.event_time_step_ms or self.event_time_lead_ms)

    def validate(self) -> "WorkloadSpec":
        def bad(option: str, value: Any, allowed: str) -> ConfigurationError:
            return ConfigurationError(f"Workload option {option}={value!r} is not valid.", hint=f"Use {allowed}.")

        if self.total < 1:
            raise bad("total", self.total, "a positive number of records")
        if self.keys < 1:
            raise bad("keys", self.keys, "a positive number of keys")
        if self.partitions < 1:
            raise bad("partitions", self.partitions, "a positive number of partitions")
        if self.skew not in _SKEWS:
            raise bad("skew", self.skew, " or ".join(_SKEWS))
        if self.zipf_exponent <= 0:
            raise bad("zipf_exponent", self.zipf_exponent, "a positive exponent (1.2 is typical)")
        if self.record_bytes < HEADER_BYTES:
            raise bad("record_bytes", self.record_bytes, f"at least {HEADER_BYTES} (the header's size)")
        if self.rate is not None and self.rate <= 0:
            raise bad("rate", self.rate, "a positive number of records per second, or None for as fast as possible")
        if not 0 <= self.aborted_fraction < 1:
            raise bad("aborted_fraction", self.aborted_fraction, "a fraction in [0, 1)")
        if self.transaction_records < 1:
            raise bad("transaction_records", self.transaction_records, "a positive number of records")
        if self.added_partitions < 0:
            raise bad("added_partitions", self.added_partitions, "a number of partitions >= 0")
        if self.added_partitions and self.has_event_times:
            raise bad("added_partitions", self.added_partitions, "0 with event times (the lead partition is fixed)")
        if self.event_time_step_ms < 0 or self.event_time_lead_ms < 0:
            raise bad("event_time_step_ms/event_time_lead_ms", (self.event_time_step_ms, self.event_time_lead_ms),
                      "milliseconds >= 0")
        return self

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(spec: WorkloadSpec) -> pd.DataFrame:
    """Every record of the workload, before producing: id, key, key_index, seq, partition, txn, aborted."""
    spec.validate()
    rng = np.random.default_rng(spec.seed)
    if spec.skew == "uniform":
        key_index = rng.integers(0, spec.keys, spec.total, dtype=np.int64)
    else:
        weights = 1.0 / np.power(np.arange(1, spec.keys + 1, dtype=np.float64), spec.zipf_exponent)
        key_index = rng.choice(spec.keys, size=spec.total, p=weights / weights.sum()).astype(np.int64)
    if spec.added_partitions:  # the added partitions' records last: they can be written only once the topic grew
        key_index = key_index[np.argsort(key_index % spec.final_partitions >= spec.partitions, kind="stable")]
    ids = np.arange(spec.total, dtype=np.int64)
    txn = ids // spec.transaction_records
    if spec.aborted_fraction > 0:
        aborted_txn = rng.random(int(txn[-1]) + 1) < spec.aborted_fraction
        aborted = aborted_txn[txn]
    else:
        aborted = np.zeros(spec.total, dtype=bool)
    frame = pd.DataFrame({"id": ids, "key_index": key_index, "txn": txn, "aborted": aborted})
    frame["seq"] = np.int64(-1)
    committed = ~frame["aborted"].to_numpy()
    frame.loc[committed, "seq"] = frame.loc[committed].groupby("key_index").cumcount().to_numpy()
    frame["partition"] = (key_index % spec.final_partitions).astype(np.int32)
    frame["key"] = _key_names(key_index)
    return frame[["id", "key", "key_index", "seq", "partition", "txn", "aborted"]]


def event_times(records: pd.DataFrame, spec: WorkloadSpec, end_ms: int) -> np.ndarray | None:
    """Each record's event time (ms) by ``spec``, the latest ending at ``end_ms``; None when the spec sets none."""
    if not spec.has_event_times:
        return None
    partitions = records["partition"].to_numpy()
    index = records.groupby("partition").cumcount().to_numpy().astype(np.int64)
    offsets = index * spec.event_time_step_ms + np.where(partitions == spec.partitions - 1,
                                                         spec.event_time_lead_ms, 0)
    return end_ms - int(offsets.max()) + offsets


def _key_names(key_index: np.ndarray) -> np.ndarray:
    names = np.char.add("k", np.char.zfill(key_index.astype(str), 6))
    return names.astype(object)


def encode_value(record_id: int, seq: int, produced_at: float, record_bytes: int) -> bytes:
    """The record's value: fixed-width header, then padding up to ``record_bytes``."""
    header = b"%s%016d%012d%016d|" % (_MAGIC, record_id, seq + 1, int(produced_at * 1_000_000))
    return header + b"x" * (record_bytes - HEADER_BYTES)


def decode_values(values) -> pd.DataFrame:
    """Vectorised inverse of :func:`encode_value` for a sequence of values: id, seq, produced_at.

    Values that do not carry the header (written by someone else, or corrupted)
    decode to id -1, so checkers can report them as unexpected.
    """
    headers = np.array([v[:HEADER_BYTES] if v is not None else b"" for v in values], dtype=f"S{HEADER_BYTES}")
    raw = headers.view(np.uint8).reshape(-1, HEADER_BYTES)
    valid = (raw[:, 0] == ord("S")) & (raw[:, 1] == ord("C")) & (raw[:, 2] == ord("1")) & (raw[:, 47] == ord("|"))
    digits = raw[:, 3:47].astype(np.int64) - ord("0")
    valid &= ((digits >= 0) & (digits <= 9)).all(axis=1)
    record_id = _digits_to_int(digits[:, 0:16])
    seq = _digits_to_int(digits[:, 16:28]) - 1
    micros = _digits_to_int(digits[:, 28:44])
    return pd.DataFrame({
        "id": np.where(valid, record_id, -1),
        "seq": np.where(valid, seq, -1),
        "produced_at": np.where(valid, micros / 1_000_000, np.nan),
    })


def _digits_to_int(digits: np.ndarray) -> np.ndarray:
    powers = 10 ** np.arange(digits.shape[1] - 1, -1, -1, dtype=np.int64)
    return digits @ powers


def record_id_of(value: bytes) -> int:
    """The id in the header of a value written by :func:`encode_value` (what a delivery report's message holds)."""
    return int(value[3:19])


def produce_record(producer, topic: str, value: bytes, key: bytes | None, partition: int,
                   on_delivery: Callable[[Any, Any], None], *, full_queue_timeout: float = 0.0,
                   drain_s: float = 0.0, timestamp_ms: int = 0) -> None:
    """Queue one record on a confluent-kafka ``producer``, waiting up to ``full_queue_timeout`` s for room.

    When the producer's queue is full (``BufferError``), delivery reports are served for ``drain_s`` seconds
    (which frees the queue) and the record is tried again while ``full_queue_timeout`` lasts; after that the
    ``BufferError`` propagates. With the default 0 it is tried once: the caller decides when to try again
    (an open-loop user does, without blocking its event loop). Any other error (``KafkaException`` for a record
    refused before it was queued) propagates at once. ``timestamp_ms`` > 0 is the record's timestamp (its event
    time); 0 lets the producer stamp it.
    """
    attempt = (producer, topic, value, key, partition, on_delivery, drain_s, timestamp_ms)
    try:
        _produce_or_drain(*attempt)  # the common case, without retry's clock: a bulk load queues millions
    except BufferError:
        if full_queue_timeout <= 0:
            raise
        retry(functools.partial(_produce_or_drain, *attempt), healable=_queue_full, timeout=full_queue_timeout,
              interval=0)


def _produce_or_drain(producer, topic: str, value: bytes, key: bytes | None, partition: int,
                      on_delivery: Callable[[Any, Any], None], drain_s: float, timestamp_ms: int = 0) -> None:
    try:
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery,
                         timestamp=timestamp_ms)
    except BufferError:
        producer.poll(drain_s)  # serve delivery reports so the queue drains
        raise


def _queue_full(exc: BaseException) -> bool:
    return isinstance(exc, BufferError)


class Deliveries:
    """What a producer said about each record of a plan, by record id (ids are rows of the plan, from 0).

    ``produced_at`` is when ``produce()`` was called (NaN: never sent), ``acked_at`` and ``offsets`` come from
    a successful delivery report, ``failed`` marks a failed report (or a record refused before it was queued).
    """

    def __init__(self, n: int) -> None:
        self.produced_at = np.full(n, np.nan)
        self.acked_at = np.full(n, np.nan)
        self.offsets = np.full(n, -1, dtype=np.int64)
        self.failed = np.zeros(n, dtype=bool)

    def sent(self, record_id: int, at: float) -> None:
        self.produced_at[record_id] = at

    def report(self, record_id: int, err: Any, offset: int | None, acked_at: float) -> None:
        """A delivery report: ``err`` None means the broker acknowledged the record at ``offset``."""
        if err is not None:
            self.failed[record_id] = True
            return
        self.offsets[record_id] = offset
        self.acked_at[record_id] = acked_at

    def acked(self) -> np.ndarray:
        return ~np.isnan(self.acked_at) & ~self.failed


class Ledger:
    """What the workload wrote and what the broker said about it. Columns:

    id, key, seq, partition, offset, produced_at, acked_at, aborted, status
    (``acked`` | ``aborted`` | ``indeterminate``), and ``event_time`` (ms) when the workload set event times.
    """

    COLUMNS = ("id", "key", "seq", "partition", "offset", "produced_at", "acked_at", "aborted", "status")

    def __init__(self, frame: pd.DataFrame, spec: WorkloadSpec | None = None, topic: str | None = None) -> None:
        missing = set(self.COLUMNS) - set(frame.columns)
        if missing:
            raise ConfigurationError(f"A ledger needs columns {sorted(missing)}.",
                                     hint="Read ledgers written by streamcert (Ledger.read).")
        self.frame = frame.reset_index(drop=True)
        self.spec = spec
        self.topic = topic

    def __len__(self) -> int:
        return len(self.frame)

    def counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.frame["status"].value_counts().items()}

    #: The columns :meth:`for_checkers` hands to :mod:`~streamcert.harness.verify.checkers`.
    CHECKER_COLUMNS = ("id", "key", "seq", "produced_at", "aborted", "status")

    @classmethod
    def from_deliveries(cls, records: pd.DataFrame, deliveries: Deliveries, spec: WorkloadSpec | None = None,
                        topic: str | None = None, *, rows: np.ndarray | None = None,
                        aborted: np.ndarray | None = None, failed: np.ndarray | None = None,
                        event_time: np.ndarray | None = None) -> "Ledger":
        """The ledger of ``records`` (a :func:`plan`, or a slice of one: ``id``, ``key``, ``seq``, ``partition``,
        one row per id from 0) from what the producer reported in ``deliveries``.

        ``rows`` picks the records to keep (default: all; an open-loop run keeps the ones it sent), ``aborted``
        (per record of ``records``) marks those of transactions the plan aborts: status ``aborted`` and seq -1;
        ``failed`` those of transactions planned to commit whose commit failed (and which were aborted then):
        status ``aborted`` with their planned seq kept, so the order checker numbers their key's acknowledged
        records around them instead of calling the hole a gap. ``event_time`` (per record of ``records``, ms) becomes
        the ``event_time`` column. Of the others, a record acknowledged without a
        failure is ``acked``, any other is ``indeterminate`` (a failed or missing delivery report may still have
        been written: never call it lost, nor unexpected).
        """
        rows = np.arange(len(records)) if rows is None else np.asarray(rows)
        planned = np.zeros(len(rows), dtype=bool) if aborted is None else np.asarray(aborted, dtype=bool)[rows]
        failed = np.zeros(len(rows), dtype=bool) if failed is None else np.asarray(failed, dtype=bool)[rows]
        aborted = planned | failed
        acked = deliveries.acked()[rows]
        frame = pd.DataFrame({
            "id": records["id"].to_numpy()[rows], "key": records["key"].to_numpy()[rows],
            "seq": np.where(planned, -1, records["seq"].to_numpy()[rows]),
            "partition": records["partition"].to_numpy()[rows], "offset": deliveries.offsets[rows],
            "produced_at": deliveries.produced_at[rows], "acked_at": deliveries.acked_at[rows],
            "aborted": aborted, "status": np.where(aborted, "aborted", np.where(acked, "acked", "indeterminate")),
        })
        if event_time is not None:
            frame["event_time"] = np.asarray(event_time, dtype=np.int64)[rows]
        return cls(frame, spec, topic)

    def for_checkers(self) -> pd.DataFrame:
        """The ledger as checkers take it: every record with its ``status`` (:data:`CHECKER_COLUMNS`).

        Acknowledged records are owed to the output; indeterminate ones are known (recovered when delivered once)
        but not owed; aborted ones must never appear.
        """
        extra = [column for column in ("partition", "event_time") if "event_time" in self.frame.columns]
        frame = self.frame[list(self.CHECKER_COLUMNS) + extra].reset_index(drop=True)
        # Categorical: each checker then reads the statuses' codes instead of hashing a string per record.
        frame["status"] = pd.Categorical(frame["status"], categories=_STATUSES)
        return frame

    def write(self, path: Path) -> Path:
        import json

        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.frame, preserve_index=False)
        meta = {b"streamcert.schema_version": b"1",
                b"streamcert.spec": json.dumps(self.spec.as_dict() if self.spec else None).encode(),
                b"streamcert.topic": (self.topic or "").encode()}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        return path

    @classmethod
    def read(cls, path: Path) -> "Ledger":
        import json

        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        spec_json = json.loads(meta.get(b"streamcert.spec", b"null"))
        spec = WorkloadSpec(**spec_json) if spec_json else None
        topic = meta.get(b"streamcert.topic", b"").decode() or None
        return cls(table.to_pandas(), spec, topic)


def load_topic(bootstrap: str, topic: str, spec: WorkloadSpec, *, timeout: float = 120.0,
               producer_conf: dict[str, Any] | None = None, gate: Callable[[int], bool] | None = None,
               grown: Callable[[int], bool] | None = None) -> Ledger:
    """Produce the whole workload into ``topic`` (which must exist with ``spec.partitions`` partitions).

    As fast as the broker takes it when ``spec.rate`` is None, else paced at
    ``spec.rate`` records/s (open loop: the schedule does not wait for acks).
    ``gate`` (a :class:`~streamcert.harness.run.feed.FeedGate`), when given, is asked before each planned
    transaction with the count of records written so far that a reader can read (committed: an aborted transaction's
    never are); it may block, and False ends the load there: the ledger holds the records written. Returns the
    ledger; never raises for individual failed records (they are ``indeterminate`` in the ledger).
    With ``spec.added_partitions``, the first transaction that writes into a partition the topic was created without
    waits for ``grown(spec.final_partitions)`` (default: a :class:`~streamcert.harness.run.topic_growth.TopicGrowth`
    of 120 s); False ends the load there, as a closed gate does.
    """
    from confluent_kafka import Producer

    from streamcert.harness.progress import step
    from streamcert.harness.run.topic_growth import TopicGrowth
    from streamcert.harness.stack.kafka_clients import client_conf

    records = plan(spec)
    n = len(records)
    ids = records["id"].to_numpy()
    seqs = records["seq"].to_numpy()
    partitions = records["partition"].to_numpy()
    keys = [k.encode() for k in records["key"].to_numpy()]
    txns = records["txn"].to_numpy()
    aborted_plan = records["aborted"].to_numpy()
    transactional = bool(aborted_plan.any())
    deliveries = Deliveries(n)

    def on_delivery(err, msg) -> None:
        deliveries.report(record_id_of(msg.value()), err, msg.offset(), time.time())

    conf = {"linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none", "acks": "all",
            "enable.idempotence": True, "message.timeout.ms": int(timeout * 1000), **(producer_conf or {})}
    if transactional:
        conf["transactional.id"] = f"streamcert-workload-{topic}-{spec.seed}"
        conf.setdefault("transaction.timeout.ms", max(60_000, int(conf["message.timeout.ms"])))
    producer = Producer(client_conf(bootstrap, **conf))
    send = functools.partial(produce_record, producer, topic, on_delivery=on_delivery, drain_s=_FULL_QUEUE_POLL_S,
                             full_queue_timeout=int(conf["message.timeout.ms"]) / 1000 + _FULL_QUEUE_GRACE_S)
    txn_failed: set[int] = set()
    stamps = event_times(records, spec, int(time.time() * 1000) - 60_000)
    first_added = int(np.argmax(partitions >= spec.partitions)) if spec.added_partitions else n
    grown = grown or TopicGrowth(bootstrap, topic, timeout_s=timeout)
    with step(f"Loading {n:,} records into {topic}") as progress:
        if transactional:
            producer.init_transactions(timeout)
        began = time.time()
        current_txn = -1
        written, readable, txn_began = n, 0, 0
        for i in range(n):
            if txns[i] != current_txn:
                if transactional and current_txn >= 0:
                    _end_transaction(producer, bool(aborted_plan[i - 1]), timeout, txn_failed, current_txn)
                if current_txn >= 0 and not aborted_plan[i - 1] and current_txn not in txn_failed:
                    readable += i - txn_began
                txn_began = i
                if gate is not None and not _gate_open(gate, producer, readable):
                    written, current_txn = i, -1
                    break
                if first_added < n and txns[i] == txns[first_added] and not _topic_grew(grown, producer, topic,
                                                                                        spec.final_partitions):
                    written, current_txn = i, -1
                    break
                current_txn = int(txns[i])
                if transactional:
                    producer.begin_transaction()
            if spec.rate is not None:
                delay = began + i / spec.rate - time.time()
                if delay > 0:
                    producer.poll(0)
                    time.sleep(delay)
            now = time.time()
            deliveries.sent(i, now)
            send(encode_value(int(ids[i]), int(seqs[i]), now, spec.record_bytes), keys[i], int(partitions[i]),
                 timestamp_ms=int(stamps[i]) if stamps is not None else 0)
            if i % 10_000 == 0:
                producer.poll(0)
                progress.update(f"{i:,}/{n:,}")
        if transactional and current_txn >= 0:
            _end_transaction(producer, bool(aborted_plan[n - 1]), timeout, txn_failed, current_txn)
        producer.flush(timeout)

    return Ledger.from_deliveries(records, deliveries, spec, topic, rows=np.arange(written), aborted=aborted_plan,
                                  failed=~aborted_plan & np.isin(txns, list(txn_failed)), event_time=stamps)


def _gate_open(gate: Callable[[int], bool], producer: Any, readable: int) -> bool:
    """Ask the feed's gate at a transaction boundary; what was produced so far is delivered first (a gate that
    waits for the query to read it must not wait for records still in the producer's queue)."""
    producer.flush(30)
    return gate(readable)


def _topic_grew(grown: Callable[[int], bool], producer: Any, topic: str, count: int) -> bool:
    """Wait for the topic's added partitions (what was produced so far delivered first); the producer's metadata
    then learns them, so its records for them are not refused as for unknown partitions."""
    producer.flush(30)
    if not grown(count):
        return False
    deadline = time.monotonic() + 30
    while len(producer.list_topics(topic, timeout=10).topics[topic].partitions) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _end_transaction(producer, abort: bool, timeout: float, txn_failed: set[int], txn: int) -> None:
    from confluent_kafka import KafkaException

    if abort:
        # Flush first: abort_transaction() purges unsent records, and an aborted record that never
        # reached the log would not test a reader's isolation at all.
        producer.flush(timeout)
        producer.abort_transaction(timeout)
        return
    deadline = time.monotonic() + 4 * timeout
    # a commit that timed out (a broker killed, a controller moving) goes on in the background: calling it again is
    # librdkafka's way to learn how it ended; aborting meanwhile is refused as a conflict
    error = _until_settled(lambda: producer.commit_transaction(timeout), deadline,
                           again=lambda e: e.retriable() and not e.txn_requires_abort())
    if error is None:
        return
    if error.fatal():
        raise KafkaException(error)
    # A commit that fails is aborted; its records must then never be seen.
    txn_failed.add(txn)
    error = _until_settled(lambda: producer.abort_transaction(timeout), deadline, again=lambda e: e.retriable())
    if error is not None:
        raise KafkaException(error)


def _until_settled(call: Callable[[], None], deadline: float, again: Callable[[Any], bool]) -> Any:
    """``call()`` until it returns (None) or raises a KafkaError that ``again`` does not retry, or ``deadline``
    passed (that error)."""
    from confluent_kafka import KafkaError, KafkaException

    while True:
        try:
            call()
            return None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else KafkaError(KafkaError._FAIL)
            if not again(error) or time.monotonic() >= deadline:
                return error
            time.sleep(0.2)
