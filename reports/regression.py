"""Regression checks, given as text (``throughput:-5%``, ``p99_latency:+10%``): which way a metric may not move,
and by how much, between a baseline and a candidate. Small objects: parse, then evaluate on two numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamcert.harness.errors import ConfigurationError

__all__ = ["RegressionCheck", "CheckOutcome", "parse_check", "readable_number"]

def readable_number(value: float | None) -> str:
    """A figure as people read it: ``10,030`` rather than ``1.003e+04``, four digits below a thousand."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


_PATTERN = re.compile(r"^(?P<metric>[A-Za-z0-9_.\-]+):(?P<sign>[+-])(?P<pct>[0-9]+(\.[0-9]+)?)%$")


@dataclass(frozen=True)
class CheckOutcome:
    """One metric of one case, baseline against candidate."""

    metric: str
    case: str
    before: float
    after: float
    change_pct: float
    regressed: bool
    check: str

    def message(self) -> str:
        verdict = "REGRESSION" if self.regressed else "ok"
        return (f"{verdict}: {self.case} {self.metric} {readable_number(self.before)} -> {readable_number(self.after)} "
                f"({self.change_pct:+.1f}%, limit {self.check})")


@dataclass(frozen=True)
class RegressionCheck:
    """``metric`` may not fall (``-``) or rise (``+``) by more than ``limit_pct`` percent."""

    metric: str
    direction: str
    limit_pct: float

    def __str__(self) -> str:
        return f"{self.metric}:{self.direction}{self.limit_pct:g}%"

    def evaluate(self, case: str, before: float, after: float) -> CheckOutcome:
        if before == 0:
            change = 0.0 if after == 0 else float("inf") if after > 0 else float("-inf")
        else:
            change = (after - before) / abs(before) * 100.0
        regressed = change < -self.limit_pct if self.direction == "-" else change > self.limit_pct
        return CheckOutcome(self.metric, case, before, after, round(change, 3), regressed, str(self))


def parse_check(text: str) -> RegressionCheck:
    """``metric:-N%`` (a fall of more than N% regresses) or ``metric:+N%`` (a rise of more than N% regresses)."""
    match = _PATTERN.match(text.strip())
    if not match:
        raise ConfigurationError(f"{text!r} is not a regression check.",
                                 hint="Write METRIC:-N% (a fall of more than N% fails, e.g. throughput:-5%) or "
                                      "METRIC:+N% (a rise of more than N% fails, e.g. p99_latency:+10%).")
    return RegressionCheck(match["metric"], match["sign"], float(match["pct"]))
