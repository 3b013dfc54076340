"""Rows packed into blocks: the Kafka 2PC sink stages one Kafka record per block of rows.

Why: the write-ahead protocol writes every row twice, and the second write (the driver's copy
into the output topic) runs in one Python process. Staging one record per row made the driver
consume a million staging records to copy a million rows; staging a block of rows per record
leaves it a few hundred records to consume, and the per-row work is only the produce call.

A block is an Arrow IPC stream holding one record batch with the columns ``key`` and ``value``
(both nullable ``binary``; string input is cast, which keeps its UTF-8 bytes). Blocks are cut so
that their keys and values add up to about ``block_bytes``: a block holds at most ``block_bytes``
plus one row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["BLOCK_SCHEMA", "DEFAULT_BLOCK_BYTES", "encode_blocks", "decode_block"]

BLOCK_SCHEMA = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary())])
DEFAULT_BLOCK_BYTES = 512 * 1024


def encode_blocks(batches: Iterable[pa.RecordBatch],
                  block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[tuple[bytes, int]]:
    """Executor, while staging: each block of rows as ``(payload, row_count)``, in input order.

    ``batches`` have a ``value`` column and optionally a ``key`` column (binary or string).
    """
    for batch in batches:
        if batch.num_rows == 0:
            continue
        rows = _key_value(batch)
        for start, stop in _cuts(rows, block_bytes):
            yield _serialise(rows.slice(start, stop - start)), stop - start


def decode_block(payload: bytes) -> tuple[list[bytes | None], list[bytes | None]]:
    """Driver, while copying: the keys and values of one block."""
    table = pa.ipc.open_stream(payload).read_all()
    if table.schema != BLOCK_SCHEMA:
        raise ValueError(f"not a row block: schema {table.schema}")
    return table.column("key").to_pylist(), table.column("value").to_pylist()


def _key_value(batch: pa.RecordBatch) -> pa.RecordBatch:
    names = batch.schema.names
    values = batch.column(names.index("value")).cast(pa.binary())
    if "key" in names:
        keys = batch.column(names.index("key")).cast(pa.binary())
    else:
        keys = pa.nulls(batch.num_rows, pa.binary())
    return pa.RecordBatch.from_arrays([keys, values], schema=BLOCK_SCHEMA)


def _cuts(rows: pa.RecordBatch, block_bytes: int) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)``: each takes rows while its bytes so far are under ``block_bytes``."""
    sizes = np.zeros(rows.num_rows, dtype=np.int64)
    for column in rows.columns:
        sizes += pc.binary_length(column).fill_null(0).to_numpy(zero_copy_only=False)
    before = np.cumsum(sizes) - sizes  # bytes of the rows before each row
    cuts, start = [], 0
    while start < rows.num_rows:
        stop = max(start + 1, int(np.searchsorted(before, before[start] + block_bytes, side="left")))
        cuts.append((start, stop))
        start = stop
    return cuts


def _serialise(rows: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, BLOCK_SCHEMA) as writer:
        writer.write_batch(rows)
    return sink.getvalue().to_pybytes()
