"""Event-time alignment of the Kafka source's partitions: seed 001's ``maxAllowedDrift`` (FLIP-27 / FLIP-182).

A partition whose records run ahead in event time of the slowest partition that still has input is not read past
``slowest + maxAllowedDriftMs``: each batch's end offsets are capped per partition, so a skewed backlog (one
partition hours ahead of another) does not reach the query at once and blow up downstream state. Event time is the
Kafka record's timestamp (``CreateTime``: what the producer set).

Per batch, on the driver (:meth:`EventTimeAligner.cap`, called from the reader's ``latestOffset``):

1. the *head* of every partition with input (records between the batch's start and the broker's end) is the
   timestamp of its first readable record at or after the start: one record fetched per partition, nothing read
   ahead;
2. a partition without input still *holds* the others at the head it had when it last had input (its next
   records come later in its event time), until it has had none for ``idleTimeoutMs``: then it is idle and holds
   nothing (FLIP-182's idleness), so a partition that stopped receiving records does not stop the others for good.
   Under ``Trigger.AvailableNow`` a partition read to the query's end offsets is idle at once (no more input comes
   in that run). A reader started after a restart learns a partition without input's position from its last
   record before the start (the checkpoint's offset): the bound holds across restarts and rescales, since nothing
   of it lives only in memory but the idle clocks;
3. a partition's cap is the lowest head or hold of the *other* partitions plus ``maxAllowedDriftMs``; its end
   becomes its first offset whose timestamp is past its cap, by the broker's time index (``offsets_for_times``),
   never below the start. A partition alone (the others idle) is not capped.

So no partition's records reach past another holding partition's next record by more than the drift: the event
time each partition has reached (its watermark) trails its head by at most one record, and the spread of those
watermarks stays within the drift plus that one record's gap. The slowest partition is never capped below the
others' heads, so the query always progresses. All subscribed topics align as one group. Pure apart from the
:class:`TimeProbe` it is handed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from .kafka_offsets import Offsets

__all__ = ["TimeProbe", "EventTimeAligner", "DEFAULT_IDLE_TIMEOUT_MS"]

#: How long a partition without input holds the others back before it counts as idle.
DEFAULT_IDLE_TIMEOUT_MS = 5000

TopicPartition = tuple[str, int]


@runtime_checkable
class TimeProbe(Protocol):
    """What the aligner asks the broker (driver side); a partition missing from an answer has no such record."""

    def head_times(self, ranges: Mapping[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, int]:
        """Timestamp (ms) of the first readable record in ``[begin, end)`` of each partition."""

    def last_times(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Timestamp (ms) of the last readable record before each offset."""

    def first_offsets_after(self, times: Mapping[TopicPartition, int],
                            ranges: Mapping[TopicPartition, tuple[int, int]],
                            scan_limit: int | None = None) -> dict[TopicPartition, int]:
        """The first offset in ``ranges`` (each partition's ``[begin, end)``) whose record is stamped past the given
        time (ms); missing: no such record. ``scan_limit``: the most records of one partition a batch reads."""


class EventTimeAligner:
    """The driver's alignment state for one reader: which partitions hold the others, and since when."""

    def __init__(self, drift_ms: int, idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.drift_ms = drift_ms
        self.idle_timeout_ms = idle_timeout_ms
        self.clock = clock
        #: partition -> (event time it holds the others at, when it last had input)
        self._holds: dict[TopicPartition, tuple[int, float]] = {}
        #: the cap of the batch planned last (ms), for the reader's diagnostics
        self.last_cap_ms: int | None = None

    def cap(self, begin: Offsets, end: Offsets, probe: TimeProbe, final: bool = False,
            max_rows: int | None = None) -> Offsets:
        """``end`` capped so that no partition is read past the other partitions' heads (or holds) plus the drift.

        ``final``: the query stops at ``end`` (``Trigger.AvailableNow``): a partition with no input left there is
        idle at once. ``max_rows``: the batch's read limit (no partition's cut is looked for further)."""
        now = self.clock()
        spans = {(t, p): (begin.get(t, {}).get(p, 0), until) for t, parts in end.items() for p, until in parts.items()}
        with_input = {tp: span for tp, span in spans.items() if span[1] > span[0]}
        heads = probe.head_times(with_input) if with_input else {}
        for tp, head in heads.items():
            self._holds[tp] = (head, now)
        unknown = {tp: span[0] for tp, span in spans.items()
                   if tp not in heads and tp not in self._holds and span[0] > 0 and not final}
        for tp, last in (probe.last_times(unknown) if unknown else {}).items():
            self._holds[tp] = (last, now)  # a restarted reader: the partition holds from where it was read to
        holding = {tp: held for tp, (held, since) in self._holds.items()
                   if tp in spans and (tp in heads or not final and (now - since) * 1000 < self.idle_timeout_ms)}
        caps = {tp: min(held for other, held in holding.items() if other != tp) + self.drift_ms
                for tp in heads if any(other != tp for other in holding)}
        self.last_cap_ms = min(holding.values()) + self.drift_ms if holding else None
        cuts = probe.first_offsets_after(caps, {tp: spans[tp] for tp in caps}, max_rows) if caps else {}
        capped: Offsets = {topic: dict(parts) for topic, parts in end.items()}
        for (topic, partition), cut in cuts.items():
            start, until = spans[(topic, partition)]
            capped[topic][partition] = max(start, min(until, cut))
        return capped
