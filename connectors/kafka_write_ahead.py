"""Kafka as a two-phase-commit participant, by write-ahead (SPEC §3.2 option 1, seed 003's GenericWriteAheadSink).

librdkafka cannot hand an open transaction to another process, so a task cannot *prepare* a
Kafka transaction for the driver to commit. The same protocol is realised in two steps instead:

- **pre-commit** (:func:`stage_rows`, on executors): the task writes its rows to a *staging*
  topic, packed in blocks (:mod:`streamcert.connectors.row_blocks`, one record
  per block of ``stagingBlockBytes``, 512 KiB by default), each record carrying a *marker* in a header: the task
  attempt's transaction id (:class:`~streamcert.connectors.twophase.TxnId`), with a try number when the task
  stages again after a failed try. Once the broker acknowledged every record (``acks=all``: they are durable), the
  task reports the staged range (:class:`StagedRange`: marker, partition, first and last offset, records, rows)
  in its commit message. Staging is *not* transactional: nothing but a commit message makes staged rows count,
  and a commit message names one try's marker and range, so rows of a zombie attempt, of a failed try or of an
  aborted batch (whatever of them reached the log) are never copied, and no open staging transaction can hold
  the copy back. That is the fencing of tasks (the driver's stable ``transactional.id`` fences zombie drivers).
  It also spares each task a transactional producer: one idempotent producer per Python worker stages for every
  task the worker runs (initialising a transactional producer cost each task 0.06-1.1 s a batch, waiting on
  ``InitProducerId``, and a producer of a stable ``transactional.id`` per partition could not be kept, since the
  partition's next task may run in another worker and fence it);
- **decision + commit** (:func:`commit_batch`, on the driver): one transaction of the driver's
  producer (``transactional.id`` stable per sink, so a zombie driver is fenced) copies the staged
  ranges named by the messages to the output topic *and* writes the decision record
  ``(sink, batch id)`` to the sink's *decision log* topic (``decisionLogTopic``; the PostgreSQL
  sink's equivalent is :class:`~streamcert.connectors.pg_participant.PostgresDecisionLog`). The
  decision record commits atomically with the rows, so there is no window where one exists without
  the other;
- **replay**: a batch whose decision record is committed writes nothing (``commit`` is idempotent). The driver
  reads the decision log's tail to know (~60 ms), except where its own last commit answers: the committer that
  committed batch N-1 (or N) in this process and is still the process's committer knows N is new (or a replay),
  since any other committer that decided a batch since must have initialised the same ``transactional.id`` first,
  which fences this one (its transaction fails, it is replaced, and the new one reads the log);
- **orphans, zombies, abort, recovery**: staged rows nobody's message names (a failed or zombie
  attempt or try, an aborted batch, a crash before the decision) are never copied; an open driver
  transaction left by a crash is aborted when the next driver initialises the same
  ``transactional.id`` (before it reads the decision log). Nothing else needs recovering.

Where a commit's time goes (a batch of two staged ranges of 60 rows, :func:`stage_rows` and :func:`commit_batch` in
a loop on the local broker, median of 19 batches): 62 ms, of which the copy 22 ms and the transaction's commit 3 ms.
The copy reads the first range of every staging partition together (one assignment), then the next of each.
Reads take what the client has queued after their first message (:func:`~streamcert.connectors.kafka_client.take`):
a ``consume(1000, timeout)`` that found fewer held them for the whole timeout, 50 ms a range (120 ms a batch
before). The decision log and the staging topic have a reader each: one consumer switched between them fetched
nothing for ~1 s in about half the switches, which every restarted driver's first commit paid (a fresh process's
first commit: 1.1-1.2 s before, 0.19 s now; after a SIGKILLed committer, whose open transaction the new one's
``InitProducerId`` aborts: 2.1 s before, 0.7 s now).

A new producer (a Python worker's staging producer, a driver's committer) asks the broker for metadata before it
is used (:func:`~streamcert.connectors.kafka_client.wait_for_metadata`): librdkafka asks for an idempotent or
transactional producer's id only once a broker is up, and else on a 500-ms timer, which every new worker's first
staging waited out (~510 ms; ~65 ms with the metadata first) and a restarted driver's first ``init_transactions``
up to ~1.1 s of (~75 ms). Spark hands a task's reader and writer to whichever of its reused workers is idle, so each
worker stages for the first time in a batch of its own: the first batches after every query start paid it.

Rescale-safe: the decision is per batch, not per Spark partition, so a replay partitioned
differently copies its own staged ranges once. Costs a second write of every row (measured in the
benchmarks). Decision records are committed in batch order, so "batch N is decided" is "the last
committed decision record of the sink says a batch >= N".
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streamcert.spi.errors import ConfigurationError
from streamcert.spi.fault_points import reached
from .kafka_client import KeptConsumers, client_conf, create_topic, take, wait_for_metadata

from .kafka_sink_options import SINK_NAME, SinkOptions
from .row_blocks import decode_block, encode_blocks
from .twophase import TxnId

__all__ = ["STAGE_HEADER", "FAULT_POINTS", "StagedRange", "ensure_topics", "stage_rows", "commit_batch",
           "last_committed_batch", "committer_transactional_id"]

STAGE_HEADER = "sc2pc"
FAULT_POINTS = "kafka-2pc"
_DECISION_LOG_WINDOW = 256  # decision records read from the log's end at first
_STAGING_RETENTION_MS = 24 * 3600 * 1000
# a block holds stagingBlockBytes (<= 8 MiB) plus one row: room for a row of several MiB more
_STAGING_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
_producers: dict[tuple, Producer] = {}
_producers_lock = threading.Lock()
_consumers = KeptConsumers()  # the consumers the driver's commits take turns with
_topics_found: set[tuple[str, ...]] = set()  # (bootstrap, output, staging, decision log) known to exist
#: (bootstrap, decision log, sink id) -> (the last batch this process committed, the producer that committed it)
_decided: dict[tuple[str, str, str], tuple[int, Producer]] = {}


@dataclass(frozen=True)
class StagedRange:
    """Where one staging try's acknowledged records are: they carry ``txn_id`` (the try's marker) in a header."""

    txn_id: str
    partition: int
    first_offset: int
    last_offset: int
    records: int  # staging records (blocks of rows) of the try in the range
    rows: int  # rows in those blocks

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def committer_transactional_id(sink_id: str) -> str:
    return f"sc2pc-{sink_id}-commit"


# -- topics -------------------------------------------------------------------------------

def ensure_topics(options: SinkOptions, timeout: float = 30.0) -> None:
    """Driver, whenever Spark creates the writer (at query start and again for each batch's commit): the output
    topic must exist; staging and decision log topics are created when missing.

    A broker that is briefly away (restarting, a network blip) is waited for up to ``timeout`` s rather than
    failing the query; one that never answered in that time is a configuration error. A process that found
    the three topics once does not ask again (Spark reuses the Python process of the commits: an admin client
    and a metadata request per batch were on every commit's path); a topic deleted since fails the commit.
    """
    from confluent_kafka.admin import AdminClient

    found = (options.bootstrap_servers, options.topic, options.staging_topic, options.decision_log_topic)
    if found in _topics_found:
        return
    admin = AdminClient(client_conf(options.bootstrap_servers, **{"socket.timeout.ms": 5000}))
    deadline = time.monotonic() + timeout
    topics = _retrying(lambda: admin.list_topics(timeout=min(timeout, 10.0)).topics, deadline,
                       f"The {SINK_NAME} sink cannot reach Kafka at {options.bootstrap_servers}",
                       "Check kafka.bootstrap.servers and that the broker is up.")
    if options.topic not in topics or topics[options.topic].error is not None:
        raise ConfigurationError(f"The output topic {options.topic!r} of the {SINK_NAME} sink does not exist.",
                                 hint="Create it first (the sink does not guess partitions or replication).")
    # Staged rows are read only between a batch's write() and its commit() in the same run (a replay stages
    # again), so a day of retention is ample and keeps the second copy from piling up.
    wanted = {options.staging_topic: (options.staging_partitions,
                                      {"retention.ms": str(_STAGING_RETENTION_MS),
                                       "max.message.bytes": str(_STAGING_MAX_MESSAGE_BYTES)}),
              options.decision_log_topic: (1, {"cleanup.policy": "compact"})}
    for topic, (partitions, config) in wanted.items():
        if topic in topics and topics[topic].error is None:
            continue
        _retrying(lambda t=topic, n=partitions, c=config: create_topic(
            options.bootstrap_servers, t, partitions=n, config=c, timeout=max(1.0, deadline - time.monotonic())),
            deadline, f"The {SINK_NAME} sink could not create its topic {topic!r}",
            "Check that the sink's principal may create topics, or create it beforehand.")
    _topics_found.add(found)


def _retrying(call: Callable[[], Any], deadline: float, failure: str, hint: str) -> Any:
    """``call()``, again after a transient Kafka error until ``deadline``; a lasting or permanent error is a
    :class:`ConfigurationError` that starts with ``failure``."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            if not _transient(err) or time.monotonic() >= deadline:
                raise ConfigurationError(f"{failure}: {err.str()}.", hint=hint) from None
        time.sleep(0.5)


def _transient(err: KafkaError) -> bool:
    """A broker that is away or busy, not a refusal: worth asking again."""
    return err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                             KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT,
                                             KafkaError.NOT_CONTROLLER, KafkaError.LEADER_NOT_AVAILABLE)


# -- producers ----------------------------------------------------------------------------

def _new_producer(options: SinkOptions, transactional_id: str, extra: dict[str, object]) -> Producer:
    """An initialised transactional producer; initialising fences the previous holder of the id."""
    conf = client_conf(options.bootstrap_servers, **{
        "transactional.id": transactional_id, "enable.idempotence": True, "acks": "all",
        "transaction.timeout.ms": options.transaction_timeout_ms, "linger.ms": 5,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000, **options.kafka_conf,
        **extra})  # the sink's own settings for this producer win
    producer = Producer(conf)
    wait_for_metadata(producer, options.topic)
    producer.init_transactions(options.transaction_timeout_ms / 1000)
    return producer


def _cached_producer(options: SinkOptions, transactional_id: str, extra: dict[str, object]) -> tuple[Producer, bool]:
    """The process's producer of ``transactional_id``, and whether it was initialised by this call."""
    key = (options.bootstrap_servers, transactional_id)
    with _producers_lock:
        producer = _producers.get(key)
        if producer is not None:
            return producer, False
        producer = _producers[key] = _new_producer(options, transactional_id, extra)
        return producer, True


def _forget(options: SinkOptions, transactional_id: str) -> None:
    with _producers_lock:
        _producers.pop((options.bootstrap_servers, transactional_id), None)


def _error(exc: BaseException) -> KafkaError | None:
    return exc.args[0] if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError) \
        else None


