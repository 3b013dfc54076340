"""Locustfile: Kafka producer users that send the workload open-loop at its target rate.

Runs only inside the locust subprocess that :func:`streamcert.harness.run.load.run_open_loop`
starts (``python -m locust -f harness/locust_kafka.py``): importing this module
imports locust, which monkey-patches the process with gevent, so nothing in the
harness imports it. The run's :class:`~streamcert.harness.run.load.LoadParams` and the slice
of the plan to send (written by the parent) are read when locust imports it.

Schedule: each user first warms its producer up: the topic's metadata and, with
idempotence, the producer id, which librdkafka only asks for after about half a
second (the first records would wait for both). When every user is warm the
schedule starts, and record ``id`` is due ``id / rate`` seconds later whichever
user sends it; locust's statistics restart then too. Sending never waits for
acks (open loop); a user that falls behind sends everything overdue at once.
Once the slice (``min(total, ceil(rate * duration))`` records) is sent the test
stops, even if locust's run time is not over.

Ownership: with ``U`` users, user ``u`` sends the records of the keys with
``key_index % U == u``, in id order, through its own idempotent producer. Each
key has exactly one producer, which keeps the key's records in order on its
partition, so the plan's per-key ``seq`` holds for what is produced: a stop
cuts every key after a prefix of its records.

Statistics: each delivery report is one locust request ``kafka``/``produce``;
its response time is librdkafka's produce-to-ack latency, not the moment the
report was polled. When the test stops the producers are flushed, then the
final request statistics (locust's ``_stats.csv`` format) and the ledger
(Parquet; records never sent are not in it) are written where the parameters
say.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import time

import gevent
import numpy as np
import pandas as pd
from confluent_kafka import KafkaException, Producer
from locust import User, events, task
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.kafka_clients import client_conf
from streamcert.harness.run.load import PARAMS_VAR, LoadParams
from streamcert.harness.run.workload import Deliveries, Ledger, encode_value, produce_record, record_id_of
from streamcert.harness.waiting import wait_for

__all__ = ["KafkaProducerUser"]

# Longest sleep between two polls of a producer, so delivery reports reach the statistics while a user idles.
_MAX_WAIT_S = 0.05
# How long to back off when the producer's queue is full (BufferError) before trying again.
_FULL_QUEUE_WAIT_S = 0.002
_WARM_UP_TIMEOUT_S = 30.0
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
        self.keys = [k.encode() for k in self.frame["key"].to_numpy()]
        self.seqs = self.frame["seq"].to_numpy()
        self.partitions = self.frame["partition"].to_numpy()
        owners = self.frame["key_index"].to_numpy() % params.users
        self.slices = [np.flatnonzero(owners == u) for u in range(params.users)]
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

    def claim_slice(self) -> np.ndarray:
        """The ids of the next user's keys (empty for users beyond the planned count)."""
        number = next(self._user_numbers)
        return self.slices[number] if number < len(self.slices) else np.empty(0, dtype=np.int64)

    def user_warm(self, environment) -> None:
        """Called by each user once its producer is warm; the last one starts the schedule."""
        self.warm_users += 1
        if self.warm_users == self.params.users:
            # The achieved rate is measured from here: warming up is not part of the load.
            environment.runner.stats.reset_all()
            self.started_at = time.time()

    def due(self, record_id: int) -> float:
        return self.started_at + record_id / self.spec.rate

    def ledger(self) -> Ledger:
        """The records sent (a failed delivery may still have been written: those are ``indeterminate``)."""
        sent = np.flatnonzero(~np.isnan(self.deliveries.produced_at))
        return Ledger.from_deliveries(self.frame, self.deliveries, self.spec, self.params.topic, rows=sent)


_RUN = _Run.from_environment()


