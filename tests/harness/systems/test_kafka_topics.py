"""The stack's Kafka as an SPI system on the real broker: its writer's committed and aborted writes, read back
through the SPI's reader interface as a read_committed user reads them, and its leftovers."""

from __future__ import annotations

import time
import uuid

import pytest

from streamcert.harness.systems import KafkaTopics
from streamcert.harness.systems.resolve import stack_addresses
from streamcert.spi.external import InputRecord

pytestmark = pytest.mark.integration


def _read_until(reader, count: int, timeout: float = 30.0) -> list:
    seen, deadline = [], time.monotonic() + timeout
    while len(seen) < count and time.monotonic() < deadline:
        seen.extend(reader.read_new())
    return seen


def test_a_reader_sees_the_writer_s_committed_writes_in_order_and_never_its_aborted_one(stack):
    kafka = KafkaTopics().bound(stack_addresses(stack, stack.endpoints.bootstrap_servers))
    topic = f"systems-{uuid.uuid4().hex[:8]}"
    writer = kafka.writer(topic, kafka.direct())
    writer.prepare(1)
    try:
        writer.write([InputRecord(b"k", b"first"), InputRecord(b"k", b"second")])
        writer.write([InputRecord(b"k", b"aborted")], commit=False)
        writer.write([InputRecord(b"k", b"third")])
    finally:
        writer.close()
    reader = kafka.reader(topic, kafka.direct())
    try:
        seen = _read_until(reader, 3)
        time.sleep(0.5)
        seen.extend(reader.read_new())
        assert [r.value for r in seen] == [b"first", b"second", b"third"]
        assert [r.location["partition"] for r in seen] == [0, 0, 0] and seen[0].key == b"k"
        left = reader.leftovers()
        assert list(left.found) == [] and left.counts["open_transactions"] == 0
    finally:
        reader.close()