def _commit(producer: Producer, deadline: float) -> None:
    """``commit_transaction``, repeated while its error is retriable (the outcome is then still unknown)."""
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() >= deadline:
                raise


def _transaction(options: SinkOptions, transactional_id: str, extra: dict[str, object], what: str,
                 body: Callable[[Producer], Any], deadline: float) -> Any:
    """Run ``body`` in a transaction until it commits, or until ``deadline``.

    ``body`` returns ``_ALREADY_DONE`` to end without a transaction (for the driver: the decision log
    says the batch is committed). After any failure the producer is aborted or, if it cannot be
    (fatal error, fenced, unknown outcome), thrown away: the next one re-initialises the id, which
    completes or aborts what the last one left open, and ``body`` looks again. The producer is kept for
    the next call in this process (the driver's committer commits every batch with it).

    Fenced after initialising the id itself, the call gives up at once: a newer instance holds the
    id, and fencing it back would start a duelling pair that stalls both until the deadline. Only a
    producer cached from an earlier call is replaced when fenced. Other fatal errors are retried
    with a new producer at most ``_FATAL_RETRIES`` times.
    """
    last: BaseException | None = None
    fatal_errors = 0
    while time.monotonic() < deadline:
        producer, initialised_here = None, True
        try:
            producer, initialised_here = _cached_producer(options, transactional_id, extra)
            producer.begin_transaction()
            result = body(producer)
            if result is _ALREADY_DONE:
                producer.abort_transaction(max(1.0, deadline - time.monotonic()))
                return result
            _commit(producer, deadline)
            return result
        except BaseException as exc:
            kafka_exc = _kafka_exception(exc)
            _abort_or_forget(options, transactional_id, producer, kafka_exc or exc, deadline)
            if kafka_exc is None:
                raise
            err = _error(kafka_exc)
            if err is not None and err.code() in _PERMANENT:
                raise RuntimeError(f"{SINK_NAME}: {what} failed: {err.str()}. {_PERMANENT[err.code()]}") from None
            if err is not None and err.code() in _FENCED and initialised_here:
                raise RuntimeError(f"{SINK_NAME}: {what} was fenced: another producer initialised transactional.id "
                                   f"{transactional_id!r} after this one ({err.str()}). {_FENCED_HINT}") from None
            if err is not None and (err.fatal() or err.code() == KafkaError._FATAL) and err.code() not in _FENCED:
                fatal_errors += 1
                if fatal_errors > _FATAL_RETRIES:
                    raise RuntimeError(f"{SINK_NAME}: {what} failed: {fatal_errors} producers in turn met a fatal "
                                       f"error; last: {err.str()}") from kafka_exc
            last = kafka_exc
            time.sleep(0.2)
    raise RuntimeError(f"{SINK_NAME}: {what} did not commit before its deadline; last error: {last}") from last


