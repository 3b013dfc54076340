"""Compare results: two certifications (the verdicts that changed, regressions first) or two benchmark results
(each case's metrics side by side, judged by regression checks). ``streamcert compare BASELINE CANDIDATE``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamcert.harness.errors import ConfigurationError
from streamcert.reports.certification import load_certification
from streamcert.reports.regression import CheckOutcome, RegressionCheck, readable_number

__all__ = ["Comparison", "VerdictChange", "compare_files", "bench_metrics"]

#: Verdict moves that are regressions: a requirement that passed no longer does (fails, is undecided, is no longer
#: claimed, or has no verdict at all), or a newly claimed or undecided one fails.
_WORSE = {("pass", "fail"), ("pass", "unknown"), ("pass", "skip"), ("pass", None), ("unknown", "fail"),
          ("skip", "fail")}


@dataclass(frozen=True)
class VerdictChange:
    connector: str
    requirement: str
    before: str | None
    after: str | None
    reason: str

    @property
    def regressed(self) -> bool:
        return (self.before, self.after) in _WORSE


@dataclass
class Comparison:
    """What changed between a baseline and a candidate, and whether any change is a regression."""

    kind: str
    verdicts: list[VerdictChange] = field(default_factory=list)
    metrics: dict[str, dict[str, tuple[float | None, float | None]]] = field(default_factory=dict)
    checks: list[CheckOutcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: what makes the comparison weaker without being a regression (cases offered different rates)
    warnings: list[str] = field(default_factory=list)
    #: the two results as read (the page draws their runs over each other)
    baseline: dict[str, Any] = field(default_factory=dict, repr=False)
    candidate: dict[str, Any] = field(default_factory=dict, repr=False)
    paths: tuple[str, str] = ("", "")

    @property
    def regressed(self) -> bool:
        return any(c.regressed for c in self.verdicts) or any(c.regressed for c in self.checks) or bool(
            self.problems)

    def lines(self) -> list[str]:
        out = []
        for change in self.verdicts:
            mark = "REGRESSION" if change.regressed else "changed"
            out.append(f"{mark}: {change.connector} {change.requirement} {change.before or '-'} -> "
                       f"{change.after or '-'}  {change.reason}")
        for case, metrics in self.metrics.items():
            for metric, (before, after) in metrics.items():
                out.append(f"{case} {metric}: {readable_number(before)} -> {readable_number(after)}")
        out += [outcome.message() for outcome in self.checks]
        out += [f"REGRESSION: {problem}" for problem in self.problems]
        out += [f"warning: {warning}" for warning in self.warnings]
        return out


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"No results file at {path}.",
                                 hint="Give two results.json of certifications, or two benchmark results.") from None
    except ValueError as exc:
        raise ConfigurationError(f"{path} is not JSON: {exc}.", hint="Give results files streamcert wrote.") from None
    return data


def _kind(data: dict[str, Any], path: Path) -> str:
    if data.get("kind") == "certification":
        return "certification"
    if "benchmark" in data and "cases" in data:
        return "bench"
    raise ConfigurationError(f"{path} is neither a certification's nor a benchmark's results.",
                             hint="`streamcert compare` takes two results of the same kind.")


def bench_metrics(data: dict[str, Any]) -> dict[str, dict[str, float]]:
    """case -> metric -> value: ``throughput`` (records/s), ``throughput_mb`` (MB/s) and ``<pNN>_latency``
    (ms), whichever a case has."""
    found: dict[str, dict[str, float]] = {}
    for case, body in (data.get("cases") or {}).items():
        metrics: dict[str, float] = {}
        if isinstance(body.get("records_per_s"), (int, float)):
            metrics["throughput"] = float(body["records_per_s"])
        if isinstance(body.get("mb_per_s"), (int, float)):
            metrics["throughput_mb"] = float(body["mb_per_s"])
        for name, value in (body.get("latency_ms") or {}).items():
            if isinstance(value, (int, float)) and name.startswith("p"):
                metrics[f"{name.replace('.', '_')}_latency"] = float(value)
        found[case] = metrics
    return found


def _compare_verdicts(before_path: Path, after_path: Path) -> Comparison:
    before, after = load_certification(before_path), load_certification(after_path)
    old = {(v["connector"], v["requirement"]): v for v in before.verdicts}
    new = {(v["connector"], v["requirement"]): v for v in after.verdicts}
    changes = [VerdictChange(key[0], key[1], old.get(key, {}).get("verdict"), new.get(key, {}).get("verdict"),
                             (new.get(key) or old.get(key) or {}).get("reason", ""))
               for key in sorted(set(old) | set(new))
               if old.get(key, {}).get("verdict") != new.get(key, {}).get("verdict")]
    changes.sort(key=lambda c: (not c.regressed, c.connector, c.requirement))
    comparison = Comparison("certification", verdicts=changes)
    if not after.results.get("complete"):
        comparison.problems.append(f"the candidate certification {after_path} is incomplete")
    return comparison


def _offered_rates(data: dict[str, Any]) -> dict[str, list[float]]:
    """case -> the distinct input rates (records/s) its measured runs were offered."""
    return {case: sorted({float(run["rate"]) for run in body.get("runs") or []
                          if isinstance(run.get("rate"), (int, float))})
            for case, body in (data.get("cases") or {}).items()}


def _rate_mismatches(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """A case offered other rates in the two results: its latency and throughput answer different questions."""
    old, new = _offered_rates(before), _offered_rates(after)
    return [f"{case} was offered {_rates(old[case])} records/s in the baseline and {_rates(new[case])} in the "
            "candidate: its figures compare different loads"
            for case in sorted(set(old) & set(new)) if old[case] and new[case] and old[case] != new[case]]


def _load_bound_warnings(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """A case whose searched rate was the load generator's ceiling: its throughput is the generator's reach."""
    bound: dict[str, list[str]] = {}
    for label, data in (("baseline", before), ("candidate", after)):
        for case, body in (data.get("cases") or {}).items():
            if body.get("load_bound"):
                bound.setdefault(case, []).append(label)
    return [f"{case}'s rate was load-bound in the {' and the '.join(labels)} (the most the load generator produced "
            "beside it): its throughput there is a lower bound, not the connector's ceiling"
            for case, labels in sorted(bound.items())]


def _rates(rates: list[float]) -> str:
    return " / ".join(readable_number(rate) for rate in rates)


def _compare_bench(before: dict[str, Any], after: dict[str, Any], checks: list[RegressionCheck]) -> Comparison:
    old, new = bench_metrics(before), bench_metrics(after)
    comparison = Comparison("bench")
    for case in sorted(set(old) | set(new)):
        names = sorted(set(old.get(case, {})) | set(new.get(case, {})))
        comparison.metrics[case] = {m: (old.get(case, {}).get(m), new.get(case, {}).get(m)) for m in names}
    comparison.warnings += _rate_mismatches(before, after) + _load_bound_warnings(before, after)
    for check in checks:
        measured = [(case, values[check.metric]) for case, values in comparison.metrics.items()
                    if check.metric in values]
        if not measured:
            comparison.problems.append(f"no case has the metric {check.metric!r} of the check {check}")
        for case, (before_value, after_value) in measured:
            if before_value is None or after_value is None:
                comparison.problems.append(f"{case} {check.metric} is missing from one of the two results")
                continue
            comparison.checks.append(check.evaluate(case, before_value, after_value))
    return comparison


def compare_files(baseline: Path | str, candidate: Path | str,
                  checks: list[RegressionCheck] | None = None) -> Comparison:
    """Compare two results of the same kind; regression checks apply to benchmark results."""
    baseline, candidate = Path(baseline), Path(candidate)
    for path in (baseline, candidate):
        if path.is_dir():
            raise ConfigurationError(f"{path} is a folder.", hint="Give the results.json inside it.")
    before, after = _load(baseline), _load(candidate)
    kinds = {_kind(before, baseline), _kind(after, candidate)}
    if len(kinds) != 1:
        raise ConfigurationError(f"{baseline} and {candidate} are results of different kinds ({', '.join(kinds)}).",
                                 hint="Compare a certification with a certification, a benchmark with a "
                                      "benchmark.")
    if kinds == {"certification"}:
        if checks:
            raise ConfigurationError("Regression checks apply to benchmark results, not certifications.",
                                     hint="Drop --check: a certification regresses when a verdict gets worse.")
        comparison = _compare_verdicts(baseline, candidate)
    else:
        from streamcert.benchmarks.bench import with_derived_figures

        # judged as today's streamcert judges (an older bench.json lacks the newer judgements, e.g. load-bound)
        before, after = with_derived_figures(before), with_derived_figures(after)
        comparison = _compare_bench(before, after, checks or [])
    comparison.baseline, comparison.candidate = before, after
    comparison.paths = (str(baseline), str(candidate))
    return comparison
