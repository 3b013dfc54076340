"""The event-time drift check (SRC-11) on hand-made ledgers and outputs: an aligned read passes, a read that lets a
partition's skewed backlog through fails with the spread measured, and what it cannot judge is unknown."""

from __future__ import annotations

import pandas as pd

from streamcert.harness.verify.checkers import Checker
from streamcert.harness.verify.event_time import EventTimeDriftChecker

STEP = 1000  # ms between two records of a partition
LEAD = 30_000  # partition 1 leads partition 0 by half a minute (half its span)


def _ledger(per_partition: int = 60) -> pd.DataFrame:
    rows = []
    for partition, lead in ((0, 0), (1, LEAD)):
        for index in range(per_partition):
            rows.append({"id": partition * 1000 + index, "partition": partition, "event_time": lead + index * STEP,
                         "status": "acked"})
    return pd.DataFrame(rows)


def _output(ledger: pd.DataFrame, batch_of) -> pd.DataFrame:
    return pd.DataFrame({"id": ledger["id"], "batch": [batch_of(row) for row in ledger.itertuples()]})


def test_the_drift_checker_is_a_checker():
    assert isinstance(EventTimeDriftChecker(5000), Checker)


def test_an_aligned_read_keeps_every_batch_within_the_bound_and_one_ms_less_is_a_finding():
    ledger = _ledger()
    # ten seconds of event time per batch, whichever partition: nothing past the other's head by 10 s or more
    output = _output(ledger, lambda row: row.event_time // 10_000)
    result = EventTimeDriftChecker(9_000).check(ledger, output)
    assert result.valid is True, result.to_dict()
    assert result.counts["max_spread_ms"] == 9_000 and result.counts["checked_batches"] > 0
    assert EventTimeDriftChecker(8_999).check(ledger, output).valid is False


def test_a_read_that_lets_the_leading_partition_s_backlog_through_fails_with_the_spread_measured():
    ledger = _ledger()
    # both partitions drained side by side, record for record (what a source without alignment does)
    output = _output(ledger, lambda row: (row.id % 1000) // 10)
    result = EventTimeDriftChecker(10_000).check(ledger, output)
    assert result.valid is False
    assert result.counts["max_spread_ms"] == LEAD + 9 * STEP
    first = result.violations[0]
    assert first["kind"] == "drift" and first["ahead"] == 1 and first["behind"] == 0
    assert first["spread_ms"] > first["bound_ms"] == 10_000


def test_a_partition_with_nothing_left_to_emit_holds_nothing_back():
    ledger = _ledger(10)
    # partition 0 entirely in batches 0-1, then partition 1 alone in batches 2-3, far ahead of where 0 ended
    output = _output(ledger, lambda row: (row.id % 1000) // 5 + 2 * row.partition)
    result = EventTimeDriftChecker(0).check(ledger, output)
    assert result.valid is True and result.counts["checked_batches"] == 2, result.to_dict()


def test_without_event_times_or_batches_the_drift_is_unknown():
    ledger = _ledger(3)
    output = _output(ledger, lambda row: 0)
    assert EventTimeDriftChecker(1).check(ledger.drop(columns="event_time"), output).valid == "unknown"
    assert EventTimeDriftChecker(1).check(ledger, output.drop(columns="batch")).valid == "unknown"
