"""The workload: reproducible plans, the value header, the ledger, and a real bulk load."""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.kafka_clients import create_topic, read_topic
from confluent_kafka import KafkaError, KafkaException

from streamcert.harness.run.workload import (HEADER_BYTES, Deliveries, Ledger, WorkloadSpec, _end_transaction,
                                             decode_values, encode_value, load_topic, plan, produce_record,
                                             record_id_of)


def test_same_seed_same_plan_other_seed_other_plan():
    spec = WorkloadSpec(total=5000, keys=50, partitions=3, aborted_fraction=0.2, transaction_records=10, seed=7)
    pd.testing.assert_frame_equal(plan(spec), plan(spec))
    other = plan(WorkloadSpec(total=5000, keys=50, partitions=3, aborted_fraction=0.2, transaction_records=10,
                              seed=8))
    assert not plan(spec)["key"].equals(other["key"])


def test_committed_seqs_are_contiguous_per_key_and_aborted_have_none():
    frame = plan(WorkloadSpec(total=20_000, keys=100, aborted_fraction=0.3, transaction_records=50, seed=1))
    committed = frame[~frame["aborted"]]
    for _key, group in committed.groupby("key"):
        assert group["seq"].tolist() == list(range(len(group)))
    assert (frame.loc[frame["aborted"], "seq"] == -1).all()
    # whole transactions are aborted, about the requested share of them
    per_txn = frame.groupby("txn")["aborted"].agg(["min", "max"])
    assert (per_txn["min"] == per_txn["max"]).all()
    assert 0.2 < per_txn["min"].mean() < 0.4


def test_a_key_always_maps_to_one_partition():
    frame = plan(WorkloadSpec(total=5000, keys=30, partitions=4))
    assert (frame.groupby("key")["partition"].nunique() == 1).all()


def test_zipf_skew_concentrates_on_the_first_keys():
    uniform = plan(WorkloadSpec(total=50_000, keys=100, skew="uniform"))["key_index"].value_counts()
    zipf = plan(WorkloadSpec(total=50_000, keys=100, skew="zipf", zipf_exponent=1.2))["key_index"].value_counts()
    assert zipf[0] > 5 * uniform.max()
    assert zipf.idxmax() == 0


@pytest.mark.parametrize("option, value, needle", [
    ("total", 0, "total=0"), ("skew", "pareto", "uniform or zipf"), ("record_bytes", 10, str(HEADER_BYTES)),
    ("aborted_fraction", 1.0, "[0, 1)"), ("rate", -5.0, "rate=-5.0"), ("partitions", 0, "partitions=0"),
    ("added_partitions", -1, ">= 0"),
])
def test_bad_options_name_the_option_and_what_is_allowed(option, value, needle):
    with pytest.raises(ConfigurationError) as info:
        WorkloadSpec(**{option: value}).validate()
    assert needle in str(info.value) and "Hint:" in str(info.value)


def test_added_partitions_take_their_keys_records_to_the_end_and_change_nothing_without_them():
    base = {"total": 2000, "keys": 24, "partitions": 3, "aborted_fraction": 0.1, "transaction_records": 50, "seed": 9}
    assert plan(WorkloadSpec(**base)).equals(plan(WorkloadSpec(**base, added_partitions=0)))
    grown = plan(WorkloadSpec(**base, added_partitions=1))
    added = grown["partition"].to_numpy() >= 3
    first = int(np.argmax(added))
    assert 0 < first and added[first:].all() and not added[:first].any()
    assert set(grown["partition"]) == {0, 1, 2, 3} and grown.groupby("key")["partition"].nunique().max() == 1
    committed = grown[grown["seq"] >= 0]
    assert (committed.groupby("key")["seq"].apply(lambda seqs: list(seqs) == list(range(len(seqs))))).all()
    with pytest.raises(ConfigurationError):
        WorkloadSpec(**base, added_partitions=1, event_time_step_ms=10).validate()


def test_value_header_round_trips_and_garbage_decodes_to_minus_one():
    values = [encode_value(12345, 17, 1_700_000_000.123456, 100), encode_value(0, -1, 1.5, HEADER_BYTES),
              b"not ours", None, b"SC1" + b"9" * 44 + b"!"]
    assert len(values[0]) == 100 and len(values[1]) == HEADER_BYTES
    decoded = decode_values(values)
    assert decoded["id"].tolist() == [12345, 0, -1, -1, -1]
    assert decoded["seq"].tolist() == [17, -1, -1, -1, -1]
    assert decoded["produced_at"].iloc[0] == pytest.approx(1_700_000_000.123456, abs=1e-6)