def _kafka_exception(exc: BaseException | None) -> KafkaException | None:
    """The KafkaException behind ``exc``.

    confluent-kafka raises a fatal error (fenced, say) from inside librdkafka's callbacks while a
    ``flush``/``poll`` is draining them; depending on which callback runs next it surfaces as a
    SystemError whose context is the KafkaException ("returned a result with an exception set") or
    as a bare SystemError of a ``cimpl`` method ("returned NULL without setting an exception"). Both
    mean the producer met a fatal error: it is unusable, and a new one (which fences it) is the cure.
    """
    if isinstance(exc, KafkaException):
        return exc
    if isinstance(exc, SystemError):
        if isinstance(exc.__context__, KafkaException):
            return exc.__context__
        if "cimpl." in str(exc):
            return KafkaException(KafkaError(KafkaError._FATAL, f"the Kafka client lost a fatal error: {exc}",
                                             fatal=True))
    return None


def _abort_or_forget(options: SinkOptions, transactional_id: str, producer: Producer | None, exc: BaseException,
                     deadline: float) -> None:
    """Leave no open transaction in a cached producer: abort it, or drop the producer if it cannot abort."""
    err = _error(exc)
    if producer is not None and (err is None or err.txn_requires_abort() or not err.fatal()):
        try:
            producer.abort_transaction(max(1.0, min(10.0, deadline - time.monotonic())))
            return
        except KafkaException:
            pass
    _forget(options, transactional_id)


