"""The comparison page, ``compare.html``: a baseline against a candidate, self-contained (inline CSS and SVG).

Two certifications: the verdicts that changed, regressions first. Two benchmarks: each case's metrics side by side
with the change and the regression checks' outcome, then each case both results have drawn over each other in
time (output records/s and p99 latency; the first repeat of each)."""

from __future__ import annotations

from html import escape
from typing import Any

from streamcert.reports.charts import series_svg
from streamcert.reports.compare import Comparison
from streamcert.reports.html import matrix_css
from streamcert.reports.regression import readable_number

__all__ = ["compare_html"]

_BASELINE, _CANDIDATE = "#7f7f7f", "#1f77b4"


def _value(value: float | None) -> str:
    return "–" if value is None else readable_number(value)


def _header(comparison: Comparison) -> str:
    badge = ('<span class="badge bad">regression</span>' if comparison.regressed
             else '<span class="badge ok">no regression</span>')
    baseline, candidate = (escape(path) for path in comparison.paths)
    problems = "".join(f'<p class="finding">{escape(problem)}</p>' for problem in comparison.problems)
    problems += "".join(f'<p class="warning">warning: {escape(warning)}</p>' for warning in comparison.warnings)
    return (f"<h1>streamcert compare {badge}</h1><p class=\"muted\">baseline <code>{baseline}</code> → candidate "
            f"<code>{candidate}</code> ({escape(comparison.kind)} results)</p>{problems}")


def _verdicts(comparison: Comparison) -> str:
    if not comparison.verdicts:
        return "<h2>Verdicts</h2><p>No verdict changed.</p>"
    rows = "".join(
        f'<tr class="{"fail" if change.regressed else "pass"}"><td>{"REGRESSION" if change.regressed else "changed"}'
        f"</td><td>{escape(change.connector)}</td><td>{escape(change.requirement)}</td>"
        f"<td>{escape(change.before or '–')}</td><td>{escape(change.after or '–')}</td>"
        f'<td class="small">{escape(change.reason[:400])}</td></tr>' for change in comparison.verdicts)
    return ("<h2>Verdicts that changed</h2><table><tr><th></th><th>connector</th><th>requirement</th><th>baseline"
            f"</th><th>candidate</th><th>reason</th></tr>{rows}</table>")


def _metrics(comparison: Comparison) -> str:
    outcomes = {(o.case, o.metric): o for o in comparison.checks}
    rows = []
    for case, metrics in comparison.metrics.items():
        for metric, (before, after) in metrics.items():
            change = f"{(after - before) / before * 100:+.1f} %" if before and after is not None else "–"
            outcome = outcomes.get((case, metric))
            verdict = ("" if outcome is None else
                       f'<td class="{"fail" if outcome.regressed else "pass"}">'
                       f'{"REGRESSION" if outcome.regressed else "ok"} ({escape(outcome.check)})</td>')
            rows.append(f"<tr><td>{escape(case)}</td><td>{escape(metric)}</td><td>{_value(before)}</td>"
                        f"<td>{_value(after)}</td><td>{change}</td>{verdict or '<td></td>'}</tr>")
    return ("<h2>Metrics side by side</h2><table><tr><th>case</th><th>metric</th><th>baseline</th><th>candidate</th>"
            f"<th>change</th><th>check</th></tr>{''.join(rows)}</table>")


def _first_run(results: dict[str, Any], case: str) -> dict[str, Any] | None:
    body = (results.get("cases") or {}).get(case) or {}
    return next((run for run in body.get("runs") or [] if "series" in run), None)


def _overlays(comparison: Comparison) -> str:
    parts = []
    for case in comparison.metrics:
        runs = [(label, _first_run(results, case), colour) for label, results, colour in (
            ("baseline", comparison.baseline, _BASELINE), ("candidate", comparison.candidate, _CANDIDATE))]
        runs = [(label, run, colour) for label, run, colour in runs if run is not None]
        if not runs:
            continue

        def lines(key: str, runs=runs) -> list[dict[str, Any]]:
            return [{"label": label, "x": run["series"]["second"], "y": run["series"][key], "colour": colour}
                    for label, run, colour in runs]

        svg = series_svg([{"ylabel": "output records/s", "lines": lines("output_per_s")},
                          {"ylabel": "p99 latency ms", "lines": lines("latency_p99_ms")}],
                         title=f"{case}: baseline and candidate over time (first repeat of each)",
                         xlabel="seconds since the load began")
        if svg:
            parts.append(f'<div class="run">{svg}</div>')
    return "<h2>Over time, overlaid</h2>" + "".join(parts) if parts else ""


def compare_html(comparison: Comparison) -> str:
    """The whole page as one string."""
    if comparison.kind == "certification":
        body = _header(comparison) + _verdicts(comparison)
    else:
        body = _header(comparison) + _metrics(comparison) + _overlays(comparison)
    css = matrix_css() + ".small{font-size:12px}.warning{color:#8a5a00;background:#fff4d6;padding:4px 8px}"
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>streamcert compare</title><style>{css}</style></head><body><main>{body}</main></body></html>\n")