class KafkaProducerUser(User):
    """One producer sending its keys' records when the schedule says, reporting each ack to locust."""

    def on_start(self) -> None:
        """Called by locust in this user's greenlet before its first task: claim keys, open and warm the producer."""
        self._ids = _RUN.claim_slice()
        self._cursor = 0
        self._queue_full = False
        self._finished = False
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
        deadline = time.monotonic() + _WARM_UP_TIMEOUT_S
        # Blocks the gevent hub briefly, once per user.
        self._producer.list_topics(_RUN.params.topic, timeout=_WARM_UP_TIMEOUT_S)
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
        return min(max(_RUN.due(int(self._ids[self._cursor])) - time.time(), 0.0), _MAX_WAIT_S)

    @task
    def send_due(self) -> None:
        """Send every record due by now, serve delivery reports, and end the test after the last user's last send."""
        self._queue_full = False
        if _RUN.started_at is None:
            self._producer.poll(0)
            return
        now = time.time()
        while self._cursor < len(self._ids) and _RUN.due(int(self._ids[self._cursor])) <= now:
            if not self._send(int(self._ids[self._cursor])):
                self._queue_full = True
                break
            self._cursor += 1
        self._producer.poll(0)
        if self._cursor >= len(self._ids) and not self._finished:
            self._finished = True
            _RUN.finished_users += 1
            if _RUN.finished_users == _RUN.params.users:
                # From another greenlet: a user that quits the runner from its own would be killed mid-stop.
                gevent.spawn(self.environment.runner.quit)

    def _send(self, record_id: int) -> bool:
        """Produce one record; False when the producer's queue is full (try again later, same record)."""
        now = time.time()
        value = encode_value(record_id, int(_RUN.seqs[record_id]), now, _RUN.spec.record_bytes)
        try:
            # Tried once: a full queue is served by this user's next task (wait_time), not by blocking here.
            produce_record(self._producer, _RUN.params.topic, value, _RUN.keys[record_id],
                           int(_RUN.partitions[record_id]), self._on_delivery)
        except BufferError:
            return False
        except KafkaException as exc:
            # Refused before it was queued (too large, unknown topic...): count it and move on, open loop.
            _RUN.deliveries.sent(record_id, now)
            _RUN.deliveries.report(record_id, exc, None, np.nan)
            self._report(0.0, len(value), exc)
            return True
        _RUN.deliveries.sent(record_id, now)
        return True

    def _on_delivery(self, err, msg) -> None:
        """Called by librdkafka's delivery report, inside ``poll``/``flush`` of this process."""
        record_id = record_id_of(msg.value())
        produced_at = _RUN.deliveries.produced_at[record_id]
        latency = msg.latency()
        if latency is None:
            latency = time.time() - produced_at
        _RUN.deliveries.report(record_id, err, msg.offset(), produced_at + latency)
        self._report(latency * 1000.0, len(msg.value()) + len(msg.key() or b""),
                     None if err is None else KafkaException(err))

    def _report(self, response_time_ms: float, length: int, exception: Exception | None) -> None:
        self.environment.events.request.fire(request_type="kafka", name="produce", response_time=response_time_ms,
                                             response_length=length, exception=exception, context={})


@events.user_error.add_listener
def _on_user_error(user_instance, exception, tb, **_kwargs) -> None:
    """Called by locust when user code raised (a producer that cannot start, a bug): the run is void, end it now."""
    environment = user_instance.environment
    environment.process_exit_code = _EXIT_USER_ERRORS
    gevent.spawn(environment.runner.quit)


@events.test_stop.add_listener
def _on_test_stop(environment, **_kwargs) -> None:
    """Called by locust once the users have stopped: flush, then write the statistics and the ledger."""
    if _RUN.stopped:
        return
    _RUN.stopped = True
    deadline = time.monotonic() + _RUN.params.flush_timeout_s
    for producer in _RUN.producers:
        producer.flush(max(deadline - time.monotonic(), 0.0))
    # Locust's own _stats.csv is rewritten once a second and may miss the acks of this last flush.
    with open(_RUN.params.stats_path, "w", newline="") as handle:
        StatsCSV(environment, PERCENTILES_TO_REPORT).requests_csv(csv.writer(handle))
    _RUN.ledger().write(_RUN.params.ledger_path)
