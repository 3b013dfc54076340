"""The mutation score page: ``mutants.html`` from ``mutants.json`` (:mod:`streamcert.benchmarks.mutation`).

Self-contained (the certification page's style, no script, no network): the detection rate, then a table of
mutants (rows) by seeds (columns), each cell caught or MISSED with the moment of the kill that preceded the first
violation, then the connector requirements (rows) with the mutants that break each and how often they were caught
(a requirement no mutant proves is named: nothing shows its runs can fail), then per mutant its bug and, per
requirement and seed, the verdict and the checks that failed.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from streamcert.reports.html import matrix_css

__all__ = ["mutants_html", "write_mutants_html"]


def _cell(pair: dict[str, Any] | None) -> str:
    if pair is None:
        return '<td class="na">–</td>'
    if pair.get("unplanned"):
        return (f'<td class="na">not in the plan<br><span class="stmt">{escape(", ".join(pair["unplanned"]))} '
                'left to the full plan</span></td>')
    if not pair["caught"]:
        timeout = any(entry.get("timeout_only") for entry in pair["requirements"].values())
        return f'<td class="v fail">MISSED{" (timeout only)" if timeout else ""}</td>'
    entries = pair["requirements"].values()
    preceding = [kill for entry in entries if entry.get("attribution") == "preceding"
                 for kill in entry.get("killed_by", [])]
    how = ", ".join(sorted({_strike(kill) for kill in preceding}))
    if not preceding:  # a finding with no time of its own (a record lost, left over, misassigned)
        checks = sorted({finding["check"] for entry in entries for finding in entry.get("findings", [])})
        faulted = any(entry.get("killed_by") for entry in entries)
        how = ", ".join(checks) + (" after the run's faults" if faulted else " (no fault needed)")
    # a long list of moments may break after each of them, so five seed columns fit a page
    wrapped = escape(how).replace("+", "+<wbr>").replace("@", "<wbr>@")
    return f'<td class="v pass">caught<br><span class="stmt">{wrapped}</span></td>'


def _strike(kill: dict[str, Any]) -> str:
    """``moments@class`` of a moment kill, named by what it killed when that was not the driver."""
    fault = kill.get("fault") or "driver_kill"
    if kill.get("batch_class") is None:  # a fault not timed by a moment (a zombie, a timed kill): itself
        return fault
    where = f"{'+'.join(kill.get('moments') or [])}@{kill.get('batch_class')}"
    return where if fault.startswith("driver_kill") else f"{fault}: {where}"


def _details(name: str, pairs: list[dict[str, Any]]) -> str:
    rows = []
    for pair in pairs:
        for requirement, entry in pair["requirements"].items():
            checks = ", ".join(sorted({f"{f['run']}: {f['check']}" for f in entry.get("findings", [])}))
            rows.append(f"<tr><td>{pair['seed']}</td><td>{escape(requirement)}</td>"
                        f"<td class=\"{escape(str(entry.get('verdict')))}\">{escape(str(entry.get('verdict')))}</td>"
                        f"<td>{escape(checks or '–')}</td></tr>")
    bug = escape(pairs[0]["bug"]) if pairs else ""
    return (f"<details><summary><b>{escape(name)}</b> <span class=\"muted\">{bug}</span></summary><table>"
            "<tr><th>seed</th><th>requirement</th><th>verdict</th><th>failed checks</th></tr>"
            f"{''.join(rows)}</table></details>")


def _tally(pairs: list[dict[str, Any]]) -> str:
    """caught/measured for a mutant; a dash when the plan judges none of what it breaks."""
    if all(pair.get("unplanned") for pair in pairs):
        return "–"
    return f"{sum(1 for pair in pairs if pair['caught'])}/{len(pairs)}"


def _in_plan(figures: dict[str, Any]) -> str:
    """The rate among the pairs the plan can catch, when it leaves some mutants' requirements to the full plan."""
    in_plan = figures.get("in_plan") or {}
    if not in_plan.get("left_out"):
        return ""
    rate = in_plan.get("detection_rate")
    return (f"<p>Within the plan's reach: <b>{'n/a' if rate is None else format(rate, '.1%')}</b> "
            f"({in_plan.get('caught', 0)} of {in_plan.get('pairs', 0)} pairs); left to the full plan (the "
            f"requirements they break are not judged by this plan): {escape(', '.join(in_plan['left_out']))}.</p>")