def test_ledger_round_trips_through_parquet_with_its_spec(tmp_path):
    spec = WorkloadSpec(total=10, keys=2)
    frame = pd.DataFrame({"id": np.arange(3), "key": ["a", "b", "a"], "seq": [0, 0, 1], "partition": [0, 1, 0],
                          "offset": [0, 0, 1], "produced_at": [1.0, 2.0, 3.0], "acked_at": [1.1, 2.1, np.nan],
                          "aborted": [False, False, False], "status": ["acked", "acked", "indeterminate"]})
    path = Ledger(frame, spec, "topic-a").write(tmp_path / "ledger.parquet")
    back = Ledger.read(path)
    pd.testing.assert_frame_equal(back.frame, frame)
    assert back.spec == spec and back.topic == "topic-a"
    checked = back.for_checkers()
    # indeterminate records go to the checkers too, with their status: known, never owed
    assert checked["id"].tolist() == [0, 1, 2]
    assert list(checked.columns) == ["id", "key", "seq", "produced_at", "aborted", "status"]
    assert checked["status"].tolist() == ["acked", "acked", "indeterminate"]


def test_ledger_from_deliveries_gives_each_record_its_status():
    records = plan(WorkloadSpec(total=6, keys=2, partitions=2))
    deliveries = Deliveries(6)
    for record_id in range(5):  # record 5 is never sent
        deliveries.sent(record_id, 10.0 + record_id)
    deliveries.report(0, None, 7, 20.0)
    deliveries.report(1, "timed out", None, 21.0)  # a failed report: maybe written, maybe not
    deliveries.report(2, None, 8, 22.0)
    deliveries.report(3, None, 9, 23.0)  # acked, but in an aborted transaction
    # 4: sent, no report at all (the flush gave up)
    aborted = np.array([False, False, False, True, False, False])
    ledger = Ledger.from_deliveries(records, deliveries, None, "t", aborted=aborted)
    frame = ledger.frame
    assert list(frame.columns) == list(Ledger.COLUMNS)
    assert frame["status"].tolist() == ["acked", "indeterminate", "acked", "aborted", "indeterminate", "indeterminate"]
    assert frame["seq"].tolist() == [s if i != 3 else -1 for i, s in enumerate(records["seq"])]
    assert frame["offset"].tolist() == [7, -1, 8, 9, -1, -1]
    assert frame["acked_at"].tolist()[:1] == [20.0] and np.isnan(frame["acked_at"][1])
    assert frame["aborted"].tolist() == aborted.tolist()
    sent = Ledger.from_deliveries(records, deliveries, rows=np.flatnonzero(~np.isnan(deliveries.produced_at)))
    assert sent.frame["id"].tolist() == [0, 1, 2, 3, 4]
    assert sent.frame["status"].tolist() == ["acked", "indeterminate", "acked", "acked", "indeterminate"]
    # 2 was in a transaction planned to commit whose commit failed: aborted, its planned seq kept for the checkers
    failed = Ledger.from_deliveries(records, deliveries, aborted=aborted, failed=np.arange(6) == 2).frame
    assert failed["status"].tolist()[2:4] == ["aborted", "aborted"] and failed["aborted"].tolist()[2:4] == [True] * 2
    assert failed["seq"].tolist()[2:4] == [records["seq"][2], -1]


class _FullQueueProducer:
    """A producer whose queue is full for the first ``full`` produce() calls."""

    def __init__(self, full: int) -> None:
        self.full = full
        self.calls: list[tuple] = []

    def produce(self, topic, **kwargs) -> None:
        self.calls.append(("produce", topic, kwargs["value"], kwargs["partition"]))
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")

    def poll(self, timeout) -> int:
        self.calls.append(("poll", timeout))
        return 0


def test_produce_record_serves_deliveries_while_the_queue_is_full():
    producer = _FullQueueProducer(full=2)
    produce_record(producer, "t", b"v", b"k", 3, print, full_queue_timeout=5.0, drain_s=0.01)
    assert producer.calls == [("produce", "t", b"v", 3), ("poll", 0.01)] * 2 + [("produce", "t", b"v", 3)]


def test_produce_record_tries_once_by_default_and_gives_up_at_its_timeout():
    producer = _FullQueueProducer(full=1)
    with pytest.raises(BufferError):
        produce_record(producer, "t", b"v", None, 0, print)
    assert producer.calls == [("produce", "t", b"v", 0), ("poll", 0.0)]
    with pytest.raises(BufferError):
        produce_record(_FullQueueProducer(full=10**9), "t", b"v", None, 0, print, full_queue_timeout=0.2,
                       drain_s=0.01)


def test_record_id_of_reads_the_header():
    assert record_id_of(encode_value(123456789, 4, 1.0, 64)) == 123456789


def test_ledger_refuses_frames_without_its_columns():
    with pytest.raises(ConfigurationError, match="needs columns"):
        Ledger(pd.DataFrame({"id": [1]}))


