"""``streamcert env smoke``: prove every part of the stack works, end to end, and measure it.

Each step exercises one real component the way the suite will: Kafka through
Toxiproxy (plain, with a latency toxic, with the link down), Kafka
transactions under read_committed, PostgreSQL prepared transactions across
connections, and one micro-batch of a Spark streaming query over a Python data
source. The result is one flat dict; :data:`EXPECTATIONS` says what a healthy
stack gives.
"""

from __future__ import annotations

import functools
import statistics
import time
import uuid
from typing import Any, Callable, Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from streamcert.harness.errors import StreamcertError
from streamcert.harness.stack.environment import Environment, EnvironmentConfig
from streamcert.harness.stack.kafka_clients import client_conf, create_topic, read_topic
from streamcert.harness.stack.spark import SparkConfig
from streamcert.harness.waiting import wait_for

__all__ = ["EXPECTATIONS", "CLUSTER_EXPECTATIONS", "run_smoke", "failed_expectations", "CountingSource"]

LATENCY_TOXIC_MS = 300

#: field -> predicate a healthy stack satisfies.
EXPECTATIONS: dict[str, Callable[[Any], bool]] = {
    "kafka_rtt_ms": lambda v: v is not None and v >= 0,
    "kafka_rtt_with_latency_toxic_ms": lambda v: v is not None and v >= LATENCY_TOXIC_MS,
    "proxy_down_produce_failed": lambda v: v is True,
    "txn_committed_visible": lambda v: v is True,
    "txn_aborted_visible": lambda v: v is False,
    "pg_prepared_commit_ok": lambda v: v is True,
    "spark_batches": lambda v: v is not None and v >= 1,
    "leftover_processes": lambda v: v == 0,
}


#: What a healthy cluster (``--brokers`` > 1) gives too: a leader kill moved leadership, nothing acknowledged was lost.
CLUSTER_EXPECTATIONS: dict[str, Callable[[Any], bool]] = {
    "leader_moved": lambda v: v is True,
    "isr_restored": lambda v: v is True,
    "failover_records_lost": lambda v: v == 0,
}


def failed_expectations(result: dict[str, Any]) -> list[str]:
    """Names of the fields in ``result`` that are not what a healthy stack gives (skipped steps aside)."""
    skipped = result.get("skipped") or {}
    wanted = {**EXPECTATIONS, **(CLUSTER_EXPECTATIONS if (result.get("brokers") or 1) > 1 else {})}
    return [name for name, ok in wanted.items() if name not in skipped and not ok(result.get(name))]


def _failover(cluster: Any, topic: str) -> dict[str, Any]:
    """Kill the leader of ``topic``'s partition, see leadership move (metadata), write and start it again, see
    the ISR grow back, read every acknowledged record."""
    from streamcert.harness.stack.kafka_clients import create_topic, produce, read_topic

    create_topic(cluster.bootstrap, topic)
    before = cluster.partition_state(topic)
    produce(cluster.bootstrap, topic, [(b"k", b"%d" % i) for i in range(100)], conf={"acks": "all"})
    old = cluster.leader_of(topic)
    cluster.nodes[old].kill()
    moved = wait_for(lambda: (state := cluster.partition_state(topic))["leader"] not in (old, -1) and state,
                     what=f"a new leader of {topic} after node {old} was killed", timeout=60, interval=0.3)
    acknowledged = 100 + produce(cluster.bootstrap, topic, [(b"k", b"%d" % i) for i in range(100, 200)],
                                 conf={"acks": "all"})
    cluster.nodes[old].start()
    restored = wait_for(lambda: (state := cluster.partition_state(topic))["isr"] and
                        len(state["isr"]) == len(before["replicas"]) and state,
                        what=f"node {old} back in the ISR of {topic}", timeout=90, interval=0.5)
    read = len(read_topic(cluster.bootstrap, topic))
    return {"leader_moves": [{"topic": topic, "partition": 0, "from": old, "to": moved["leader"],
                              "isr_after_kill": moved["isr"], "isr_restored": restored["isr"]}],
            "leader_moved": moved["leader"] != old, "isr_restored": True,
            "failover_records_lost": max(0, acknowledged - read)}


_KAFKA_STEPS = ("kafka_rtt_ms", "kafka_rtt_with_latency_toxic_ms", "proxy_down_produce_failed",
                "txn_committed_visible", "txn_aborted_visible")
_KAFKA_LINK_STEPS = ("kafka_rtt_with_latency_toxic_ms", "proxy_down_produce_failed")


def _not_applicable(env: Environment) -> dict[str, str]:
    """Steps this stack cannot run, with why: the external provider has what the user gave it."""
    skipped: dict[str, str] = {}
    if not env.endpoints.bootstrap_servers:
        skipped.update(dict.fromkeys(_KAFKA_STEPS, "no Kafka in this stack (STREAMCERT_KAFKA_BOOTSTRAP is unset)"))
    elif env.kafka_link is None:
        skipped.update(dict.fromkeys(_KAFKA_LINK_STEPS,
                                     "no Toxiproxy link in front of Kafka: the external provider routes only the "
                                     "database through your Toxiproxy (Kafka's advertised listeners are yours to "
                                     "set), so Kafka network faults are not available"))
    if not env.endpoints.postgres_dsn:
        skipped["pg_prepared_commit_ok"] = "no PostgreSQL in this stack (STREAMCERT_POSTGRES_DSN is unset)"
    return skipped


