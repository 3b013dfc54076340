"""End-to-end latency distributions: an HDR histogram (the maintained ``hdrhistogram`` package) of milliseconds
from produce to visible to a read_committed reader, with the percentiles a benchmark reports.

Values are recorded in microseconds with three significant digits, from 1 µs to one hour: the percentiles are
exact to 0.1 %, whatever the spread, in constant memory (a million records or a billion)."""

from __future__ import annotations

from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

__all__ = ["BENCH_PERCENTILES", "LatencyHistogram"]

#: The percentiles every benchmark reports, with the maximum.
BENCH_PERCENTILES = (50.0, 75.0, 95.0, 99.0, 99.9)
_LOWEST_US = 1
_HIGHEST_US = 3_600_000_000
_DIGITS = 3


class LatencyHistogram:
    """Latencies in milliseconds; :meth:`summary` gives ``p50`` .. ``p99.9``, ``max`` and ``count``."""

    def __init__(self) -> None:
        self._histogram = HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)

    def record(self, latency_ms: float) -> None:
        """One latency; negative ones (clock skew between producer and reader) count as zero, longer ones than an
        hour as an hour."""
        micros = int(round(latency_ms * 1000))
        self._histogram.record_value(min(max(micros, _LOWEST_US), _HIGHEST_US))

    def record_all(self, latencies_ms: Iterable[float]) -> "LatencyHistogram":
        for value in latencies_ms:
            self.record(value)
        return self

    def merge(self, other: "LatencyHistogram") -> "LatencyHistogram":
        self._histogram.add(other._histogram)
        return self

    @property
    def count(self) -> int:
        return int(self._histogram.get_total_count())

    def percentile_ms(self, percentile: float) -> float | None:
        if not self.count:
            return None
        return self._histogram.get_value_at_percentile(percentile) / 1000.0

    def summary(self) -> dict[str, float | int | None]:
        result: dict[str, float | int | None] = {f"p{p:g}": self.percentile_ms(p) for p in BENCH_PERCENTILES}
        result["max"] = self._histogram.get_max_value() / 1000.0 if self.count else None
        result["count"] = self.count
        return result
