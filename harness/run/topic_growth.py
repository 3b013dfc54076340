"""Waiting for an input topic to gain the partitions a workload writes into once they exist (SRC-5).

The workload's load (:func:`~streamcert.harness.run.workload.load_topic`) calls a :class:`TopicGrowth` at the first
transaction that writes into a partition the topic was not created with; the run's ``add_partitions`` fault adds them.
Runs in the harness's process, on the load's thread, while the run's faults happen on the timeline's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["TopicGrowth"]


class TopicGrowth:
    """``growth(count)``: block until ``topic`` has ``count`` partitions, each with a leader (True), or give up
    (False) once ``give_up()`` says the run's faults are over and a last look still finds fewer, or after
    ``timeout_s``: a run whose schedule never grows the topic ends its load there (its ledger holds what was
    written, and no record into an added partition is a missing witness, never a hang)."""

    def __init__(self, bootstrap: str, topic: str, give_up: Callable[[], bool] = lambda: False,
                 timeout_s: float = 600.0, poll_s: float = 0.2) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.give_up, self.timeout_s, self.poll_s = give_up, timeout_s, poll_s
        #: when the topic was seen with every partition (epoch seconds), or None
        self.grown_at: float | None = None
        self._admin = None

    def __call__(self, count: int) -> bool:
        deadline = time.monotonic() + self.timeout_s
        while True:
            giving_up = self.give_up() or time.monotonic() >= deadline
            if self._led(count):
                self.grown_at = time.time()
                return True
            if giving_up:
                return False
            time.sleep(self.poll_s)

    def _led(self, count: int) -> bool:
        from streamcert.harness.stack.kafka_clients import client_conf, partition_leaders

        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(client_conf(self.bootstrap, **{"socket.timeout.ms": 5000}))
        leaders = partition_leaders(self.bootstrap, self.topic, admin=self._admin)
        return len(leaders) >= count and all(leader >= 0 for leader in leaders.values())
