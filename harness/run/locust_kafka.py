"""Locustfile: Kafka producer users that send the workload open-loop at its target rate.

Runs only inside the locust subprocesses that :func:`streamcert.harness.run.load.run_open_loop`
starts (``python -m locust -f harness/locust_kafka.py``): importing this module
imports locust, which monkey-patches the process with gevent, so nothing in the
harness imports it. The process's :class:`~streamcert.harness.run.load.LoadParams` and the slice
of the plan to send (written by the parent) are read when locust imports it.

Schedule: each user first warms its producer up: the topic's metadata and, with
idempotence, the producer id, which librdkafka only asks for after about half a
second (the first records would wait for both). When every user of every process is warm
(:mod:`~streamcert.harness.run.start_line`) the schedule starts, and record ``id`` is due ``id / rate``
seconds later whichever user sends it; locust's statistics restart then too. Sending never waits for
acks (open loop); a user that falls behind sends everything overdue at once.
Once the process's share of the slice (``min(total, ceil(rate * duration))`` records) is sent its test
stops, even if locust's run time is not over.

Ownership: with ``U`` users over all processes, user ``u`` sends the records of the keys with
``key_index % U == u``, in id order, through its own idempotent producer. Each
key has exactly one producer, which keeps the key's records in order on its
partition, so the plan's per-key ``seq`` holds for what is produced: a stop
cuts every key after a prefix of its records.

Statistics: every record's produce and ack times go to the ledger (the parent computes rate and latency
from it). Locust sees one ``kafka``/``acks`` request per batch of delivery reports a poll served (its
response time the batch's slowest produce-to-ack, its length the batch's bytes): a locust request per
record cost more than producing the record. When the test stops the producers are flushed, then the
ledger (Parquet; records never sent are not in it) is written where the parameters say.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from pathlib import Path

import gevent
import numpy as np
import pandas as pd
from confluent_kafka import KafkaException, Producer
from locust import User, events, task

from streamcert.harness.errors import ConfigurationError, StreamcertError
from streamcert.harness.stack.kafka_clients import client_conf
from streamcert.harness.run import start_line
from streamcert.harness.run.load import PARAMS_VAR, LoadParams
from streamcert.harness.run.workload import Deliveries, Ledger, encode_value, record_id_of
from streamcert.harness.waiting import wait_for

__all__ = ["KafkaProducerUser"]

# Longest sleep between two polls of a producer, so delivery reports reach the statistics while a user idles.
_MAX_WAIT_S = 0.05
# How long to back off when the producer's queue is full (BufferError) before trying again.
_FULL_QUEUE_WAIT_S = 0.002
# How often a warming-up user polls its producer for the producer id (gevent sleeps in between).
_WARM_UP_POLL_S = 0.01
# librdkafka's statistics are how a producer tells it has its producer id; often enough to start promptly.
_STATS_INTERVAL_MS = 100
# Locust's exit code when user code raised: the run is broken, unlike records that failed (measured outcomes).
_EXIT_USER_ERRORS = 3


class _Run:
    """The plan, the schedule and every record's fate, shared by this process's users."""

    def __init__(self, params: LoadParams) -> None:
        self.params = params
        self.spec = params.workload()
        # The parent's slice of the plan: ids 0..n-1 in order, so an id is also its row here.
        self.frame = pd.read_parquet(params.plan_path)
        n = len(self.frame)
        # Python lists: the send loop indexes them once per record, and a numpy scalar costs a conversion each.
        self.keys = [k.encode() for k in self.frame["key"].to_numpy()]
        self.seqs = self.frame["seq"].to_numpy().tolist()
        self.partitions = self.frame["partition"].to_numpy().tolist()
        owners = self.frame["key_index"].to_numpy() % params.users
        self.local_users = params.local_users()
        self.slices = [np.flatnonzero(owners == u).tolist() for u in self.local_users]
        self.deliveries = Deliveries(n)
        self.started_at: float | None = None
        self.producers: list[Producer] = []
        self.warm_users = 0
        self.finished_users = 0
        self.stopped = False
        self._user_numbers = itertools.count()

    @classmethod
    def from_environment(cls) -> "_Run":
        path = os.environ.get(PARAMS_VAR)
        if not path:
            raise ConfigurationError(f"This locustfile needs {PARAMS_VAR} naming its parameters file.",
                                     hint="Run it through streamcert.harness.run.load.run_open_loop, not by hand.")
        return cls(LoadParams.read(path))

    def claim_slice(self) -> list[int]:
        """The ids of the next user's keys (empty for users beyond the planned count)."""
        number = next(self._user_numbers)
        return self.slices[number] if number < len(self.slices) else []

    def user_warm(self, environment) -> None:
        """Called by each user once its producer is warm; the last one goes to the start line."""
        self.warm_users += 1
        if self.warm_users == len(self.local_users):
            gevent.spawn(self._start_together, environment)

    def _start_together(self, environment) -> None:
        """Wait (in its own greenlet) for the other processes' users, then start the schedule."""
        start_line.arrive(Path(self.params.start_line_dir), self.params.process_index)
        try:
            started_at = start_line.start_time(Path(self.params.start_line_dir), self.params.processes,
                                               self.params.warm_up_timeout_s)
        except StreamcertError as exc:
            logging.getLogger(__name__).error("%s", exc)  # to the locust log, which the parent shows
            environment.process_exit_code = _EXIT_USER_ERRORS
            environment.runner.quit()
            return
        # The achieved rate is measured from here: warming up is not part of the load.
        environment.runner.stats.reset_all()
        self.started_at = started_at

    def due(self, record_id: int) -> float:
        return self.started_at + record_id / self.spec.rate

    def ledger(self) -> Ledger:
        """The records sent (a failed delivery may still have been written: those are ``indeterminate``)."""
        sent = np.flatnonzero(~np.isnan(self.deliveries.produced_at))
        return Ledger.from_deliveries(self.frame, self.deliveries, self.spec, self.params.topic, rows=sent)


