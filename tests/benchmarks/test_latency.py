"""The latency histogram's percentiles agree with the exact order statistics of known data (sorted with numpy),
within HDR's 0.1 % precision."""

from __future__ import annotations

import numpy as np
import pytest

from streamcert.benchmarks.latency import BENCH_PERCENTILES, LatencyHistogram


@pytest.mark.parametrize("seed", [1, 2])
def test_percentiles_match_numpy_within_a_tenth_of_a_percent(seed):
    values = np.random.default_rng(seed).lognormal(mean=4.0, sigma=1.2, size=50_000)  # ms, a long tail
    summary = LatencyHistogram().record_all(values).summary()
    ordered = np.sort(values)
    for p in BENCH_PERCENTILES:
        # the value at the rank that holds p % of the records (HDR's definition; numpy's inverted_cdf up to float
        # rounding of p * n)
        expected = float(ordered[max(1, int(p * len(values) / 100 + 0.5)) - 1])
        assert summary[f"p{p:g}"] == pytest.approx(expected, rel=2e-3), p
    assert summary["max"] == pytest.approx(values.max(), rel=1e-3) and summary["count"] == 50_000


def test_merged_histograms_are_one_distribution():
    low, high = LatencyHistogram().record_all([1.0] * 90), LatencyHistogram().record_all([100.0] * 10)
    merged = low.merge(high).summary()
    assert merged["count"] == 100 and merged["p50"] == pytest.approx(1.0, rel=1e-3)
    assert merged["p95"] == pytest.approx(100.0, rel=1e-3)


def test_an_empty_histogram_has_no_percentiles_and_odd_values_are_clamped():
    assert LatencyHistogram().summary() == {"p50": None, "p75": None, "p95": None, "p99": None, "p99.9": None,
                                            "max": None, "count": 0}
    clamped = LatencyHistogram().record_all([-5.0, 1e12]).summary()
    assert clamped["count"] == 2 and clamped["p50"] == pytest.approx(0.001) and clamped["max"] == pytest.approx(
        3_600_000, rel=1e-3)