_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
_FENCED_HINT = ("Another driver with the same sinkId now owns it (a newer run of the query, or a second query "
                "writing with this sinkId); this one stops so that the newer one can finish.")
_FATAL_RETRIES = 3

# errors a retry cannot heal -> what to do about them
_TOO_LARGE = ("A row is larger than the sink's producer (message.max.bytes, 1000000 by default: set "
              "kafka.message.max.bytes) or the output topic (its max.message.bytes) accepts.")
_DENIED = "The broker's ACLs refuse the sink's producers: grant them write and transactional access."
_PERMANENT = {KafkaError.MSG_SIZE_TOO_LARGE: _TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE: _TOO_LARGE,
              KafkaError.INVALID_RECORD: "The broker refused a record as invalid.",
              KafkaError.TOPIC_AUTHORIZATION_FAILED: _DENIED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _DENIED,
              KafkaError.CLUSTER_AUTHORIZATION_FAILED: _DENIED}


class _Done:
    def __repr__(self) -> str:
        return "ALREADY_DONE"


_ALREADY_DONE = _Done()


# -- pre-commit: staging (executors) ----------------------------------------------------------

class _Offsets:
    """Delivery callback: the range and number of acknowledged offsets, and the first error."""

    def __init__(self) -> None:
        self.first, self.last, self.acknowledged, self.error = None, None, 0, None

    def __call__(self, err, msg) -> None:
        if err is not None:
            if self.error is None:
                self.error = err
            return
        offset = msg.offset()
        self.first = offset if self.first is None else min(self.first, offset)
        self.last = offset if self.last is None else max(self.last, offset)
        self.acknowledged += 1