def _requirement_rows(pairs: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The requirements × mutants table: per connector requirement of the catalogue, each mutant certified on it with
    caught/measured over the seeds; and the requirements no mutant was caught failing."""
    from streamcert.conformance.catalogue import CATALOGUE

    tally: dict[str, dict[str, list[bool]]] = {}
    for pair in pairs:
        for requirement, entry in pair.get("requirements", {}).items():
            tally.setdefault(requirement, {}).setdefault(pair["mutant"], []).append(bool(entry.get("caught")))
    rows, unproven = [], []
    for req in CATALOGUE:
        if req.kind == "broker":
            continue
        found = tally.get(req.id, {})
        proven = any(any(caught) for caught in found.values())
        if not proven:
            unproven.append(req.id)
        cells = ", ".join(f"{escape(name)} ({sum(caught)}/{len(caught)})" for name, caught in sorted(found.items()))
        verdict = ('<td class="v pass">proven</td>' if proven else '<td class="v fail">no mutant proves it</td>')
        rows.append(f"<tr><td>{escape(req.id)}</td><td class=\"stmt\">{escape(req.statement)}</td>{verdict}"
                    f"<td>{cells or '–'}</td></tr>")
    table = ('<table class="matrix"><tr><th>requirement</th><th>statement</th><th>shown to fail</th>'
             f"<th>mutants certified on it (caught/measured)</th></tr>{''.join(rows)}</table>")
    return table, unproven


def mutants_html(report: dict[str, Any]) -> str:
    """The whole page as one string."""
    pairs = report.get("pairs", [])
    figures = report.get("score") or {}
    seeds = sorted({pair["seed"] for pair in pairs})
    by_mutant: dict[str, dict[int, dict[str, Any]]] = {}
    for pair in pairs:
        by_mutant.setdefault(pair["mutant"], {})[pair["seed"]] = pair
    rate = figures.get("detection_rate")
    state = "incomplete" if not report.get("complete") else "ok" if rate is not None and rate >= 0.95 else "bad"
    title = "streamcert mutation score" + (" (quick plan)" if report.get("plan") == "quick" else "")
    header = (f"<h1>{title}</h1><p><span class=\"badge {state}\">"
              f"{'n/a' if rate is None else format(rate, '.1%')} detected</span> "
              f"<span class=\"muted\">{figures.get('caught', 0)} of {figures.get('pairs', 0)} (mutant, seed) pairs "
              f"caught · the {escape(str(report.get('plan', 'full')))} plan · cooperative fault points off · "
              f"seeds {', '.join(map(str, seeds))}"
              f"{'' if report.get('complete') else ' · incomplete run'}</span></p>{_in_plan(figures)}")
    head = "".join(f"<th>seed {seed}</th>" for seed in seeds)
    rows = "".join(f"<tr><td>{escape(name)}</td>{''.join(_cell(found.get(seed)) for seed in seeds)}"
                   f"<td>{_tally(list(found.values()))}</td></tr>" for name, found in sorted(by_mutant.items()))
    table = f'<table class="matrix"><tr><th>mutant</th>{head}<th>caught</th></tr>{rows}</table>'
    details = "".join(_details(name, [found[s] for s in sorted(found)]) for name, found in sorted(by_mutant.items()))
    by_requirement, unproven = _requirement_rows(pairs)
    proven_note = (f"<p>No mutant of this run proves <b>{len(unproven)}</b> connector requirement(s): "
                   f"{escape(', '.join(unproven))}.</p>" if unproven else
                   "<p>Every connector requirement is proven by a mutant caught failing it.</p>")
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title><style>{matrix_css()}{_PAGE_CSS}</style></head>"
            f"<body><main>{header}"
            f"<h2>Mutants × seeds</h2>{table}<h2>Requirements × mutants</h2>{proven_note}{by_requirement}"
            f"<h2>Findings</h2>{details}</main></body></html>\n")


#: how each pair was caught wraps in its cell (a verdict matrix's cells do not), so five seed columns fit a page
_PAGE_CSS = ".matrix td.v .stmt{white-space:normal;display:inline-block;min-width:9em}"


def write_mutants_html(report: dict[str, Any], path: Path) -> Path:
    path = Path(path)
    path.write_text(mutants_html(report))
    return path