_RUN = _Run.from_environment()


class _AckTally:
    """The delivery reports one poll served, reported to locust as one request."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.records = self.length = 0
        self.slowest_ms = 0.0
        self.error: Exception | None = None

    def add(self, latency_ms: float, length: int, error: Exception | None) -> None:
        self.records += 1
        self.length += length
        if latency_ms > self.slowest_ms:
            self.slowest_ms = latency_ms
        if error is not None and self.error is None:
            self.error = error

    def report(self, events_) -> None:
        """Fire one locust request for the tallied reports (none: nothing), then start a new tally."""
        if self.records:
            events_.request.fire(request_type="kafka", name="acks", response_time=self.slowest_ms,
                                 response_length=self.length, exception=self.error, context={})
            self._clear()


class KafkaProducerUser(User):
    """One producer sending its keys' records when the schedule says, reporting its acks to locust."""

    def on_start(self) -> None:
        """Called by locust in this user's greenlet before its first task: claim keys, open and warm the producer."""
        self._ids = _RUN.claim_slice()
        self._cursor = 0
        self._queue_full = False
        self._finished = False
        self._tally = _AckTally()
        # linger.ms 5 is librdkafka's default, stated here because the measured latency includes it.
        conf = {"linger.ms": 5, "acks": "all", "enable.idempotence": True, **_RUN.params.producer_conf}
        self._has_producer_id = str(conf["enable.idempotence"]).lower() in ("false", "0")
        conf.update({"statistics.interval.ms": _STATS_INTERVAL_MS, "stats_cb": self._on_stats})
        self._producer = Producer(client_conf(_RUN.params.bootstrap, **conf))
        _RUN.producers.append(self._producer)
        self._warm_up()
        _RUN.user_warm(self.environment)

    def _warm_up(self) -> None:
        """Fetch the topic's metadata and wait for the producer id; raises if the broker does not answer."""
        timeout = _RUN.params.warm_up_timeout_s
        deadline = time.monotonic() + timeout
        # Blocks the gevent hub briefly, once per user.
        self._producer.list_topics(_RUN.params.topic, timeout=timeout)
        if self._has_producer_id:
            return

        def has_producer_id() -> bool:
            self._producer.poll(0)  # the statistics callback that tells comes from here
            return self._has_producer_id

        # locust monkey-patched time.sleep, so the waits between probes are gevent's and the other users run.
        wait_for(has_producer_id, what=f"producer id from {_RUN.params.bootstrap}",
                 timeout=max(deadline - time.monotonic(), 0.0), interval=_WARM_UP_POLL_S,
                 hint="Check the broker and the Kafka link.")

    def _on_stats(self, stats_json: str) -> None:
        """Called by librdkafka's statistics, inside ``poll`` of this process, until the producer id is known."""
        if not self._has_producer_id:
            self._has_producer_id = json.loads(stats_json).get("eos", {}).get("idemp_state") == "Assigned"

    def wait_time(self) -> float:
        """Called by locust after each task: sleep until the next record is due (polling at least every 50 ms)."""
        if self._queue_full:
            return _FULL_QUEUE_WAIT_S
        if _RUN.started_at is None or self._cursor >= len(self._ids):
            return _MAX_WAIT_S
        return min(max(_RUN.due(self._ids[self._cursor]) - time.time(), 0.0), _MAX_WAIT_S)

    @task
    def send_due(self) -> None:
        """Send every record due by now, serve delivery reports, and end the test after the last user's last send."""
        self._queue_full = False
        if _RUN.started_at is None:
            self._producer.poll(0)
            return
        self._queue_full = not self._send_due(time.time())
        self._producer.poll(0)
        self._tally.report(self.environment.events)
        if self._cursor >= len(self._ids) and not self._finished:
            self._finished = True
            _RUN.finished_users += 1
            if _RUN.finished_users == len(_RUN.local_users):
                # From another greenlet: a user that quits the runner from its own would be killed mid-stop.
                gevent.spawn(self.environment.runner.quit)

    def _send_due(self, now: float) -> bool:
        """Produce every record due by ``now``; False when the producer's queue filled up first (the rest waits
        for this user's next task, which wait_time brings soon, without blocking the event loop).

        The hot loop of the generator: one produce call per record and nothing else it can do without.
        """
        ids, cursor, due_by = self._ids, self._cursor, (now - _RUN.started_at) * _RUN.spec.rate
        produce, topic, keys, partitions = self._producer.produce, _RUN.params.topic, _RUN.keys, _RUN.partitions
        seqs, record_bytes, produced_at = _RUN.seqs, _RUN.spec.record_bytes, _RUN.deliveries.produced_at
        on_delivery, clock = self._on_delivery, time.time
        try:
            while cursor < len(ids) and ids[cursor] <= due_by:
                record_id = ids[cursor]
                at = clock()
                value = encode_value(record_id, seqs[record_id], at, record_bytes)
                try:
                    produce(topic, value=value, key=keys[record_id], partition=partitions[record_id],
                            on_delivery=on_delivery)
                except BufferError:
                    return False
                except KafkaException as exc:
                    # Refused before it was queued (too large, unknown topic...): count it and move on, open loop.
                    _RUN.deliveries.sent(record_id, at)
                    _RUN.deliveries.report(record_id, exc, None, np.nan)
                    self._tally.add(0.0, len(value), exc)
                else:
                    produced_at[record_id] = at
                cursor += 1
            return True
        finally:
            self._cursor = cursor

    def _on_delivery(self, err, msg) -> None:
        """Called by librdkafka's delivery report, inside ``poll``/``flush`` of this process, once per record."""
        value = msg.value()
        record_id = record_id_of(value)
        produced_at = _RUN.deliveries.produced_at[record_id]
        latency = msg.latency()
        if latency is None:
            latency = time.time() - produced_at
        _RUN.deliveries.report(record_id, err, msg.offset(), produced_at + latency)
        self._tally.add(latency * 1000.0, len(value) + len(msg.key() or b""),
                        None if err is None else KafkaException(err))


@events.user_error.add_listener
def _on_user_error(user_instance, exception, tb, **_kwargs) -> None:
    """Called by locust when user code raised (a producer that cannot start, a bug): the run is void, end it now."""
    environment = user_instance.environment
    environment.process_exit_code = _EXIT_USER_ERRORS
    gevent.spawn(environment.runner.quit)


@events.test_stop.add_listener
def _on_test_stop(environment, **_kwargs) -> None:
    """Called by locust once the users have stopped: flush, then write the ledger."""
    if _RUN.stopped:
        return
    _RUN.stopped = True
    deadline = time.monotonic() + _RUN.params.flush_timeout_s
    for producer in _RUN.producers:
        producer.flush(max(deadline - time.monotonic(), 0.0))
    _RUN.ledger().write(_RUN.params.ledger_path)
