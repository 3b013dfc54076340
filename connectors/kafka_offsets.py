"""Source offsets ``{topic: {partition: next_offset}}``: JSON form, ranges, and admission control.

Offsets are what Spark stores in the checkpoint's ``offsets/N``; JSON object
keys are strings, so partitions are written as ``"0"``, ``"1"``... and read back
as integers. Everything here is pure and runs on the driver.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["Offsets", "to_json", "from_json", "ranges", "limit_rows"]

Offsets = dict[str, dict[int, int]]


def to_json(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {topic: {str(p): int(o) for p, o in sorted(parts.items())} for topic, parts in sorted(offsets.items())}


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in (data or {}).items()}


def ranges(start: Offsets, end: Offsets) -> list[tuple[str, int, int, int]]:
    """``(topic, partition, from, until)`` for every partition with records between ``start`` and ``end``.

    A partition in ``end`` but not in ``start`` was discovered during the batch: it is read from offset 0
    (the reader moves to the log start if older records were deleted).
    """
    out = []
    for topic, parts in sorted(end.items()):
        for partition, until in sorted(parts.items()):
            begin = start.get(topic, {}).get(partition, 0)
            if until > begin:
                out.append((topic, partition, begin, until))
    return out


def limit_rows(start: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """``end`` cut so that at most ``max_rows`` offsets are read, shared fairly and deterministically.

    Water-filling over the partitions in sorted order: every partition with a backlog gets an equal share,
    shares a partition cannot use go to the others. Offsets count aborted records and transaction markers
    too, so the rows a batch really yields are at most ``max_rows``.
    """
    backlog = {(t, p): until - begin for t, p, begin, until in ranges(start, end)}
    grant = {tp: 0 for tp in backlog}
    remaining = max_rows
    open_parts = sorted(tp for tp, lag in backlog.items() if lag > 0)
    while remaining > 0 and open_parts:
        share = max(1, remaining // len(open_parts))
        for tp in list(open_parts):
            take = min(share, backlog[tp] - grant[tp], remaining)
            grant[tp] += take
            remaining -= take
            if grant[tp] == backlog[tp]:
                open_parts.remove(tp)
            if remaining == 0:
                break
    limited: Offsets = {topic: dict(parts) for topic, parts in end.items()}
    for (topic, partition), granted in grant.items():
        limited[topic][partition] = start.get(topic, {}).get(partition, 0) + granted
    return limited