# -- Kafka ------------------------------------------------------------------------

def _round_trip_ms(bootstrap: str, topic: str, samples: int = 5) -> float:
    """Median time from produce() to the record arriving at a consumer already polling the topic."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(client_conf(bootstrap, **{"linger.ms": 0, "acks": "all"}))
    consumer = Consumer(client_conf(bootstrap, **{"group.id": f"smoke-{uuid.uuid4().hex}",
                                                  "enable.auto.commit": False, "fetch.wait.max.ms": 10}))
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, high)])
        timings = []
        for index in range(samples):
            marker = f"rtt-{uuid.uuid4().hex}".encode()
            began = time.perf_counter()
            producer.produce(topic, value=marker)
            producer.flush(30)
            wait_for(functools.partial(_arrived, consumer, marker), what=f"round-trip sample {index} on {topic!r}",
                     timeout=30, interval=0, error=StreamcertError,
                     hint="The record was acknowledged but not delivered; check the link's toxics and the broker.")
            timings.append((time.perf_counter() - began) * 1000)
        return round(statistics.median(timings), 2)
    finally:
        consumer.close()


def _arrived(consumer: Any, marker: bytes) -> bool:
    msg = consumer.poll(0.05)  # the poll itself waits: the probe needs no sleep between calls
    return msg is not None and msg.error() is None and msg.value() == marker


def _produce_fails_when_link_down(env: Environment, topic: str) -> bool:
    from confluent_kafka import Producer

    assert env.kafka_link is not None
    env.kafka_link.disable()
    try:
        producer = Producer(client_conf(env.endpoints.bootstrap_servers, **{
            "message.timeout.ms": 3000, "socket.connection.setup.timeout.ms": 1000}))
        outcome: list[Any] = []
        producer.produce(topic, value=b"must-fail", on_delivery=lambda err, _m: outcome.append(err))
        producer.flush(10)
        return bool(outcome) and outcome[0] is not None
    finally:
        env.kafka_link.enable()


def _transactions(bootstrap: str, topic: str) -> tuple[bool, bool]:
    """Commit one transaction and abort another; which of them does read_committed see?"""
    from confluent_kafka import Producer

    producer = Producer(client_conf(bootstrap, **{"transactional.id": f"smoke-{uuid.uuid4().hex}",
                                                  "transaction.timeout.ms": 60000}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)
    values = {value for _p, _o, _k, value in read_topic(bootstrap, topic, "read_committed")}
    return b"committed" in values, b"aborted" in values


# -- PostgreSQL -------------------------------------------------------------------

def _prepared_commit(dsn: str) -> bool:
    """PREPARE TRANSACTION on one connection, COMMIT PREPARED from another; is the row there?"""
    import psycopg

    gid = f"streamcert-smoke-{uuid.uuid4().hex}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table if not exists streamcert_smoke (gid text primary key)")
    with psycopg.connect(dsn) as writer:
        writer.execute("insert into streamcert_smoke values (%s)", (gid,))
        writer.execute(f"prepare transaction '{gid}'")
    with psycopg.connect(dsn, autocommit=True) as other:
        invisible_before = other.execute("select count(*) from streamcert_smoke where gid = %s",
                                         (gid,)).fetchone()[0] == 0
        other.execute(f"commit prepared '{gid}'")
        visible_after = other.execute("select count(*) from streamcert_smoke where gid = %s",
                                      (gid,)).fetchone()[0] == 1
    return invisible_before and visible_after


# -- Spark ------------------------------------------------------------------------

class CountingSource(DataSource):
    """A trivial streaming source of integers ``0 .. rows-1``.

    Options: ``rows`` (default 10), ``rowsPerBatch`` (default: all at once),
    ``readDelayMs`` (each partition's read sleeps this long first: makes a batch
    slow enough for a fault to land inside it).
    """

    @classmethod
    def name(cls) -> str:
        return "streamcert-counting"

    def schema(self) -> str:
        return "value long"

    def streamReader(self, schema) -> "DataSourceStreamReader":
        rows = int(self.options.get("rows", "10"))
        return _CountingReader(rows, int(self.options.get("rowsPerBatch", str(rows))),
                               int(self.options.get("readDelayMs", "0")))


class _CountingReader(DataSourceStreamReader):
    def __init__(self, rows: int, rows_per_batch: int, read_delay_ms: int) -> None:
        self.rows = rows
        self.rows_per_batch = rows_per_batch
        self.read_delay_ms = read_delay_ms

    def initialOffset(self) -> dict:
        return {"next": 0}

    def latestOffset(self, start=None, limit=None) -> dict:
        begin = (start or {"next": 0})["next"]
        return {"next": min(self.rows, begin + self.rows_per_batch)}

    def partitions(self, start: dict, end: dict):
        return [InputPartition((start["next"], end["next"], self.read_delay_ms))]

    def read(self, partition) -> Iterator[tuple]:
        low, high, delay_ms = partition.value
        if delay_ms:
            time.sleep(delay_ms / 1000)
        for value in range(low, high):
            yield (value,)


def _spark_batches(env: Environment, checkpoint: str) -> tuple[int, int]:
    spark = env.spark
    spark.dataSource.register(CountingSource)
    name = f"smoke_{uuid.uuid4().hex[:8]}"
    query = (spark.readStream.format(CountingSource.name()).option("rows", "10").load()
             .writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    batches = sum(1 for progress in query.recentProgress if progress.get("numInputRows", 0) > 0)
    rows = spark.sql(f"select count(*) from {name}").collect()[0][0]
    return batches, rows


# -- the run ----------------------------------------------------------------------

def run_smoke(provider: str = "auto", spark_master: str | None = None, spark_workers: int = 2,
              brokers: int = 1) -> dict[str, Any]:
    """Start the stack, run every step, tear down; return the measurements (never raises for a failed step)."""
    result: dict[str, Any] = {name: None for name in EXPECTATIONS}
    result["errors"] = {}
    result["skipped"] = {}
    spark_config = SparkConfig(master=spark_master or SparkConfig().master, workers=spark_workers)
    env = Environment(EnvironmentConfig(provider=provider, spark=spark_config, brokers=brokers))
    result["brokers"] = brokers
    began = time.monotonic()
    try:
        env.start()
        result["cold_start_s"] = round(time.monotonic() - began, 2)
        result["provider"] = env.provider
        result["orphans_reaped"] = env.reaped.as_dict() if env.reaped is not None else None
        result["endpoints"] = env.endpoints.as_dict()
        bootstrap = env.endpoints.bootstrap_servers
        topic = f"smoke-{uuid.uuid4().hex[:8]}"
        txn_topic = f"smoke-txn-{uuid.uuid4().hex[:8]}"

        result["skipped"] = _not_applicable(env)

        def step(name: str, action: Callable[[], Any]) -> Any:
            if name in result["skipped"]:
                return None
            try:
                return action()
            except Exception as exc:  # a failed step is a finding, reported with the rest
                result["errors"][name] = f"{type(exc).__name__}: {exc}"
                return None

        if bootstrap:
            step("create_topics", lambda: (create_topic(bootstrap, topic), create_topic(bootstrap, txn_topic)))
        result["kafka_rtt_ms"] = step("kafka_rtt_ms", lambda: _round_trip_ms(bootstrap, topic))

        def with_latency() -> float:
            assert env.kafka_link is not None
            name = env.kafka_link.add_toxic("latency", stream="downstream", latency=LATENCY_TOXIC_MS, jitter=0)
            try:
                return _round_trip_ms(bootstrap, topic, samples=3)
            finally:
                env.kafka_link.remove_toxic(name)

        result["kafka_rtt_with_latency_toxic_ms"] = step("kafka_rtt_with_latency_toxic_ms", with_latency)
        if "kafka_rtt_with_latency_toxic_ms" not in result["skipped"]:
            result["kafka_rtt_after_toxic_removed_ms"] = step("kafka_rtt_after",
                                                              lambda: _round_trip_ms(bootstrap, topic))
        result["proxy_down_produce_failed"] = step("proxy_down_produce_failed",
                                                   lambda: _produce_fails_when_link_down(env, topic))
        seen = None if bootstrap is None else step("transactions", lambda: _transactions(bootstrap, txn_topic))
        if seen is not None:
            result["txn_committed_visible"], result["txn_aborted_visible"] = seen
        result["pg_prepared_commit_ok"] = step("pg_prepared_commit_ok",
                                               lambda: _prepared_commit(env.endpoints.postgres_dsn))
        assert env.workdir is not None
        spark = step("spark_batches", lambda: _spark_batches(env, str(env.workdir / "smoke-checkpoint")))
        if spark is not None:
            result["spark_batches"], result["spark_rows"] = spark
        if brokers > 1:
            failover = step("failover", lambda: _failover(env.kafka, f"smoke-failover-{uuid.uuid4().hex[:8]}"))
            result.update(failover or {})
        if env.spark_cluster is not None:
            result["spark_master"] = env.spark_cluster.url
            result["spark_workers"] = step("spark_workers", lambda: [
                {"id": worker.get("id"), "address": f"{worker.get('host')}:{worker.get('port')}",
                 "cores": worker.get("cores"), "state": worker.get("state")}
                for worker in env.spark_cluster.alive_workers()])
    except Exception as exc:
        result["errors"]["start"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        env.stop()
        result["leftover_processes"] = env.leftover_processes()
        result["total_s"] = round(time.monotonic() - began, 2)
    return result