@pytest.mark.integration
def test_bulk_load_with_aborted_transactions_matches_what_read_committed_returns(clean_links):
    env = clean_links
    bootstrap = env.endpoints.bootstrap_servers
    topic = f"workload-{uuid.uuid4().hex[:8]}"
    spec = WorkloadSpec(total=3000, keys=40, partitions=3, aborted_fraction=0.25, transaction_records=100, seed=3)
    create_topic(bootstrap, topic, partitions=3)
    ledger = load_topic(bootstrap, topic, spec)
    counts = ledger.counts()
    assert counts.get("indeterminate", 0) == 0
    assert counts["acked"] + counts["aborted"] == 3000 and counts["aborted"] > 0
    committed = read_topic(bootstrap, topic, "read_committed")
    decoded = decode_values([value for *_rest, value in committed])
    acked = ledger.frame[ledger.frame["status"] == "acked"]
    assert sorted(decoded["id"]) == sorted(acked["id"])
    # partition and offset in the ledger are where the broker put each record
    by_id = acked.set_index("id")
    for (partition, offset, _key, _value), record_id in zip(committed[:50], decoded["id"][:50], strict=True):
        assert (by_id.loc[record_id, "partition"], by_id.loc[record_id, "offset"]) == (partition, offset)
    everything = decode_values([value for *_rest, value in read_topic(bootstrap, topic, "read_uncommitted")])
    assert set(everything["id"]) == set(range(3000))


def test_event_times_space_each_partition_s_records_and_put_the_last_partition_ahead_ending_at_the_given_time():
    from streamcert.harness.run.workload import event_times

    spec = WorkloadSpec(total=90, keys=9, partitions=3, seed=3, event_time_step_ms=1000, event_time_lead_ms=60_000)
    records = plan(spec)
    stamps = pd.Series(event_times(records, spec, end_ms=1_000_000), index=records.index)
    assert stamps.max() == 1_000_000
    for partition, rows in records.groupby("partition"):
        times = stamps[rows.index].to_numpy()
        assert (np.diff(times) == 1000).all()  # in id order, a step apart
        assert times[0] == stamps.max() - (len(stamps[records["partition"] == 2]) - 1) * 1000 - 60_000 + (
            60_000 if partition == 2 else 0)
    assert event_times(records, WorkloadSpec(total=90), end_ms=5) is None  # none asked: the producer stamps them
    with pytest.raises(ConfigurationError, match="event_time"):
        WorkloadSpec(event_time_step_ms=-1).validate()


@pytest.mark.integration
def test_the_tail_of_added_partitions_is_written_once_the_topic_grew_and_never_if_it_does_not(clean_links):
    import threading
    import time

    from streamcert.harness.run.topic_growth import TopicGrowth
    from streamcert.harness.stack.kafka_clients import add_partitions

    bootstrap = clean_links.endpoints.bootstrap_servers
    spec = WorkloadSpec(total=600, keys=8, partitions=2, added_partitions=1, aborted_fraction=0.2,
                        transaction_records=40, seed=4)
    topic = f"workload-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=2)
    added_at: list[float] = []

    def grow() -> None:
        time.sleep(1.5)
        added_at.append(time.time())
        add_partitions(bootstrap, topic, 3)

    threading.Thread(target=grow, daemon=True).start()
    ledger = load_topic(bootstrap, topic, spec).frame
    into_added = ledger[ledger["partition"] == 2]
    assert len(ledger) == 600 and (ledger["status"] != "indeterminate").all()
    assert len(into_added) > 0 and (into_added["produced_at"] >= added_at[0]).all()
    in_topic = {partition for partition, *_rest in read_topic(bootstrap, topic, "read_committed")}
    assert in_topic == {0, 1, 2}

    never = f"workload-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, never, partitions=2)
    began = time.monotonic()
    cut = load_topic(bootstrap, never, spec, grown=TopicGrowth(bootstrap, never, give_up=lambda: True)).frame
    assert time.monotonic() - began < 30 and 0 < len(cut) < 600 and (cut["partition"] < 2).all()


class _Producer:
    """A transactional producer whose commit fails with the given errors first (what librdkafka raises when a broker
    dies mid-commit), then succeeds."""

    def __init__(self, commit_errors, abort_errors=()):
        self.commit_errors, self.abort_errors = list(commit_errors), list(abort_errors)
        self.calls: list[str] = []

    def commit_transaction(self, _timeout):
        self.calls.append("commit")
        if self.commit_errors:
            raise KafkaException(self.commit_errors.pop(0))

    def abort_transaction(self, _timeout):
        self.calls.append("abort")
        if self.abort_errors:
            raise KafkaException(self.abort_errors.pop(0))


def _error(code, **flags):
    return KafkaError(code, "seen", **flags)


def test_a_commit_that_timed_out_is_called_again_until_it_ends_and_the_records_stay_committed():
    producer = _Producer([_error(KafkaError._TIMED_OUT, retriable=True)] * 2)
    failed: set[int] = set()
    _end_transaction(producer, False, 0.1, failed, 7)
    assert producer.calls == ["commit", "commit", "commit"] and failed == set()


def test_a_commit_that_needs_an_abort_is_aborted_and_its_transaction_counted_failed():
    producer = _Producer([_error(KafkaError._FENCED, txn_requires_abort=True)],
                         [_error(KafkaError._TIMED_OUT, retriable=True)])
    failed: set[int] = set()
    _end_transaction(producer, False, 0.1, failed, 7)
    assert producer.calls == ["commit", "abort", "abort"] and failed == {7}


def test_a_fatal_commit_error_is_raised():
    producer = _Producer([_error(KafkaError._FENCED, fatal=True)])
    with pytest.raises(KafkaException):
        _end_transaction(producer, False, 0.1, set(), 7)
