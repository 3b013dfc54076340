"""Rows packed into staging blocks: round trips, block sizes, types (no broker needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamcert.connectors.row_blocks import decode_block, encode_blocks


def _rows(blocks):
    keys, values = [], []
    for payload, count in blocks:
        block_keys, block_values = decode_block(payload)
        assert len(block_keys) == len(block_values) == count
        keys += block_keys
        values += block_values
    return keys, values


def test_rows_come_back_in_order_with_nulls_across_batches_and_blocks():
    first = pa.RecordBatch.from_pydict({"key": pa.array([b"a", None, b"c"], pa.binary()),
                                        "value": pa.array([b"1", b"2", None], pa.binary())})
    second = pa.RecordBatch.from_pydict({"key": pa.array([b"d"], pa.binary()), "value": pa.array([b""], pa.binary())})
    blocks = list(encode_blocks([first, second], block_bytes=2))
    assert len(blocks) > 2
    assert _rows(blocks) == ([b"a", None, b"c", b"d"], [b"1", b"2", None, b""])


def test_string_columns_keep_their_utf8_bytes_and_a_missing_key_is_null():
    with_key = pa.RecordBatch.from_pydict({"key": pa.array(["é"], pa.large_string()), "value": pa.array(["ü"])})
    assert _rows(encode_blocks([with_key])) == (["é".encode()], ["ü".encode()])
    no_key = pa.RecordBatch.from_pydict({"value": pa.array([b"x", b"y"], pa.large_binary())})
    assert _rows(encode_blocks([no_key])) == ([None, None], [b"x", b"y"])


@pytest.mark.parametrize("block_bytes", [1, 100, 1000, 10_000])
def test_blocks_hold_about_block_bytes_and_at_most_one_row_more(block_bytes):
    sizes = [7, 300, 1, 2500, 40, 40, 40, 999, 3] * 20
    values = [bytes(size) for size in sizes]
    blocks = list(encode_blocks([pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})], block_bytes))
    assert _rows(blocks)[1] == values
    assert sum(count for _p, count in blocks) == len(values)
    position = 0
    for index, (_payload, count) in enumerate(blocks):
        block_sizes = sizes[position:position + count]
        position += count
        assert sum(block_sizes) <= block_bytes + max(block_sizes)  # never more than one row over
        if index < len(blocks) - 1:  # a block is cut only when it is full, unless it is the last one
            assert sum(block_sizes) + sizes[position] > block_bytes


def test_empty_batches_make_no_blocks_and_foreign_payloads_are_refused():
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.binary())})
    assert list(encode_blocks([empty, empty])) == []
    sink = pa.BufferOutputStream()
    other = pa.RecordBatch.from_pydict({"x": pa.array([1])})
    with pa.ipc.new_stream(sink, other.schema) as writer:
        writer.write_batch(other)
    with pytest.raises(ValueError, match="not a row block"):
        decode_block(sink.getvalue().to_pybytes())
