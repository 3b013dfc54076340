"""The batch aggregator's flush rule (pure): size and time flushes, per-key order, deadlines; option checks."""

from __future__ import annotations

import pytest

from streamcert.connectors.aggregator import plan_flush


def _items(keys: str, start_ms: int = 0, partition: int = 0, first_offset: int = 0) -> list[tuple]:
    return [(k, partition, first_offset + i, b"v", start_ms) for i, k in enumerate(keys)]


def test_full_batches_are_cut_by_size_and_the_rest_waits_with_a_deadline():
    flush = plan_flush([], _items("abcabcab", start_ms=1000), now_ms=1000, max_batch_size=3, max_wait_ms=500)
    assert [reason for reason, _b in flush.batches] == ["size", "size"]
    assert [[item[0] for item in batch] for _r, batch in flush.batches] == [["a", "b", "c"], ["a", "b", "c"]]
    assert [item[0] for item in flush.remaining] == ["a", "b"] and flush.deadline_ms == 1500


def test_a_key_stays_contiguous_and_in_order_inside_a_batch():
    flush = plan_flush([], _items("abab", start_ms=0), now_ms=0, max_batch_size=4, max_wait_ms=100)
    (_reason, batch), = flush.batches
    assert [(item[0], item[2]) for item in batch] == [("a", 0), ("a", 2), ("b", 1), ("b", 3)]


def test_buffered_records_go_first_and_the_oldest_sets_the_deadline():
    buffered = _items("xy", start_ms=100, first_offset=10)
    flush = plan_flush(buffered, _items("z", start_ms=400, first_offset=12), now_ms=400, max_batch_size=10,
                       max_wait_ms=1000)
    assert flush.batches == [] and [i[0] for i in flush.remaining] == ["x", "y", "z"]
    assert flush.deadline_ms == 1100  # the oldest record arrived at 100


def test_a_due_deadline_or_timer_flushes_everything_that_remains():
    buffered = _items("xy", start_ms=100)
    assert plan_flush(buffered, [], now_ms=1100, max_batch_size=10, max_wait_ms=1000).batches[0][0] == "time"
    timer = plan_flush(buffered, [], now_ms=900, max_batch_size=10, max_wait_ms=1000, timer_due=True)
    assert [r for r, _b in timer.batches] == ["time"] and timer.remaining == [] and timer.deadline_ms is None
    early = plan_flush(buffered, [], now_ms=900, max_batch_size=10, max_wait_ms=1000)
    assert early.batches == [] and early.deadline_ms == 1100


def test_nothing_buffered_means_no_batch_and_no_deadline():
    flush = plan_flush([], [], now_ms=5, max_batch_size=2, max_wait_ms=1, timer_due=True)
    assert flush.batches == [] and flush.remaining == [] and flush.deadline_ms is None


@pytest.mark.parametrize("size", [1, 7, 50])
def test_every_record_is_emitted_once_in_per_key_order_whatever_the_size(size):
    incoming = _items("abcdeabcdeaaab" * 9, start_ms=0)
    flush = plan_flush([], incoming, now_ms=0, max_batch_size=size, max_wait_ms=10, timer_due=True)
    emitted = [item for _r, batch in flush.batches for item in batch]
    assert sorted(i[2] for i in emitted) == list(range(len(incoming)))
    assert all(len(batch) <= size for _r, batch in flush.batches)
    for key in "abcde":
        offsets = [i[2] for i in emitted if i[0] == key]
        assert offsets == sorted(offsets)