def _produce_all(producer: Producer, topic: str, partition: int | None, rows: Iterable[tuple[Any, Any]],
                 headers: list[tuple[str, bytes]] | None, on_delivery: Callable | None) -> int:
    produce, count = producer.produce, 0
    extra: dict[str, Any] = {}
    if partition is not None:
        extra["partition"] = partition
    if headers is not None:
        extra["headers"] = headers
    if on_delivery is not None:
        extra["on_delivery"] = on_delivery
    for key, value in rows:
        while True:
            try:
                produce(topic, value=value, key=key, **extra)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
    return count


def stage_rows(options: SinkOptions, txn: TxnId, batches: Iterator) -> StagedRange:
    """Executor, in ``write()``: stage the task's Arrow batches and return the range of the try every record of
    which the broker acknowledged.

    The rows are kept (as encoded blocks) until then, so a transient broker failure is retried inside the task
    instead of failing it: a try that lost a record (its delivery failed, or the producer met a fatal error) is
    abandoned whole, and the next try stages every block again under a marker of its own.
    """
    blocks = list(encode_blocks(batches, options.staging_block_bytes))
    rows = sum(count for _payload, count in blocks)
    partition = txn.partition % options.staging_partitions
    deadline = time.monotonic() + options.transaction_timeout_ms / 1000
    last: BaseException | None = None
    for attempt in itertools.count():
        marker = str(txn) if attempt == 0 else f"{txn}/try-{attempt}"
        producer = _staging_producer(options)
        try:
            staged = _stage_try(producer, options, marker, partition, blocks, rows, deadline)
        except KafkaException as exc:
            err = _error(exc)
            if err is not None and err.code() in _PERMANENT:
                raise RuntimeError(f"{SINK_NAME}: staging batch {txn.batch_id} partition {txn.partition} failed: "
                                   f"{err.str()}. {_PERMANENT[err.code()]}") from None
            if err is None or err.fatal() or err.code() == KafkaError._FATAL:
                _forget_staging_producer(options, producer)
            last = exc
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
            continue
        reached(f"{FAULT_POINTS}.after-stage")
        return staged
    raise RuntimeError(f"{SINK_NAME}: staging batch {txn.batch_id} partition {txn.partition} was not acknowledged "
                       f"within transactionTimeoutMs ({options.transaction_timeout_ms} ms); last error: {last}"
                       ) from last


def _stage_try(producer: Producer, options: SinkOptions, marker: str, partition: int, blocks: list[tuple[bytes, int]],
               rows: int, deadline: float) -> StagedRange:
    """One try: every block produced under ``marker`` and acknowledged, or a :class:`KafkaException`."""
    offsets = _Offsets()
    try:
        records = _produce_all(producer, options.staging_topic, partition,
                               ((None, payload) for payload, _count in blocks), [(STAGE_HEADER, marker.encode())],
                               offsets)
        remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    except BaseException as exc:
        kafka_exc = _kafka_exception(exc)
        if kafka_exc is None:
            raise
        raise kafka_exc from None
    if offsets.error is not None:
        raise KafkaException(offsets.error)
    if remaining or offsets.acknowledged != records:
        raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, f"{records - offsets.acknowledged} staged "
                                        "record(s) were not acknowledged in time"))
    first, last = (offsets.first, offsets.last) if records else (-1, -1)
    return StagedRange(marker, partition, first, last, records, rows)


