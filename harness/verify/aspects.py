"""Aspects of a checker: the part of its findings one requirement is about.

One checker may judge several rules at once (the aggregator's batches: size, order, flush latency), while each rule
is a requirement of its own: a batch one record too big must fail the size requirement, not the latency one. A
requirement names ``checker.aspect`` (``aggregator_batch.size``) and :func:`aspect_of` judges the checker's result
by that aspect's findings alone: invalid when any was found, unknown when the checker did not judge them (their
counts are absent: the columns they need were missing), valid otherwise, whatever the other aspects found. Called
in the harness's process, on a run's recorded results.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["Aspect", "ASPECTS", "aspect_names", "aspect_of"]


@dataclass(frozen=True)
class Aspect:
    """The counts that tally an aspect's findings and the ``kind`` of its violations."""

    counts: tuple[str, ...]
    violations: tuple[str, ...]


#: checker name -> aspect name -> its findings.
ASPECTS: dict[str, dict[str, Aspect]] = {
    "aggregator_batch": {
        "size": Aspect(("oversized_batches",), ("oversized_batch",)),
        "order": Aspect(("non_contiguous_keys", "batch_order", "cross_batch_order"),
                        ("non_contiguous_key", "batch_order", "cross_batch_order")),
        "latency": Aspect(("late_flushes",), ("late_flush",)),
    },
}


def aspect_names() -> set[str]:
    """Every ``checker.aspect`` a requirement may name."""
    return {f"{checker}.{aspect}" for checker, aspects in ASPECTS.items() for aspect in aspects}


def aspect_of(result: CheckResult, aspect: str) -> CheckResult:
    """``result`` judged by ``aspect``'s findings alone, named ``checker.aspect``."""
    found = ASPECTS[result.name][aspect]
    name = f"{result.name}.{aspect}"
    violations = [v for v in result.violations if v.get("kind") in found.violations]
    counts = {key: value for key, value in result.counts.items() if key in found.counts}
    if any(result.counts.get(key, 0) for key in found.counts):
        return CheckResult(name, False, counts, violations, None, result.data)
    if result.valid is True:
        return CheckResult(name, True, counts, [], None, result.data)
    if any(key not in result.counts for key in found.counts):
        return CheckResult(name, UNKNOWN, counts, [], result.error or f"{name} was not judged", result.data)
    return CheckResult(name, True, counts, [], None, result.data)
