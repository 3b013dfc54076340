"""Offsets: JSON round trips, ranges with discovered partitions, and admission control."""

import pytest

from streamcert.connectors.kafka_offsets import from_json, limit_rows, ranges, to_json


def test_json_round_trip_uses_string_partitions():
    offsets = {"b": {1: 5, 0: 3}, "a": {0: 0}}
    encoded = to_json(offsets)
    assert encoded == {"a": {"0": 0}, "b": {"0": 3, "1": 5}}
    assert from_json(encoded) == offsets
    assert from_json(None) == {}


def test_ranges_skip_empty_and_start_new_partitions_at_zero():
    start = {"t": {0: 5, 1: 7}}
    end = {"t": {0: 5, 1: 9, 2: 4}}
    assert ranges(start, end) == [("t", 1, 7, 9), ("t", 2, 0, 4)]


@pytest.mark.parametrize("max_rows", [1, 2, 3, 7, 10, 25, 1000])
def test_limit_never_exceeds_and_uses_what_it_can(max_rows):
    start = {"t": {0: 0, 1: 10, 2: 0}, "u": {0: 100}}
    end = {"t": {0: 3, 1: 30, 2: 0}, "u": {0: 105}}
    limited = limit_rows(start, end, max_rows)
    total = sum(until - begin for _t, _p, begin, until in ranges(start, limited))
    backlog = sum(until - begin for _t, _p, begin, until in ranges(start, end))
    assert total == min(max_rows, backlog)
    for topic, parts in limited.items():
        for partition, offset in parts.items():
            assert start[topic][partition] <= offset <= end[topic][partition]


def test_limit_is_fair_and_deterministic():
    start = {"t": {0: 0, 1: 0, 2: 0}}
    end = {"t": {0: 100, 1: 100, 2: 1}}
    assert limit_rows(start, end, 21) == {"t": {0: 10, 1: 10, 2: 1}}
    assert limit_rows(start, end, 21) == limit_rows(start, end, 21)