def _staging_producer(options: SinkOptions) -> Producer:
    """This process's idempotent staging producer for the sink's cluster and settings (made on first use)."""
    key = _staging_key(options)
    with _producers_lock:
        producer = _producers.get(key)
        if producer is None:
            # idempotence keeps a try's blocks once each in the log, so its range counts exactly its records
            producer = _producers[key] = Producer(client_conf(options.bootstrap_servers, **{
                "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                **options.kafka_conf, "enable.idempotence": True, "acks": "all",
                "message.max.bytes": _STAGING_MAX_MESSAGE_BYTES}))
            wait_for_metadata(producer, options.staging_topic)
        return producer


def _forget_staging_producer(options: SinkOptions, producer: Producer) -> None:
    """Drop a staging producer that may be unusable (a fatal error): the next try makes a new one."""
    key = _staging_key(options)
    with _producers_lock:
        if _producers.get(key) is producer:
            del _producers[key]


def _staging_key(options: SinkOptions) -> tuple:
    return (options.bootstrap_servers, "staging", tuple(sorted((k, str(v)) for k, v in options.kafka_conf.items())))


# -- decision + commit (driver) ----------------------------------------------------------------

def _reader(options: SinkOptions, role: str) -> Consumer:
    return Consumer(client_conf(options.bootstrap_servers, **{
        "group.id": f"sc2pc-{options.sink_id}-{role}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True, "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 10485760, "fetch.wait.max.ms": 10}))


# One reader per topic: a consumer assigned a topic other than the one it read last fetched nothing for a second in
# about half the switches (librdkafka 2.x, measured on the local broker: ~990 ms against ~20 ms), which every first
# commit of a restarted driver paid, reading the decision log and then the staging topic.
def _decision_reader(options: SinkOptions) -> Consumer:
    return _reader(options, "decisions")


def _staging_reader(options: SinkOptions) -> Consumer:
    return _reader(options, "staging")


def _watermarks_consumer(options: SinkOptions) -> Consumer:
    return Consumer(client_conf(options.bootstrap_servers, **{
        "group.id": f"sc2pc-{options.sink_id}-watermarks", "isolation.level": "read_uncommitted",
        "enable.auto.commit": False}))


def _kept_consumer(options: SinkOptions, make: Callable[[SinkOptions], Consumer]):
    """A consumer made by ``make`` that this process keeps for its next commit (Spark runs a batch's commit in a
    Python process it reuses: three consumers made and closed per batch cost connections and metadata each time)."""
    return _consumers.take((options.bootstrap_servers, options.sink_id, make.__name__), lambda: make(options))


def last_committed_batch(options: SinkOptions, timeout: float = 30.0) -> int | None:
    """The highest batch id in a committed decision record of this sink, or None.

    Reads the decision log's tail read_committed (a window, widened until a record of this sink is found or
    the whole log was read) up to the high watermark seen first. The reader waits (until ``timeout``) while
    the last stable offset is below it: a commit returns before the broker writes its markers, so a decision
    made a moment ago sits behind the last stable offset for a few milliseconds, and taking "not there yet"
    for "not decided" would copy a committed batch a second time.
    """
    with _kept_consumer(options, _decision_reader) as consumer:
        tp = TopicPartition(options.decision_log_topic, 0)
        low, high = _log_end(options, tp, timeout)
        window, deadline = _DECISION_LOG_WINDOW, time.monotonic() + timeout
        while True:
            start = max(low, high - window)
            found = _scan_decision_log(consumer, tp, start, high, options.sink_id, deadline)
            if found is not None or start == low:
                return found
            window *= 4


def _log_end(options: SinkOptions, tp: TopicPartition, timeout: float) -> tuple[int, int]:
    """The partition's log start and high watermark. Asked read_uncommitted: a read_committed client is told
    the last stable offset instead, which stops short of a transaction whose markers are still to come."""
    with _kept_consumer(options, _watermarks_consumer) as probe:
        return probe.get_watermark_offsets(tp, timeout=timeout)


