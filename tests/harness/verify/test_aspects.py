"""Aspects of a checker: a requirement about one rule of a many-rule checker fails on that rule's findings only, is
unknown when the checker could not judge the rule, and passes whatever the other rules found."""

from __future__ import annotations

import pandas as pd
import pytest

from streamcert.harness.verify.aspects import ASPECTS, aspect_names, aspect_of
from streamcert.harness.verify.checkers import AggregatorBatchChecker, CheckResult


def _batches(sizes: list[int], emitted_after_s: float = 0.5, with_times: bool = True):
    """Output of an aggregator: batches of ``sizes`` records of one key each, in order."""
    rows, seq = [], 0
    for batch, size in enumerate(sizes):
        for _ in range(size):
            rows.append({"id": seq, "key": f"k{batch}", "seq": seq, "batch_id": batch,
                         **({"emitted_at": 100.0 + emitted_after_s} if with_times else {})})
            seq += 1
    ledger = pd.DataFrame({"id": range(seq), "aborted": False, "key": [r["key"] for r in rows],
                           "seq": range(seq), **({"produced_at": 100.0} if with_times else {})})
    return ledger, pd.DataFrame(rows)


def _checked(sizes, **options) -> CheckResult:
    ledger, output = _batches(sizes, **options)
    return AggregatorBatchChecker(max_batch_size=4, max_wait_s=2.0).check(ledger, output)


def test_a_batch_over_the_limit_fails_the_size_aspect_only():
    result = _checked([5, 3])
    assert result.valid is False
    assert aspect_of(result, "size").valid is False and aspect_of(result, "size").counts == {"oversized_batches": 1}
    assert aspect_of(result, "size").violations[0]["kind"] == "oversized_batch"
    assert aspect_of(result, "order").valid is True and aspect_of(result, "latency").valid is True


def test_a_late_flush_fails_the_latency_aspect_only():
    result = _checked([2, 3], emitted_after_s=9.0)
    assert aspect_of(result, "latency").valid is False
    assert aspect_of(result, "size").valid is True and aspect_of(result, "order").valid is True


def test_an_aspect_the_checker_could_not_judge_is_unknown():
    result = _checked([5], with_times=False)
    assert result.valid is False  # the size rule found something; the flush rule was not judged
    assert aspect_of(result, "latency").valid == "unknown" and "not checked" in aspect_of(result, "latency").error
    assert aspect_of(result, "size").valid is False


@pytest.mark.parametrize("name", sorted(aspect_names()))
def test_every_aspect_names_counts_its_checker_reports(name):
    checker, _, aspect = name.partition(".")
    result = _checked([2, 3])
    assert set(ASPECTS[checker][aspect].counts) <= set(result.counts), name
