"""Jepsen-style checkers: what the system under test delivered, judged against what was acknowledged.

Every checker is pure pandas/numpy, reads two DataFrames and returns a :class:`CheckResult` whose
``valid`` is ``True``, ``False`` or ``"unknown"``. ``"unknown"`` means the checker could not decide
(a needed column is missing, the input has the wrong type, the checker crashed); it is never a pass.

Input conventions
-----------------
**ledger**: every record the workload tried to write, one row per record (``Ledger.for_checkers()``):

- ``id`` (integer, unique): the record's identity, carried through the pipeline unchanged;
- ``key`` (string/object or categorical);
- ``seq`` (integer): per-key sequence number starting at 0, contiguous per key for committed records;
- ``produced_at`` (float, epoch seconds);
- ``aborted`` (bool): True for records written in an aborted input transaction; they must never
  appear downstream, and they are not owed to the output either;
- optional ``status``: ``acked`` (the broker acknowledged the record: it is owed to the output),
  ``indeterminate`` (the produce timed out or failed: maybe written, maybe not) or ``aborted`` (as
  ``aborted``; either marks a record aborted). Any other value makes the checkers that read it
  ``"unknown"``. Without the column every record that is not aborted counts as acknowledged.

Indeterminate records
---------------------
As in Jepsen's ``set`` checker, a record whose write is indeterminate is *attempted* but not
*acknowledged*. It is known (never ``unexpected``) and not owed (never ``lost``); delivered once it is
*recovered* (valid), delivered twice or more it is a duplicate (the :class:`DuplicateChecker`'s
finding), never delivered it is nothing at all (valid: it may never have been written). The order
checkers do not judge where an indeterminate record was delivered, and a missing one is no gap: per key
they judge the acknowledged records only, as if the indeterminate ones had never been numbered.
The :class:`LostChecker`'s ``data`` holds the whole accounting: ``attempted``, ``acknowledged``,
``indeterminate``, ``aborted``, ``ok``, ``recovered``, ``unrecovered``, ``lost``, ``duplicated``,
``unexpected`` and ``aborted_read``.

**output**: everything the system under test delivered, one row per delivery, in delivery order:

- ``id``, ``key``, ``seq`` as in the ledger (a duplicate delivery is a second row with the same id);
- optional ``visible_at`` (float seconds), not read here;
- optional delivery order: a ``position`` column (sorted ascending) or, failing that, ``partition`` and
  ``offset`` (sorted by partition, then offset); without either, the row order *is* the delivery order.
  Rows that share a position became visible at once (one commit of a table): a reader may take them in
  any order, so they are judged in seq order (then row order);
- aggregators only: ``batch_id`` (the emitted batch) and ``emitted_at`` (float seconds, when the batch
  was emitted).

Which violations are reported
-----------------------------
``violations`` holds the first :data:`MAX_VIOLATIONS` findings only (``counts`` has the totals; ``data``
has more numbers that are not findings, such as the records a checker skipped), each a
JSON-serialisable dict with at least ``kind``, ``id`` and ``key``. "First" means ledger order for lost
records, output row order for duplicates, unexpected and aborted reads, delivery order for per-key order,
and batch emission order for the aggregator rules.

Duplicates and order
--------------------
A redelivery (any delivery of an id after its first) is the :class:`DuplicateChecker`'s finding, so the
order checkers judge each id's *first* delivery only: an at-least-once replay of records 5..9 after 9
reads as five duplicates, not as five order violations. Likewise aborted reads and unexpected records are
their own checkers' findings, and their ``seq`` is not part of the committed numbering, so the order
checkers skip them too. Within a key, each first delivery is compared with the highest seq delivered
before it (not just the previous row), so one record delivered late is one ``non_monotonic`` violation,
not a cascade.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from streamcert.harness.verify.downtime import overlap_s

__all__ = [
    "MAX_VIOLATIONS",
    "ORDER_STREAM",
    "ORDER_WITHIN",
    "UNKNOWN",
    "CheckResult",
    "Checker",
    "LostChecker",
    "DuplicateChecker",
    "UnexpectedChecker",
    "AbortedReadChecker",
    "PerKeyOrderChecker",
    "AggregatorBatchChecker",
    "run_checks",
    "combined_valid",
    "exactly_once_checkers",
]

UNKNOWN = "unknown"
MAX_VIOLATIONS = 10

# Packed (group, value) integers must stay clear of int64 overflow.
_PACK_LIMIT = 1 << 62
_STATUSES = ("acked", "indeterminate", "aborted")


# --------------------------------------------------------------------------------------------------
# Result and protocol


@dataclass
class CheckResult:
    """One checker's verdict: ``valid`` is True, False or ``"unknown"``; ``violations`` the first few.

    ``counts`` are the totals of what the checker judged and found; ``data`` other numbers it reports (the
    :class:`LostChecker`'s Jepsen-style accounting, the records an order checker skipped), absent from
    :meth:`to_dict` when empty.
    """

    name: str
    valid: bool | str
    counts: dict[str, int] = field(default_factory=dict)
    violations: list[dict] = field(default_factory=list)
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy (numpy scalars become Python numbers, NaN becomes None)."""
        result = {
            "name": self.name,
            "valid": _plain(self.valid),
            "counts": {str(k): _plain(v) for k, v in self.counts.items()},
            "violations": [_plain(v) for v in self.violations],
            "error": self.error,
        }
        if self.data:
            result["data"] = _plain(self.data)
        return result


@runtime_checkable
class Checker(Protocol):
    """Anything with a ``name`` that judges a ledger against an output."""

    name: str

    def check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult: ...


def run_checks(checkers: Iterable[Checker], ledger: pd.DataFrame, output: pd.DataFrame) -> list[CheckResult]:
    """Run every checker; one that raises or returns junk yields ``"unknown"``, never a pass."""
    results = []
    for checker in checkers:
        name = str(getattr(checker, "name", type(checker).__name__))
        try:
            result = checker.check(ledger, output)
        except Exception as exc:  # noqa: BLE001 - a crash must become a verdict, not abort the run
            result = _unknown(name, _describe(exc))
        if not isinstance(result, CheckResult):
            result = _unknown(name, f"TypeError: check() returned {type(result).__name__}, not CheckResult")
        results.append(result)
    return results


def combined_valid(results: Iterable[CheckResult]) -> bool | str:
    """False if any result is False; else ``"unknown"`` if any is not True; else True."""
    verdicts = [r.valid for r in results]
    if any(v is False for v in verdicts):
        return False
    if any(v is not True for v in verdicts):
        return UNKNOWN
    return True


def exactly_once_checkers() -> list[Checker]:
    """The exactly-once set: lost, duplicate, unexpected, aborted-read and per-key order (no gaps)."""
    return [LostChecker(), DuplicateChecker(), UnexpectedChecker(), AbortedReadChecker(), PerKeyOrderChecker()]


# --------------------------------------------------------------------------------------------------
# Checkers


class _ColumnChecker(ABC):
    """Template: refuse (unknown) when a needed column is missing, and turn a crash into unknown."""

    name: str = ""
    ledger_columns: tuple[str, ...] = ()
    output_columns: tuple[str, ...] = ()

    def check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        missing = _missing(ledger, self.ledger_columns, "ledger") + _missing(output, self.output_columns, "output")
        if missing:
            return _unknown(self.name, "; ".join(missing))
        try:
            return self._check(ledger, output)
        except Exception as exc:  # noqa: BLE001 - a crashed checker proves nothing
            return _unknown(self.name, _describe(exc))

    @abstractmethod
    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        """The checker proper; runs only when every needed column is present."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LostChecker(_ColumnChecker):
    """Proves every acknowledged, committed ledger record was delivered at least once.

    Needs ledger ``id``, ``key``, ``aborted`` (and ``status`` when there is one) and output ``id``.
    Aborted and indeterminate records are not owed. Counts: ``acknowledged`` (acknowledged committed
    ledger records), ``delivered`` (of those, delivered at least once), ``lost``. Violations (kind
    ``lost``) are in ledger order and carry ``ledger_row``.

    ``data`` is the Jepsen ``set`` accounting of the whole run (see the module docstring): per ledger
    record ``attempted`` (not aborted) = ``acknowledged`` + ``indeterminate``, ``aborted``; ``ok``
    (acknowledged, delivered) + ``lost`` = ``acknowledged``; ``recovered`` (indeterminate, delivered) +
    ``unrecovered`` (indeterminate, never delivered) = ``indeterminate``; ``aborted_read`` (aborted,
    delivered); per output id ``duplicated`` (ids delivered more than once) and ``unexpected`` (ids
    delivered that are not in the ledger).
    """

    name = "lost"
    ledger_columns = ("id", "key", "aborted")
    output_columns = ("id",)

    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        fates = _Fates.of(ledger)
        output_ids = _ints(output, "id")
        delivered = _isin(fates.ids, output_ids)
        owed = np.flatnonzero(fates.acked)
        lost = owed[~delivered[owed]]
        counts = {"acknowledged": owed.size, "delivered": owed.size - lost.size, "lost": lost.size}
        result = _result(self.name, counts, lost.size, _describe_rows("lost", ledger, lost, row_label="ledger_row"))
        result.data = _accounting(fates, delivered, output_ids)
        return result


class DuplicateChecker(_ColumnChecker):
    """Proves no id was delivered more than once, whatever its ledger status (an indeterminate record
    delivered twice is a duplicate too).

    Needs output ``id`` and ``key``. Counts: ``deliveries`` (output rows), ``duplicated_ids`` (ids
    delivered twice or more), ``extra_deliveries`` (deliveries beyond each id's first). One violation
    (kind ``duplicate``) per extra delivery in output order, with its ``row``, the id's ``first_row``
    and its total ``deliveries``.
    """

    name = "duplicate"
    output_columns = ("id", "key")

    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        ids = _ints(output, "id")
        extra = np.flatnonzero(_redeliveries(ids))
        dup_ids, extra_per_id = np.unique(ids[extra], return_counts=True)
        counts = {"deliveries": ids.size, "duplicated_ids": dup_ids.size, "extra_deliveries": extra.size}
        shown = extra[:MAX_VIOLATIONS]
        shown_ids = ids[shown]
        details = {
            "deliveries": extra_per_id[np.searchsorted(dup_ids, shown_ids)] + 1,
            "first_row": _first_rows(ids, shown_ids),
        }
        return _result(self.name, counts, extra.size, _describe_rows("duplicate", output, shown, details))


class UnexpectedChecker(_ColumnChecker):
    """Proves every delivered id is in the ledger (nothing invented, nothing unacknowledged).

    Needs ledger ``id`` and output ``id``, ``key``. Every ledger record is known, whatever its status:
    indeterminate ones are recovered when delivered, and aborted ones are the :class:`AbortedReadChecker`'s
    finding. Counts: ``deliveries``, ``unexpected`` (rows),
    ``unexpected_ids`` (distinct). Violations (kind ``unexpected``) in output order.
    """

    name = "unexpected"
    ledger_columns = ("id",)
    output_columns = ("id", "key")

    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        ids = _ints(output, "id")
        rows = np.flatnonzero(~_isin(ids, _ints(ledger, "id")))
        counts = {"deliveries": ids.size, "unexpected": rows.size, "unexpected_ids": np.unique(ids[rows]).size}
        return _result(self.name, counts, rows.size, _describe_rows("unexpected", output, rows))


class AbortedReadChecker(_ColumnChecker):
    """Proves no record of an aborted input transaction appeared downstream (read_committed held).

    Needs ledger ``id``, ``aborted`` (and ``status`` when there is one) and output ``id``, ``key``.
    Counts: ``aborted`` (ledger records marked aborted), ``aborted_reads`` (output rows),
    ``aborted_read_ids`` (distinct). Violations (kind ``aborted_read``) in output order.
    """

    name = "aborted_read"
    ledger_columns = ("id", "aborted")
    output_columns = ("id", "key")

    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        fates = _Fates.of(ledger)
        aborted_ids = fates.ids[fates.aborted]
        ids = _ints(output, "id")
        rows = np.flatnonzero(_isin(ids, aborted_ids))
        counts = {
            "aborted": aborted_ids.size,
            "aborted_reads": rows.size,
            "aborted_read_ids": np.unique(ids[rows]).size,
        }
        return _result(self.name, counts, rows.size, _describe_rows("aborted_read", output, rows))


class PerKeyOrderChecker(_ColumnChecker):
    """Proves that, per key, delivered seqs strictly increase and (unless ``allow_gaps``) skip nothing.

    Needs ledger ``id``, ``aborted`` and output ``id``, ``key``, ``seq`` (plus ``position`` or
    ``partition``/``offset`` when the row order is not the delivery order; and ledger ``key`` and ``seq`` when some
    records are indeterminate). Rows of one position are visible at once and judged in any order, except inside one
    :data:`ORDER_STREAM` (a file), whose rows must keep their :data:`ORDER_WITHIN` order. Judges the first delivery
    of each acknowledged committed id (see the module docstring). Each first delivery is compared with the highest
    seq delivered before it for its key: ``non_monotonic`` when seq is not above it (``previous_seq``), ``gap`` when
    seq jumps past the next acknowledged one (``expected_seq``; the seqs of indeterminate records are no gap, and
    where an indeterminate record was delivered is not judged). A key's first delivered seq is not judged (a missing
    head is the :class:`LostChecker`'s finding). Counts: ``keys``, ``checked``, ``redeliveries_skipped``,
    ``uncommitted_skipped``, ``non_monotonic``, ``gaps``; ``data`` has ``indeterminate_skipped`` (first deliveries
    of indeterminate records, not judged).
    """

    name = "per_key_order"
    ledger_columns = ("id", "aborted")
    output_columns = ("id", "key", "seq")

    def __init__(self, allow_gaps: bool = False) -> None:
        self.allow_gaps = allow_gaps

    def __repr__(self) -> str:
        return f"PerKeyOrderChecker(allow_gaps={self.allow_gaps})"

    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        fates = _Fates.of(ledger)
        order = _delivery_order(output)
        ids = _take(_ints(output, "id"), order)
        redelivered = _redeliveries(ids)
        committed = _isin(ids, fates.ids[~fates.aborted])
        indeterminate = _isin(ids, fates.ids[fates.indeterminate]) & ~redelivered
        del ids  # at 10M records every dropped temporary is ~80 MB of peak memory
        ranks = np.flatnonzero(committed & ~redelivered & ~indeterminate)  # delivery ranks of the judged records
        rows = _rows_at(ranks, order)
        codes, n_keys, key_values = _key_codes_and_values(output["key"])
        codes = codes[rows]
        by_key = _stable_group_order(codes, n_keys)
        keys = _sorted_codes(codes, n_keys)
        del codes
        seqs = _ints(output, "seq")[rows][by_key]
        in_stream_rows, in_stream_previous = _stream_disorder(output, rows)
        del rows

        previous, has_previous = _previous_max(keys, seqs)
        non_monotonic = np.flatnonzero(has_previous & (seqs <= previous))
        if self.allow_gaps:
            gaps, expected = non_monotonic[:0], previous[:0]
        else:
            excuses = _Excuses.of(ledger, fates, key_values, seqs)
            gaps, expected = _gaps(keys, seqs, previous, has_previous, excuses)

        counts = {
            "keys": int(np.count_nonzero(~has_previous)),
            "checked": ranks.size,
            "redeliveries_skipped": int(np.count_nonzero(redelivered)),
            "uncommitted_skipped": int(np.count_nonzero(~committed & ~redelivered)),
            "non_monotonic": non_monotonic.size + in_stream_rows.size,
            "gaps": gaps.size,
        }
        candidates = _ranked(
            "non_monotonic", output, ranks[by_key[non_monotonic]], order, previous_seq=previous[non_monotonic]
        ) + _ranked("gap", output, ranks[by_key[gaps]], order, expected_seq=expected)
        candidates += _ranked("non_monotonic", output, _delivery_ranks(in_stream_rows, order), order,
                              previous_seq=in_stream_previous,
                              within=np.full(in_stream_rows.size, ORDER_STREAM, dtype=object))
        result = _result(self.name, counts, non_monotonic.size + in_stream_rows.size + gaps.size,
                         _first(candidates))
        result.data = {"indeterminate_skipped": int(np.count_nonzero(indeterminate))}
        return result


#: Optional output columns for outputs whose rows of one ``position`` (visible at once) still have an order within
#: parts of them: a file sink's batch makes all its files visible at once, and each file's rows are in the order its
#: task wrote them. ``order_stream`` names the part (the file), ``order_within`` the row's place in it.
ORDER_STREAM, ORDER_WITHIN = "order_stream", "order_within"


def _stream_disorder(output: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the judged ``rows``, those whose seq is not above the previous record of their key in the same stream at
    the same position (and that record's seq): the order a reader sees inside one file, where the position ties."""
    if not {ORDER_STREAM, ORDER_WITHIN, "position"} <= set(output.columns) or rows.size < 2:
        return rows[:0], rows[:0]
    frame = pd.DataFrame({"key": output["key"].to_numpy()[rows], "position": output["position"].to_numpy()[rows],
                          "stream": output[ORDER_STREAM].to_numpy()[rows],
                          "within": output[ORDER_WITHIN].to_numpy()[rows], "seq": _ints(output, "seq")[rows],
                          "row": rows})
    frame = frame.sort_values(["key", "position", "stream", "within"], kind="stable")
    same = ((frame["key"] == frame["key"].shift()) & (frame["position"] == frame["position"].shift())
            & (frame["stream"] == frame["stream"].shift()))
    previous = frame["seq"].shift()
    bad = same & (frame["seq"] <= previous)
    return frame["row"].to_numpy()[bad.to_numpy()], previous.to_numpy()[bad.to_numpy()].astype(np.int64)


def _delivery_ranks(rows: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """The delivery ranks of output ``rows`` (their places in ``order``)."""
    if order is None:
        return rows
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return inverse[rows]


def _gaps(
    keys: np.ndarray, seqs: np.ndarray, previous: np.ndarray, has_previous: np.ndarray, excuses: _Excuses | None
) -> tuple[np.ndarray, np.ndarray]:
    """Positions whose seq jumps past the next acknowledged one of their key, and the seq expected there."""
    if excuses is None:
        gaps = np.flatnonzero(has_previous & (seqs > previous + 1))
        return gaps, previous[gaps] + 1
    # Number the acknowledged records as if the indeterminate ones had never had a seq.
    numbers = seqs - excuses.below(keys, seqs)
    gaps = np.flatnonzero(has_previous & (numbers > _previous_max(keys, numbers)[0] + 1))
    return gaps, excuses.next_owed(keys[gaps], previous[gaps] + 1)


class AggregatorBatchChecker(_ColumnChecker):
    """Proves a batch aggregator's emitted batches keep its contract.

    Rules: each batch has at most ``max_batch_size`` records (``oversized_batch``); inside a batch each
    key's records are contiguous (``non_contiguous_key``) and seq-ordered (``batch_order``); per key,
    batches in emission order continue its order (``cross_batch_order``: a batch holds a seq not above
    the highest seq of that key in earlier batches); and each batch is emitted at most
    ``max_wait_s + slack_s`` after the oldest record in it arrived (``late_flush``), not counting the
    time in ``pauses`` (epoch-second periods when no query ran, such as a killed driver's restart:
    :func:`~streamcert.harness.verify.downtime.driver_downtime`; a flush cannot fire then).

    A record arrived when the query read it: ledger ``arrived_at``
    (:func:`~streamcert.harness.run.arrival.arrival_times`; a record waiting in the input behind a backlog
    is not waiting in the aggregator), or where that is missing, when it was produced.

    Needs ledger ``id``, ``aborted`` and output ``id``, ``key``, ``seq``, ``batch_id``; the flush rule
    also needs output ``emitted_at`` and ledger ``produced_at``: without them the other rules still run,
    and the verdict is False if they found something, else ``"unknown"`` (never a pass). Batches are
    emitted in order of ``emitted_at`` (ties and a missing column: first appearance in delivery order).
    Size and contiguity count every row; the order and flush rules judge first deliveries of acknowledged
    committed records only, as in :class:`PerKeyOrderChecker` (a replayed record's age measures the
    replay, not the flush; an indeterminate record's place and age are not known). ``data`` has
    ``indeterminate_skipped`` (first deliveries of indeterminate records, not judged by those rules).
    """

    name = "aggregator_batch"
    ledger_columns = ("id", "aborted")
    output_columns = ("id", "key", "seq", "batch_id")

    def __init__(
        self, max_batch_size: int, max_wait_s: float, slack_s: float = 0.0,
        pauses: Sequence[tuple[float, float]] = (),
    ) -> None:
        self.max_batch_size = int(max_batch_size)
        self.max_wait_s = float(max_wait_s)
        self.slack_s = float(slack_s)
        self.pauses = [(float(start), float(end)) for start, end in pauses]

    def __repr__(self) -> str:
        return (
            f"AggregatorBatchChecker(max_batch_size={self.max_batch_size}, "
            f"max_wait_s={self.max_wait_s}, slack_s={self.slack_s}, pauses={len(self.pauses)})"
        )

    def _check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        missing = _missing(output, ("emitted_at",), "output") + _missing(ledger, ("produced_at",), "ledger")
        fates = _Fates.of(ledger)
        batches = _Emission.of(output)
        eligible = batches.first_delivered(fates.ids[fates.acked])
        indeterminate = batches.first_delivered(fates.ids[fates.indeterminate]).size
        redeliveries = int(np.count_nonzero(batches.redelivered))
        counts: dict[str, int] = {
            "batches": batches.count,
            "records": batches.rows.size,
            "redeliveries_skipped": redeliveries,
            "uncommitted_skipped": batches.rows.size - redeliveries - eligible.size - indeterminate,
        }
        candidates = (
            self._sizes(batches, counts) + _non_contiguous(batches, counts) + _batch_orders(batches, eligible, counts)
        )
        if not missing:
            candidates += self._flushes(batches, eligible, ledger, counts)
        found = sum(counts[k] for k in _AGGREGATOR_FINDINGS if k in counts)
        result = _result(self.name, counts, found, _first(candidates))
        result.data = {"indeterminate_skipped": indeterminate}
        if missing:
            result.error = "; ".join(missing) + ": flush latency not checked"
            result.valid = False if found else UNKNOWN
        return result

    def _sizes(self, batches: _Emission, counts: dict[str, int]) -> list[tuple[int, dict]]:
        sizes = batches.sizes
        oversized = np.flatnonzero(sizes > self.max_batch_size)
        counts["max_batch_size_seen"] = int(sizes.max()) if sizes.size else 0
        counts["oversized_batches"] = oversized.size
        starts = batches.starts[oversized[:MAX_VIOLATIONS]]
        details = {"size": sizes[oversized[:MAX_VIOLATIONS]], "max_batch_size": self.max_batch_size}
        return _ranked_rows("oversized_batch", batches, starts, details)

    def _flushes(
        self, batches: _Emission, eligible: np.ndarray, ledger: pd.DataFrame, counts: dict[str, int]
    ) -> list[tuple[int, dict]]:
        if batches.count == 0:
            counts.update(batches_latency_judged=0, late_flushes=0, max_flush_latency_ms=0, max_unpaused_latency_ms=0)
            return []
        # A batch is visible once its last row is out, so the batch's latest emitted_at counts.
        emitted = np.maximum.reduceat(_floats(batches.output, "emitted_at", batches.rows), batches.starts)
        produced, arrived = _produced_and_arrived(ledger, batches.ids[eligible])
        judged, oldest = _group_argmin(batches.batch[eligible], arrived)
        oldest_rows = batches.rows[eligible[oldest]]
        latency = emitted[judged] - arrived[oldest]
        paused = overlap_s(arrived[oldest], emitted[judged], self.pauses)
        limit = self.max_wait_s + self.slack_s
        late = np.flatnonzero(latency - paused > limit)
        counts["batches_latency_judged"] = judged.size
        counts["late_flushes"] = late.size
        counts["max_flush_latency_ms"] = int(round(latency.max() * 1000)) if latency.size else 0
        counts["max_unpaused_latency_ms"] = int(round((latency - paused).max() * 1000)) if latency.size else 0
        shown = late[:MAX_VIOLATIONS]
        details = {
            "latency_s": latency[shown],
            "paused_s": paused[shown],
            "limit_s": limit,
            "produced_at": produced[oldest[shown]],
            "arrived_at": arrived[oldest[shown]],
            "emitted_at": emitted[judged[shown]],
        }
        return _ranked_rows("late_flush", batches, batches.starts[judged[shown]], details, row=oldest_rows[shown])


_AGGREGATOR_FINDINGS = ("oversized_batches", "non_contiguous_keys", "batch_order", "cross_batch_order", "late_flushes")


# --------------------------------------------------------------------------------------------------
# Aggregator helpers


@dataclass
class _Emission:
    """The aggregator output in emission order: batches by emission rank, delivery order inside."""

    output: pd.DataFrame
    rows: np.ndarray  # output row of each emission position
    batch: np.ndarray  # emission rank of each position's batch (non-decreasing)
    keys: np.ndarray  # key code of each position
    n_keys: int
    ids: np.ndarray
    seqs: np.ndarray
    redelivered: np.ndarray
    count: int

    @classmethod
    def of(cls, output: pd.DataFrame) -> _Emission:
        delivery = _delivery_order(output)
        if delivery is None:
            delivery = np.arange(len(output))
        codes, n_batches = _codes(pd.Series(output["batch_id"].to_numpy()[delivery]))
        batch = _batch_ranks(output, delivery, codes, n_batches)[codes]
        by_batch = _stable_group_order(batch, n_batches)
        emission = delivery[by_batch]
        keys, n_keys = _key_codes(output["key"])
        ids = _ints(output, "id")[emission]
        return cls(
            output=output,
            rows=emission,
            batch=batch[by_batch],
            keys=keys[emission],
            n_keys=n_keys,
            ids=ids,
            seqs=_ints(output, "seq")[emission],
            redelivered=_redeliveries(ids),
            count=n_batches,
        )

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.batch, minlength=self.count)

    @property
    def starts(self) -> np.ndarray:
        """Emission position of each batch's first row, by emission rank."""
        return np.searchsorted(self.batch, np.arange(self.count))

    def first_delivered(self, wanted_ids: np.ndarray) -> np.ndarray:
        """Emission positions of first deliveries of ``wanted_ids`` (acknowledged ones: what the order rules judge)."""
        return np.flatnonzero(~self.redelivered & _isin(self.ids, wanted_ids))


def _batch_ranks(output: pd.DataFrame, delivery: np.ndarray, codes: np.ndarray, n_batches: int) -> np.ndarray:
    """Emission rank per batch code: by latest ``emitted_at``, ties by first appearance."""
    appearance = np.arange(n_batches)
    if "emitted_at" not in output.columns or n_batches == 0:
        return appearance
    emitted = _floats(output, "emitted_at", delivery)
    per_batch = np.full(n_batches, -np.inf)
    np.maximum.at(per_batch, codes, emitted)
    rank = np.empty(n_batches, dtype=np.int64)
    rank[np.lexsort((appearance, per_batch))] = appearance
    return rank


def _non_contiguous(batches: _Emission, counts: dict[str, int]) -> list[tuple[int, dict]]:
    """A key's records inside one batch must form a single run."""
    n = batches.rows.size
    run_start = np.ones(n, dtype=bool)
    run_start[1:] = (batches.batch[1:] != batches.batch[:-1]) | (batches.keys[1:] != batches.keys[:-1])
    starts = np.flatnonzero(run_start)
    pairs = pd.DataFrame({"batch": batches.batch[starts], "key": batches.keys[starts]})
    again = starts[pairs.duplicated().to_numpy()]
    counts["non_contiguous_keys"] = again.size
    return _ranked_rows("non_contiguous_key", batches, again[:MAX_VIOLATIONS])


def _batch_orders(batches: _Emission, eligible: np.ndarray, counts: dict[str, int]) -> list[tuple[int, dict]]:
    """Per key: seq increases inside each batch, and each batch continues the key's earlier batches."""
    positions = eligible[_stable_group_order(batches.keys[eligible], batches.n_keys)]
    keys, batch, seqs = batches.keys[positions], batches.batch[positions], batches.seqs[positions]
    # (key, batch) groups are contiguous here: positions are grouped by key, then in emission order.
    new_group = np.ones(positions.size, dtype=bool)
    new_group[1:] = (keys[1:] != keys[:-1]) | (batch[1:] != batch[:-1])
    previous, has_previous = _previous_max(np.cumsum(new_group), seqs)
    inside = np.flatnonzero(has_previous & (seqs <= previous))
    counts["batch_order"] = inside.size
    shown = _first_k(positions[inside], MAX_VIOLATIONS)
    candidates = _ranked_rows(
        "batch_order", batches, positions[inside[shown]], {"previous_seq": previous[inside[shown]]}
    )
    return candidates + _cross_batch(batches, positions, keys, seqs, np.flatnonzero(new_group), counts)


def _cross_batch(
    batches: _Emission,
    positions: np.ndarray,
    keys: np.ndarray,
    seqs: np.ndarray,
    group_starts: np.ndarray,
    counts: dict[str, int],
) -> list[tuple[int, dict]]:
    """A batch's lowest seq for a key must exceed the highest seq of that key in earlier batches."""
    if group_starts.size == 0:
        counts["cross_batch_order"] = 0
        return []
    lowest = np.minimum.reduceat(seqs, group_starts)
    highest = np.maximum.reduceat(seqs, group_starts)
    earlier, has_earlier = _previous_max(keys[group_starts], highest)
    bad = np.flatnonzero(has_earlier & (lowest <= earlier))
    counts["cross_batch_order"] = bad.size
    bad = bad[_first_k(positions[group_starts[bad]], MAX_VIOLATIONS)]
    ends = np.append(group_starts[1:], positions.size)
    # The reported record is the group's lowest seq: the one that went backwards.
    worst = [group_starts[g] + int(np.argmin(seqs[group_starts[g] : ends[g]])) for g in bad]
    return _ranked_rows(
        "cross_batch_order",
        batches,
        positions[group_starts[bad]],
        {"previous_seq": earlier[bad]},
        row=batches.rows[positions[worst]] if worst else None,
    )


def _produced_and_arrived(ledger: pd.DataFrame, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """When each record was produced, and when the query read it (ledger ``arrived_at``, never before it was
    produced; the produce time where the column is missing or has no value)."""
    where = _positions(_ints(ledger, "id"), ids)
    produced = ledger["produced_at"].to_numpy(dtype=np.float64)[where]
    if np.isnan(produced).any():
        raise ValueError(f"ledger.produced_at has {int(np.isnan(produced).sum())} missing values")
    if "arrived_at" not in ledger.columns:
        return produced, produced
    arrived = ledger["arrived_at"].to_numpy(dtype=np.float64)[where]
    return produced, np.where(np.isnan(arrived), produced, np.maximum(arrived, produced))


def _group_argmin(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For values grouped by a non-decreasing ``groups``: each group's label and its argmin position."""
    if values.size == 0:
        return groups[:0], groups[:0].astype(np.intp)
    # Sorting by (group, value) puts each group's minimum first; ties keep the earlier position.
    order = np.lexsort((np.arange(values.size), values, groups))
    first = np.ones(values.size, dtype=bool)
    first[1:] = groups[order][1:] != groups[order][:-1]
    return groups[order][first], order[first]


def _ranked_rows(
    kind: str,
    batches: _Emission,
    positions: np.ndarray,
    details: dict[str, Any] | None = None,
    row: np.ndarray | None = None,
) -> list[tuple[int, dict]]:
    """Violations at emission ``positions`` (≤ MAX_VIOLATIONS), each with its position as the rank."""
    rows = batches.rows[positions] if row is None else np.asarray(row)
    found = _describe_rows(kind, batches.output, rows, details)
    return list(zip((int(p) for p in positions), found, strict=True))


# --------------------------------------------------------------------------------------------------
# Shared vectorised helpers


def _missing(frame: pd.DataFrame, columns: Sequence[str], label: str) -> list[str]:
    return [f"missing column {c!r} in {label}" for c in columns if c not in frame.columns]


def _ints(frame: pd.DataFrame, column: str) -> np.ndarray:
    series = frame[column]
    # Floats or strings here mean the input was built wrong; judging them could give a false pass.
    # An empty column has nothing to misjudge, whatever dtype its reader gave it.
    if len(series) and not pd.api.types.is_integer_dtype(series.dtype):
        raise TypeError(f"column {column!r} must be integer, got {series.dtype}")
    return series.to_numpy(dtype=np.int64)


def _bools(frame: pd.DataFrame, column: str) -> np.ndarray:
    series = frame[column]
    if len(series) and not pd.api.types.is_bool_dtype(series.dtype):
        raise TypeError(f"column {column!r} must be boolean, got {series.dtype}")
    return series.to_numpy(dtype=bool)


def _floats(frame: pd.DataFrame, column: str, rows: np.ndarray) -> np.ndarray:
    values = frame[column].to_numpy(dtype=np.float64)[rows]
    if np.isnan(values).any():
        raise ValueError(f"column {column!r} has {int(np.isnan(values).sum())} missing values")
    return values


@dataclass
class _Fates:
    """Each ledger record's fate, row by row: ``acked`` (owed), ``indeterminate`` or ``aborted`` (exactly one)."""

    ids: np.ndarray
    acked: np.ndarray
    indeterminate: np.ndarray
    aborted: np.ndarray

    @classmethod
    def of(cls, ledger: pd.DataFrame) -> _Fates:
        ids = _ints(ledger, "id")
        aborted = _bools(ledger, "aborted")
        if "status" not in ledger.columns:
            return cls(ids, ~aborted, np.zeros(ids.size, dtype=bool), aborted)
        codes, statuses = pd.factorize(ledger["status"])  # one hashing pass, not one comparison per status
        strange = [str(s) for s in statuses if s not in _STATUSES] + (["<missing>"] if (codes < 0).any() else [])
        if strange:
            raise ValueError(f"column 'status' has values {strange}; a ledger status is one of {', '.join(_STATUSES)}")
        code = {status: i for i, status in enumerate(statuses)}
        aborted = aborted | (codes == code.get("aborted", -1))
        indeterminate = (codes == code.get("indeterminate", -1)) & ~aborted
        return cls(ids, ~aborted & ~indeterminate, indeterminate, aborted)


def _accounting(fates: _Fates, delivered: np.ndarray, output_ids: np.ndarray) -> dict[str, int]:
    """Jepsen's set accounting: ledger records by fate and delivery (``delivered`` per ledger row), output ids."""
    repeated = _repeated(output_ids)
    unknown = ~_isin(output_ids, fates.ids)
    return {
        "attempted": int(np.count_nonzero(~fates.aborted)),
        "acknowledged": int(np.count_nonzero(fates.acked)),
        "indeterminate": int(np.count_nonzero(fates.indeterminate)),
        "aborted": int(np.count_nonzero(fates.aborted)),
        "ok": int(np.count_nonzero(fates.acked & delivered)),
        "recovered": int(np.count_nonzero(fates.indeterminate & delivered)),
        "unrecovered": int(np.count_nonzero(fates.indeterminate & ~delivered)),
        "lost": int(np.count_nonzero(fates.acked & ~delivered)),
        "duplicated": int(np.unique(output_ids[repeated]).size),
        "unexpected": int(np.unique(output_ids[unknown]).size),
        "aborted_read": int(np.count_nonzero(fates.aborted & delivered)),
    }


class _Excuses:
    """Per key, the seqs of indeterminate records: the order checker numbers acknowledged records without them.

    Keys are the output's key codes (``key_values`` maps a code to its key), so nothing hashes every ledger
    key; (code, seq) pairs are packed into one sortable int.
    """

    def __init__(self, held: np.ndarray, low: int, span: int) -> None:
        self.held = held  # sorted unique packed (code, seq) of the indeterminate records
        self.low = low
        self.span = span
        # Each held value's run of consecutive held seqs ends before ``run_end`` (the next seq not held); a run
        # never crosses into the next key, whose packed values start above every seq plus one.
        last = np.append(np.flatnonzero(np.diff(held) != 1), held.size - 1) if held.size else held
        self.run_end = np.repeat(held[last] + 1, np.diff(np.append(-1, last)))

    @classmethod
    def of(cls, ledger: pd.DataFrame, fates: _Fates, key_values: pd.Index, seqs: np.ndarray) -> _Excuses | None:
        """None when nothing is excused; ``seqs`` are the seqs to be numbered. Excused: indeterminate records,
        and aborted ones that hold a seq (a transaction planned to commit whose commit failed)."""
        excused = fates.indeterminate.copy()
        if fates.aborted.any() and "seq" in ledger.columns:
            excused |= fates.aborted & (_ints(ledger, "seq") >= 0)
        if not excused.any():
            return None
        missing = _missing(ledger, ("key", "seq"), "ledger")
        if missing:
            raise ValueError("; ".join(missing) + " (needed to number records around the indeterminate ones)")
        rows = np.flatnonzero(excused)
        codes = key_values.get_indexer(ledger["key"].iloc[rows].to_numpy())
        held_seqs = _ints(ledger, "seq")[rows][codes >= 0]  # a key never delivered has nothing to excuse
        codes = codes[codes >= 0]
        low = min(0, int(seqs.min(initial=0)), int(held_seqs.min(initial=0)))
        span = max(int(seqs.max(initial=0)), int(held_seqs.max(initial=0))) - low + 2
        if (len(key_values) + 1) * span >= _PACK_LIMIT:
            raise ValueError("seqs too large to number records around the indeterminate ones")
        return cls(np.unique(codes.astype(np.int64) * span + (held_seqs - low)), low, span)

    def _pack(self, codes: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        return codes * self.span + (seqs - self.low)

    def below(self, codes: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Per (key code, seq): how many indeterminate records of that key have a lower seq."""
        n_codes = int(codes.max(initial=-1)) + 1
        first = np.searchsorted(self.held, np.arange(n_codes, dtype=np.int64) * self.span)  # per key code
        return np.searchsorted(self.held, self._pack(codes, seqs)) - first[codes]

    def next_owed(self, codes: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Per (key code, seq): the first seq from ``seqs`` on that no indeterminate record of the key has."""
        packed = self._pack(codes, seqs)
        at = np.searchsorted(self.held, packed)
        hit = np.flatnonzero(at < self.held.size)
        hit = hit[self.held[at[hit]] == packed[hit]]
        owed = seqs.copy()
        owed[hit] += self.run_end[at[hit]] - packed[hit]
        return owed


def _isin(values: np.ndarray, universe: np.ndarray) -> np.ndarray:
    """``np.isin(values, universe)`` for int arrays; dense ids (the workload's) use a lookup table, not a sort."""
    if values.size == 0 or universe.size == 0:
        return np.zeros(values.size, dtype=bool)
    low = min(int(values.min()), int(universe.min()))
    span = max(int(values.max()), int(universe.max())) - low + 1
    if span > 4 * (values.size + universe.size) + 1024:
        return np.isin(values, universe)
    table = np.zeros(span, dtype=bool)
    table[universe - low] = True
    return table[values - low]


def _positions(universe: np.ndarray | pd.Index, wanted: np.ndarray) -> np.ndarray:
    """Position in ``universe`` (unique ints; an Index is reused as is) of each ``wanted`` id; all must be there."""
    index = universe if isinstance(universe, pd.Index) else pd.Index(universe)
    where = index.get_indexer(wanted)
    if (where < 0).any():
        raise ValueError("ids missing from the ledger")
    return where


def _codes(values: pd.Series) -> tuple[np.ndarray, int]:
    """Dense int codes in order of first appearance; a missing value is a group of its own."""
    return _codes_and_values(values)[:2]


def _codes_and_values(values: pd.Series) -> tuple[np.ndarray, int, pd.Index]:
    """:func:`_codes`, and the value of each code (a missing value's code, the last, has none)."""
    # The NA sentinel is then remapped by hand: use_na_sentinel=False costs an extra pass over the data.
    codes, uniques = pd.factorize(values)
    codes = codes.astype(np.int64, copy=False)
    missing = codes < 0
    if missing.any():
        codes[missing] = len(uniques)
        return codes, len(uniques) + 1, pd.Index(uniques)
    return codes, len(uniques), pd.Index(uniques)


def _key_codes(keys: pd.Series) -> tuple[np.ndarray, int]:
    """Int codes for keys; categorical keys reuse their codes, which skips hashing every string."""
    return _key_codes_and_values(keys)[:2]


def _key_codes_and_values(keys: pd.Series) -> tuple[np.ndarray, int, pd.Index]:
    """:func:`_key_codes`, and the key of each code (a missing key's code, the last, has none)."""
    if isinstance(keys.dtype, pd.CategoricalDtype):
        codes = keys.cat.codes.to_numpy().astype(np.int64)
        n = len(keys.cat.categories)
        codes[codes < 0] = n
        return codes, n + 1, pd.Index(keys.cat.categories)
    return _codes_and_values(keys)


def _delivery_order(output: pd.DataFrame) -> np.ndarray | None:
    """Output rows in delivery order: by ``position`` (ties by ``seq``), else ``partition``/``offset``; None means
    as given."""
    if "position" in output.columns:
        position = output["position"].to_numpy()
        order = np.argsort(position, kind="stable")
        tied = position.size > 1 and bool(np.any(position[order[1:]] == position[order[:-1]]))
        if tied and "seq" in output.columns and output["seq"].dtype.kind in "iu":
            return np.lexsort((output["seq"].to_numpy(), position))
        return order
    if "partition" in output.columns and "offset" in output.columns:
        return np.lexsort((output["offset"].to_numpy(), output["partition"].to_numpy()))
    return None


def _take(values: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """``values`` in delivery ``order``; row order (None) needs no copy."""
    return values if order is None else values[order]


def _rows_at(ranks: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """Output rows of the given delivery ``ranks``."""
    return ranks if order is None else order[ranks]


def _stable_group_order(codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Stable argsort of int ``codes`` in ``[0, n_groups)``."""
    top = n_groups - 1
    # numpy's stable sort is a radix sort for 16-bit ints: one pass up to 65536 codes, two (LSD) up to 2**32.
    if top < 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    if top < 1 << 32:
        low = np.argsort((codes & 0xFFFF).astype(np.uint16), kind="stable")
        high = np.argsort((codes[low] >> 16).astype(np.uint16), kind="stable")
        return low[high]
    return np.argsort(codes, kind="stable")


def _sorted_codes(codes: np.ndarray, n_groups: int) -> np.ndarray:
    """``codes`` sorted ascending, built by counting: cheaper than gathering through the sort order."""
    return np.repeat(np.arange(n_groups, dtype=np.int64), np.bincount(codes, minlength=n_groups))


def _previous_max(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows whose non-negative int ``groups`` never decrease: the max of earlier values in the same group.

    Returns ``(previous, has_previous)``; ``previous`` is meaningless where ``has_previous`` is False.
    """
    n = values.size
    has_previous = np.zeros(n, dtype=bool)
    has_previous[1:] = groups[1:] == groups[:-1]
    previous = np.zeros(n, dtype=np.int64)
    if n < 2:
        return previous, has_previous
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span < _PACK_LIMIT and (int(groups[-1]) + 1) * span < _PACK_LIMIT:
        # One global running max over (group, value) packed into one int: each group starts above
        # every earlier group, so the running max never leaks across groups.
        packed = groups * span
        packed += values
        packed -= low
        np.maximum.accumulate(packed, out=packed)
        np.multiply(groups[1:], span, out=previous[1:])
        np.subtract(packed[:-1], previous[1:], out=previous[1:])
        previous += low
    else:
        previous[1:] = pd.Series(values).groupby(groups).cummax().to_numpy()[:-1]
    return previous, has_previous


def _redeliveries(ids: np.ndarray) -> np.ndarray:
    """True for every occurrence of an id after its first."""
    repeated = _repeated(ids)
    result = np.zeros(ids.size, dtype=bool)
    rows = np.flatnonzero(repeated)
    if rows.size:
        result[rows] = pd.Series(ids[rows]).duplicated(keep="first").to_numpy()
    return result


def _repeated(ids: np.ndarray) -> np.ndarray:
    """True for every occurrence of an id that occurs more than once."""
    if ids.size == 0:
        return np.zeros(0, dtype=bool)
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    # Workload ids are dense, so a counting table beats hashing; sparse ids fall back to hashing.
    if span <= 4 * ids.size + 1024:
        offsets = ids - low
        return np.bincount(offsets, minlength=span)[offsets] > 1
    return pd.Series(ids).duplicated(keep=False).to_numpy()


def _first_rows(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row of the first occurrence of each of a few ``wanted`` ids."""
    rows = np.flatnonzero(np.isin(ids, wanted))
    first = pd.Series(rows, index=ids[rows]).groupby(level=0).first()
    return first.reindex(wanted).to_numpy()


def _first_k(ranks: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` smallest ranks, ascending."""
    if ranks.size > k:
        picked = np.argpartition(ranks, k)[:k]
        return picked[np.argsort(ranks[picked], kind="stable")]
    return np.argsort(ranks, kind="stable")


def _ranked(
    kind: str, output: pd.DataFrame, ranks: np.ndarray, order: np.ndarray, **details: np.ndarray
) -> list[tuple[int, dict]]:
    """The earliest few of the findings at delivery ``ranks`` as (rank, violation) pairs."""
    shown = _first_k(ranks, MAX_VIOLATIONS)
    rows = _rows_at(ranks[shown], order)
    described = _describe_rows(kind, output, rows, {k: v[shown] for k, v in details.items()})
    return list(zip((int(r) for r in ranks[shown]), described, strict=True))


def _first(candidates: list[tuple[int, dict]]) -> list[dict]:
    """The earliest MAX_VIOLATIONS violations among several kinds' own first few."""
    return [v for _, v in sorted(candidates, key=lambda c: c[0])[:MAX_VIOLATIONS]]


def _describe_rows(
    kind: str,
    frame: pd.DataFrame,
    rows: np.ndarray,
    details: dict[str, Any] | None = None,
    row_label: str = "row",
) -> list[dict]:
    """Violation dicts for the first MAX_VIOLATIONS ``rows`` of ``frame``; array details are per row."""
    rows = np.asarray(rows)[:MAX_VIOLATIONS]
    picked = frame.iloc[rows]
    columns = [c for c in ("id", "key", "seq", "batch_id") if c in frame.columns]
    found = []
    for i, row in enumerate(rows):
        violation: dict[str, Any] = {"kind": kind}
        violation.update({c: _plain(picked[c].iat[i]) for c in columns})
        violation[row_label] = int(row)
        for name, value in (details or {}).items():
            violation[name] = _plain(value[i] if isinstance(value, np.ndarray | list) else value)
        found.append(violation)
    return found


def _result(name: str, counts: dict[str, Any], n_violations: int, violations: list[dict]) -> CheckResult:
    return CheckResult(
        name=name,
        valid=n_violations == 0,
        counts={k: int(v) for k, v in counts.items()},
        violations=violations,
    )


def _unknown(name: str, error: str) -> CheckResult:
    return CheckResult(name=name, valid=UNKNOWN, error=error)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _plain(value: Any) -> Any:
    """``value`` with numpy/pandas scalars turned into JSON-friendly Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else float(value)
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):  # before str: numpy's str_ is one, and would show as np.str_('...')
        return value.item()
    if isinstance(value, str | int):
        return value
    return str(value)