def _scan_decision_log(consumer: Consumer, tp: TopicPartition, start: int, end: int, sink_id: str,
                       deadline: float) -> int | None:
    """The highest batch of ``sink_id``'s decision records in ``[start, end)`` of the log, or None."""
    if start >= end:
        return None
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    best = None
    while True:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{SINK_NAME}: the decision log {tp.topic!r} could not be read up to offset {end} "
                               "(read_committed): a transaction on it stayed open. Another sink sharing the "
                               "decisionLogTopic holds it, or a committer outside streamcert; it ends when it "
                               "commits, aborts or reaches its transaction.timeout.ms.")
        for msg in take(consumer, 500, 0.05):
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
                if msg.offset() >= end:  # at the stable end, past every marker up to ``end``
                    return best
                continue  # held at the last stable offset: a transaction's markers are still to come
            if msg.key() == sink_id.encode():
                best = max(best if best is not None else -1, int(json.loads(msg.value())["batch"]))
            if msg.offset() + 1 >= end:
                return best


def _copy_range(consumer: Consumer, producer: Producer, options: SinkOptions, staged: StagedRange,
                deadline: float) -> int:
    """Copy one staged range's rows to the output topic inside the producer's open transaction."""
    return _copy_ranges(consumer, producer, options, [staged], deadline)


def _copy_ranges(consumer: Consumer, producer: Producer, options: SinkOptions, staged: Iterable[StagedRange],
                 deadline: float) -> int:
    """Copy the staged ranges' rows to the output topic inside the producer's open transaction. The first range of
    every staging partition is read at once (one assignment, fetched together), then the next of each: a range a
    round trip cost every batch as many fetches one after the other as it had tasks."""
    queues: dict[int, list[StagedRange]] = {}
    for rng in sorted(staged, key=lambda r: (r.partition, r.first_offset)):
        if rng.records:
            queues.setdefault(rng.partition, []).append(rng)
    rows = 0
    while queues:
        wave = {partition: queue.pop(0) for partition, queue in queues.items()}
        queues = {partition: queue for partition, queue in queues.items() if queue}
        rows += _copy_wave(consumer, producer, options, wave, deadline)
    return rows


def _copy_wave(consumer: Consumer, producer: Producer, options: SinkOptions, wave: dict[int, StagedRange],
               deadline: float) -> int:
    """Copy one range per staging partition (``wave``), reading them together; each range must hold exactly the
    records and rows its message names."""
    consumer.assign([TopicPartition(options.staging_topic, partition, rng.first_offset)
                     for partition, rng in wave.items()])
    markers = {partition: rng.txn_id.encode() for partition, rng in wave.items()}
    # dense: nobody else wrote inside the range, so every record in it is the try's
    dense = {partition: rng.last_offset - rng.first_offset + 1 == rng.records for partition, rng in wave.items()}
    copied = {partition: [0, 0] for partition in wave}
    seen: dict[int, int | None] = dict.fromkeys(wave)
    pending = set(wave)
    while pending:
        if time.monotonic() >= deadline:
            late = {wave[p].txn_id: seen[p] for p in sorted(pending)}
            raise RuntimeError(
                f"{SINK_NAME}: staged records of {len(pending)} range(s) could not be read within copyTimeoutMs "
                f"(last offset read per try: {late}). They are committed, so the broker is unreachable or the "
                "staging topic's retention removed them.")
        for msg in take(consumer, 1000, 0.05):
            partition = msg.partition()
            if partition not in pending:
                continue
            rng = wave[partition]
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
                if msg.offset() > rng.last_offset:
                    pending.discard(partition)
                continue
            if msg.offset() < rng.first_offset:
                continue
            if msg.offset() > rng.last_offset:
                pending.discard(partition)
                continue
            seen[partition] = msg.offset()
            if dense[partition] or _header(msg) == markers[partition]:
                keys, values = decode_block(msg.value())
                _produce_rows(producer, options.topic, keys, values)
                copied[partition][0] += 1
                copied[partition][1] += len(values)
            if msg.offset() == rng.last_offset:
                pending.discard(partition)
    for partition, rng in wave.items():
        records, rows = copied[partition]
        if (records, rows) != (rng.records, rng.rows):
            raise RuntimeError(f"{SINK_NAME}: staged range {rng.to_dict()} holds {records} committed records with "
                               f"{rows} rows of its transaction, expected {rng.records} with {rng.rows}: staged "
                               "rows are lost; refusing to commit.")
    return sum(rows for _records, rows in copied.values())


