"""Event-time alignment against a real broker: the time probe's answers match what the workload wrote (aborted
records skipped under read_committed), and the reader's batches never reach past another partition's next record
by more than the drift, also for a reader started from a checkpoint's offsets."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from streamcert.connectors.kafka_offsets import from_json, to_json
from streamcert.connectors.kafka_options import parse_source_options
from streamcert.connectors.kafka_source import KafkaStreamReader, ReadAllAvailable
from streamcert.connectors.kafka_time_probe import KafkaTimeProbe
from streamcert.harness.run.workload import WorkloadSpec, load_topic
from streamcert.harness.stack.kafka_clients import create_topic

pytestmark = pytest.mark.integration

STEP, LEAD, DRIFT = 1_000, 120_000, 30_000


@pytest.fixture
def skewed(stack):
    """A topic of three partitions, 80 records each 1 s apart in event time, the last partition 2 min ahead; a tenth
    of the transactions aborted."""
    topic = f"skew-{uuid.uuid4().hex[:8]}"
    bootstrap = stack.endpoints.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    spec = WorkloadSpec(total=240, keys=3, partitions=3, aborted_fraction=0.1, transaction_records=10, seed=7,
                        event_time_step_ms=STEP, event_time_lead_ms=LEAD)
    ledger = load_topic(bootstrap, topic, spec).frame
    return bootstrap, topic, ledger


def _committed(ledger: pd.DataFrame) -> pd.DataFrame:
    return ledger[ledger["status"] == "acked"].sort_values(["partition", "offset"])


def test_the_probe_answers_with_the_timestamps_the_workload_wrote(skewed):
    bootstrap, topic, ledger = skewed
    committed = _committed(ledger)
    probe = KafkaTimeProbe(bootstrap, "read_committed", {}, 30.0)
    try:
        first = committed.groupby("partition").head(1)
        ends = ledger.groupby("partition")["offset"].max() + 2
        heads = probe.head_times({(topic, int(p)): (0, int(ends[p])) for p in first["partition"]})
        assert heads == {(topic, int(r.partition)): int(r.event_time) for r in first.itertuples()}
        last = committed.groupby("partition").tail(1)
        lasts = probe.last_times({(topic, int(r.partition)): int(r.offset) + 1 for r in last.itertuples()})
        assert lasts == {(topic, int(r.partition)): int(r.event_time) for r in last.itertuples()}
        # the cut past a time: the first record stamped later, aborted ones and markers included (a reader skips
        # them); the broker's time index stops at a transaction marker here (stamped when the load ran, after
        # every event time), so the probe reads its way to it
        middle = committed[committed["partition"] == 2].iloc[40]
        later = ledger[(ledger["partition"] == 2) & (ledger["event_time"] > middle.event_time)]["offset"].min()
        span = {(topic, 2): (0, int(ends[2]))}
        assert probe.first_offsets_after({(topic, 2): int(middle.event_time)}, span) == {(topic, 2): int(later)}
        assert probe.first_offsets_after({(topic, 2): int(middle.event_time)}, span, scan_limit=10) == {
            (topic, 2): 10}  # a batch of at most 10 records of it reads no further
        assert probe.first_offsets_after({(topic, 2): 2 ** 62}, span) == {}  # nothing stamped past the cap
    finally:
        probe.close()


def _committed_read(ledger: pd.DataFrame, partition: int, begin: int, end: int) -> int:
    """Committed records of ``partition`` in ``[begin, end)`` (a cut may pass aborted records: none is emitted)."""
    committed = _committed(ledger)
    rows = committed[committed["partition"] == partition]
    return int(((rows["offset"] >= begin) & (rows["offset"] < end)).sum())


def _batches(reader: KafkaStreamReader, start: dict, count: int) -> list[tuple[dict, dict]]:
    batches = []
    for _ in range(count):
        end = reader.latestOffset(start, ReadAllAvailable())
        batches.append((from_json(start), from_json(end)))
        start = end
    return batches


def _check_bound(topic: str, ledger: pd.DataFrame, batches: list[tuple[dict, dict]]) -> int:
    """Every record a batch reads is within DRIFT of each other partition's next committed record at its start;
    returns how many batches read something."""
    committed = _committed(ledger)
    reading = 0
    for begin, end in batches:
        heads = {}
        for partition, rows in committed.groupby("partition"):
            unread = rows[rows["offset"] >= begin[topic].get(int(partition), 0)]
            if len(unread):  # input left: it holds the others at its next record
                heads[int(partition)] = int(unread["event_time"].iloc[0])
        for partition, rows in committed.groupby("partition"):
            read = rows[(rows["offset"] >= begin[topic].get(int(partition), 0))
                        & (rows["offset"] < end[topic][int(partition)])]
            others = [head for other, head in heads.items() if other != int(partition)]
            if len(read) and others:
                assert read["event_time"].max() <= min(others) + DRIFT, (partition, begin, end)
        reading += any(end[topic][p] > begin[topic].get(p, 0) for p in end[topic])
    return reading


def test_batches_hold_the_leading_partition_back_and_drain_everything(skewed):
    bootstrap, topic, ledger = skewed
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                    "maxAllowedDriftMs": str(DRIFT), "idleTimeoutMs": "0"})
    reader = KafkaStreamReader(options)
    start = reader.initialOffset()
    batches = _batches(reader, start, 12)
    first_begin, first_end = batches[0]
    # two minutes ahead of a 30 s drift: held back at first
    assert _committed_read(ledger, 2, first_begin[topic][2], first_end[topic][2]) == 0
    assert _check_bound(topic, ledger, batches) >= 2
    assert batches[-1][1] == from_json(to_json(reader._broker_offsets("latest")))  # idle ones let the rest go


def test_a_reader_started_from_a_checkpoint_keeps_the_bound(skewed):
    bootstrap, topic, ledger = skewed
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                    "maxAllowedDriftMs": str(DRIFT), "idleTimeoutMs": "60000"})
    committed = _committed(ledger)
    # as a checkpoint left it: partitions 0 and 1 read up to their 30th record, partition 2 not at all
    resumed = {topic: {0: int(committed[committed["partition"] == 0]["offset"].iloc[30]),
                       1: int(committed[committed["partition"] == 1]["offset"].iloc[30]), 2: 0}}
    batches = _batches(KafkaStreamReader(options), to_json(resumed), 3)
    assert _check_bound(topic, ledger, batches) >= 1
    # still 90 s behind partition 2's first record: held back
    assert _committed_read(ledger, 2, 0, batches[0][1][topic][2]) == 0