def _produce_rows(producer: Producer, topic: str, keys: list, values: list) -> None:
    """The hot loop of the copy, once per row on the driver: one produce call per row where possible."""
    produce, rows = producer.produce, zip(keys, values, strict=True)
    for key, value in rows:  # a bare loop: enumerate() alone cost 10% of the copy rate (550k -> 500k rows/s)
        try:
            produce(topic, value, key)
        except BufferError:  # the local queue is full: let deliveries drain, then the rest the slow way
            _produce_all(producer, topic, None, itertools.chain([(key, value)], rows), None, None)
            return


def _header(msg) -> bytes | None:
    for name, value in msg.headers() or ():
        if name == STAGE_HEADER:
            return value
    return None


def commit_batch(options: SinkOptions, batch_id: int, staged: list[StagedRange]) -> dict[str, Any]:
    """Driver, in ``commit(messages, batchId)``: copy the batch's staged ranges and write its decision record,
    in one transaction, unless the decision log already holds the batch (a replayed commit)."""
    deadline = time.monotonic() + options.copy_timeout_ms / 1000
    outcome: dict[str, Any] = {"batch": batch_id, "replay": False, "rows": 0}
    copier: Producer | None = None  # the producer of the last try that copied: the one that committed

    def body(producer: Producer) -> Any:
        nonlocal copier
        decided = _decided_here(options, producer, batch_id)
        outcome["decision_log_read"] = decided is None
        if decided is None:
            decided = last_committed_batch(options, timeout=max(1.0, deadline - time.monotonic()))
        if decided is not None and decided >= batch_id:
            outcome["replay"] = True
            return _ALREADY_DONE
        copier = producer
        reached(f"{FAULT_POINTS}.before-copy")
        with _kept_consumer(options, _staging_reader) as consumer:
            rows = _copy_ranges(consumer, producer, options, staged, deadline)
        record = {"sink": options.sink_id, "batch": batch_id, "rows": rows, "ranges": len(staged),
                  "committed_at": time.time()}
        _produce_all(producer, options.decision_log_topic, 0, [(options.sink_id.encode(), json.dumps(record).encode())],
                     None, None)
        producer.flush(max(1.0, deadline - time.monotonic()))
        reached(f"{FAULT_POINTS}.before-commit")
        outcome["rows"] = rows
        return outcome

    _transaction(options, committer_transactional_id(options.sink_id), {"partitioner": "murmur2_random"},
                 f"commit of batch {batch_id}", body, deadline)
    if copier is not None and not outcome["replay"]:
        _decided[_decision_key(options)] = (batch_id, copier)
    reached(f"{FAULT_POINTS}.after-commit")
    return outcome


def _decision_key(options: SinkOptions) -> tuple[str, str, str]:
    return options.bootstrap_servers, options.decision_log_topic, options.sink_id


def _decided_here(options: SinkOptions, producer: Producer, batch_id: int) -> int | None:
    """The last batch this process committed, when that answers whether ``batch_id`` is decided without reading the
    decision log (a ~60 ms scan a batch): when ``producer`` (the process's committer, about to copy) is the one that
    committed it, and it is ``batch_id`` or later (a replay) or the batch just before (the next one). No other
    producer can have decided a batch since without fencing this one: it would have initialised the same
    ``transactional.id`` first, and this transaction then fails as fenced, the producer is replaced and the next
    try reads the log. None: read the log."""
    last = _decided.get(_decision_key(options))
    if last is None or last[1] is not producer or last[0] < batch_id - 1:
        return None
    return last[0]
