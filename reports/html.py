"""The certification page: one self-contained HTML file (inline CSS and SVG charts, no script, no network).

Top to bottom: the outcome and counts; the requirement x connector verdict matrix (each cell links to its
evidence); every failed or unknown verdict with its findings, faults and replay command; per connector, its
scenario runs with their charts (deliveries and backlog over time, faults shaded), latency and recovery; every
passed or skipped verdict, a line each that opens to its evidence; then the environment (versions, machine,
seed, command).
"""

from __future__ import annotations

import datetime
from html import escape
from typing import Any

from streamcert.reports.certification import Certification, verdict_anchor
from streamcert.reports.charts import run_timeline_svg
from streamcert.harness.run.query_status import BATCH_CLASSES as _CLASSES
from streamcert.harness.run.query_status import MOMENTS as _MOMENTS
from streamcert.reports.findings import fault_lines, finding_lines, replay

__all__ = ["matrix_css", "report_html"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2330;margin:0;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:32px 0 10px;border-bottom:1px solid #dde1e7;
padding-bottom:4px}h3{font-size:15px;margin:22px 0 6px}
.muted{color:#5b6475}.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;color:#fff}
.ok{background:#1a7f37}.bad{background:#cf222e}.incomplete{background:#9a6700}
table{border-collapse:collapse;background:#fff;font-size:13px}th,td{border:1px solid #dde1e7;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#eef1f5;font-weight:600}
.matrix td.v{text-align:center;font-weight:600;white-space:nowrap}.matrix td.v a{color:inherit;text-decoration:none}
.pass{background:#dafbe1;color:#116329}.fail{background:#ffebe9;color:#a40e26}.unknown{background:#fff8c5;
color:#7d4e00}.skip{background:#f0f1f3;color:#6e7781;font-weight:400!important}.none{background:#fff}
.counts span{margin-right:14px}.stmt{color:#5b6475;font-size:12px}
.finding{background:#fff;border:1px solid #dde1e7;border-left:4px solid #cf222e;margin:10px 0;padding:8px 12px}
.finding.unknown{border-left-color:#bf8700}.finding.pass{border-left-color:#1a7f37}
.finding.skip{border-left-color:#8c959f}td.na{background:#fafbfc;color:#afb8c1;text-align:center;font-size:12px}
pre{background:#f3f4f6;padding:6px 8px;overflow-x:auto;font-size:12px;margin:6px 0;white-space:pre-wrap}
code{font-size:12px}.run{background:#fff;border:1px solid #dde1e7;padding:8px 12px;margin:12px 0}
.run svg{width:100%;height:auto}details.brief{background:#fff;border:1px solid #dde1e7;border-left:4px solid #1a7f37;
margin:4px 0;padding:4px 12px}details.brief.skip{border-left-color:#8c959f}details.brief summary{cursor:pointer}
.kv td:first-child{color:#5b6475;white-space:nowrap}
"""

_LABEL = {"pass": "pass", "fail": "FAIL", "unknown": "unknown", "skip": "skip"}


def matrix_css() -> str:
    """The page's style, for other pages drawn the same way (the capability matrix)."""
    return _CSS


def _header(cert: Certification) -> str:
    results = cert.results
    counts = cert.counts()
    if not results.get("complete"):
        badge = '<span class="badge incomplete">incomplete</span>'
    else:
        badge = ('<span class="badge ok">certified</span>' if cert.passed()
                 else '<span class="badge ok">quick plan passed</span>' if cert.quick_passed()
                 else '<span class="badge bad">not certified</span>')
    started = results.get("started_at")
    when = (datetime.datetime.fromtimestamp(started, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            if isinstance(started, (int, float)) else "")
    plan = ("quick plan" if results.get("quick") else "full plan") + _part(results)
    error = (f'<p class="finding">The certification stopped early: {escape(str(results["error"]))}</p>'
             if results.get("error") else "")
    return (f"<h1>streamcert certification {badge}</h1>"
            f'<p class="muted">{escape(", ".join(cert.connectors))} · seed {escape(str(results.get("seed")))} · '
            f'{plan} · {len(results.get("runs", []))} scenario runs · {(results.get("duration_s") or 0) / 60:.1f} '
            f"min{_busy(results.get('cpu'))} · {escape(when)}</p>"
            '<p class="counts">' + "".join(f'<span class="{k}">&nbsp;{counts[k]} {k}&nbsp;</span>'
                                           for k in ("pass", "fail", "unknown", "skip")) + "</p>" + error)


def _busy(cpu: dict[str, Any] | None) -> str:
    """How busy the machine's cores were (results made before the window was recorded, and merges, have none)."""
    if not cpu or cpu.get("busy_share") is None:
        return ""
    return (f' (<span title="machine-wide CPU: {cpu["busy_s"]:.0f} s busy, {cpu["nice_s"]:.0f} s of it the '
            f'standbys; the same work takes at least {cpu["floor_s"]:.0f} s here">cores {cpu["busy_share"]:.0%} '
            "busy</span>)")


def _matrix(cert: Certification) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in cert.connectors)
    rows = []
    for requirement in cert.requirements():
        cells = []
        for connector in cert.connectors:
            verdict = cert.verdict(connector, requirement)
            if verdict is None:
                cells.append('<td class="na" title="not a requirement of this connector\'s kind">–</td>')
                continue
            kind = verdict["verdict"]
            title = escape(verdict.get("reason", ""), quote=True)
            anchor = escape(verdict_anchor(connector, requirement), quote=True)
            cells.append(f'<td class="v {kind}" title="{title}"><a href="#{anchor}">{_LABEL[kind]}</a></td>')
        rows.append(f"<tr><th>{requirement}<div class=\"stmt\">{escape(cert.statement(requirement))}</div></th>"
                    + "".join(cells) + "</tr>")
    return (f'<h2>Verdicts</h2><table class="matrix"><tr><th>requirement</th>{head}</tr>{"".join(rows)}</table>'
            '<p class="muted">Hover a cell for its reason; click it for its evidence.</p>')


def _verdict_body(verdict: dict[str, Any], statement: str) -> list[str]:
    findings = finding_lines(verdict, violations=5)
    faults = fault_lines(verdict)
    runs = ", ".join(f"{r.get('scenario')} (seed {r.get('seed')})" for r in verdict.get("evidence", {})
                     .get("runs", []))
    parts = [f'<div class="stmt">{escape(statement)}</div>', f"<p>{escape(verdict.get('reason', ''))}</p>"]
    if runs:
        parts.append(f'<div class="muted">runs: {escape(runs)}</div>')
    if findings:
        parts.append(f"<pre>{escape(chr(10).join(findings))}</pre>")
    if faults:
        parts.append(f"<details><summary>{len(faults)} fault(s)</summary><pre>{escape(chr(10).join(faults))}"
                     "</pre></details>")
    if replay(verdict):
        parts.append(f"<div>replay: <code>{escape(replay(verdict))}</code></div>")
    return parts


def _verdict_block(verdict: dict[str, Any], statement: str) -> str:
    """A failed or unknown verdict, open; a passed or skipped one, one line that opens."""
    kind = verdict["verdict"]
    anchor = escape(verdict_anchor(verdict["connector"], verdict["requirement"]), quote=True)
    title = f"{escape(verdict['connector'])} · {verdict['requirement']} · {_LABEL[kind]}"
    body = "".join(_verdict_body(verdict, statement))
    if kind in ("pass", "skip"):
        return (f'<details class="brief {kind}" id="{anchor}"><summary><b>{title}</b> <span class="muted">'
                f"{escape(statement)}</span></summary>{body}</details>")
    return f'<div class="finding {kind}" id="{anchor}"><b>{title}</b>{body}</div>'


def _findings(cert: Certification) -> str:
    blocks = [_verdict_block(v, cert.statement(v["requirement"]))
              for kind in ("fail", "unknown") for v in cert.verdicts if v["verdict"] == kind]
    return "<h2>Findings</h2>" + ("".join(blocks) or '<p class="muted">No requirement failed or stayed '
                                                     "undecided.</p>")


def _settled(cert: Certification) -> str:
    blocks = [_verdict_block(v, cert.statement(v["requirement"]))
              for kind in ("pass", "skip") for v in cert.verdicts if v["verdict"] == kind]
    return "<h2>Passed and skipped</h2>" + "".join(blocks) if blocks else ""


def _latency(run: dict[str, Any]) -> str:
    latency = (run.get("metrics") or {}).get("latency_ms") or {}
    if not latency.get("count"):
        return ""
    cells = "".join(f"<td>{latency[k] / 1000:.2f} s</td>" for k in ("p50", "p95", "p99", "max")
                    if latency.get(k) is not None)
    return (f"<table><tr><th>latency</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>"
            f"<tr><td>{latency['count']} records</td>{cells}</tr></table>")


def _recovery(run: dict[str, Any]) -> str:
    rows = [r for r in (run.get("metrics") or {}).get("recovery") or [] if r.get("stop_s") is not None]
    if not rows:
        return ""
    cells = "".join(f"<tr><td>{escape(str(r.get('fault')))}</td><td>{r['start_s']:.1f}–{r['stop_s']:.1f} s</td>"
                    f"<td>{'not back' if r.get('recovery_s') is None else format(r['recovery_s'], '.1f') + ' s'}"
                    "</td></tr>" for r in rows)
    return f"<details><summary>recovery after {len(rows)} fault(s)</summary><table><tr><th>fault</th><th>window" \
           f"</th><th>back to pre-fault rate and backlog after</th></tr>{cells}</table></details>"




def _coverage(coverage: dict[str, Any] | None) -> str:
    """A kill run's grid: moments (rows) x batch classes (columns); a planned cell is green with the kills that
    reached it, or yellow "missed"; an unplanned cell shows the kills that reached it anyway."""
    if not coverage:
        return ""
    head = "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in _CLASSES)
    rows = _grid_rows(_MOMENTS, _CLASSES, coverage, lambda kills: f'{kills} kill{"s" if kills != 1 else ""}')
    missing = coverage.get("missing", [])
    said = (f'<span class="unknown">&nbsp;{len(missing)} planned cell(s) missed&nbsp;</span>' if missing else
            '<span class="pass">&nbsp;every planned cell reached&nbsp;</span>')
    return (f'<details open><summary>kill coverage: moment × batch class {said}</summary>'
            f'<table class="matrix"><tr><th>moment</th>{head}</tr>{"".join(rows)}</table></details>')


def _grid_rows(rows: Any, columns: Any, coverage: dict[str, Any], reached_text: Any) -> list[str]:
    """A grid's rows: a planned cell (``row@column``) is green with ``reached_text(count)``, or yellow "missed"; an
    unplanned one shows what reached it anyway."""
    planned, reached = set(coverage.get("planned", [])), coverage.get("reached", {})
    out = []
    for row in rows:
        cells = []
        for column in columns:
            cell, count = f"{row}@{column}", reached.get(f"{row}@{column}", 0)
            if cell in planned:
                cells.append(f'<td class="v pass">{reached_text(count)}</td>' if count else
                             '<td class="v unknown">missed</td>')
            else:
                cells.append(f'<td class="na">{count} unplanned</td>' if count else '<td class="na">–</td>')
        out.append(f"<tr><td>{escape(row.replace('_', ' '))}</td>{''.join(cells)}</tr>")
    return out


def _strike_coverage(coverage: dict[str, Any] | None) -> str:
    """The grid of a run's faults aimed at moments: moments (rows) x what was struck (columns); a planned cell is
    green with the strikes that found something of the query in flight, or yellow "missed"."""
    if not coverage:
        return ""
    cells = [name.split("@", 1) for name in [*coverage.get("planned", []), *coverage.get("reached", {})]]
    moments = [m for m in _MOMENTS if any(moment == m for moment, _ in cells)]
    struck = sorted({what for _, what in cells})
    rows = _grid_rows(moments, struck, coverage, lambda count: f"{count} in flight")
    head = "".join(f"<th>{escape(what.replace('_', ' '))}</th>" for what in struck)
    missing = coverage.get("missing", [])
    said = (f'<span class="unknown">&nbsp;{len(missing)} planned cell(s) missed&nbsp;</span>' if missing else
            '<span class="pass">&nbsp;every planned cell struck with a request in flight&nbsp;</span>')
    return (f'<details open><summary>network, server and failover faults: moment × struck {said}</summary>'
            f'<table class="matrix"><tr><th>moment</th>{head}</tr>{"".join(rows)}</table></details>')


def _also_judges(summary: dict[str, Any]) -> str:
    """`` and streamcert-kafka's SRC-1, SRC-2`` for a run shared with another connector."""
    return "".join(f" and {escape(other)}'s {escape(', '.join(ids))}"
                   for other, ids in (summary.get("also_judges") or {}).items())


def _shared_run(summary: dict[str, Any], connector: str) -> str:
    """The line in ``connector``'s runs for another connector's run that judged it (it reads through it)."""
    host, ids = summary.get("connector", ""), ", ".join(summary["also_judges"][connector])
    return (f'<div class="run"><b>{escape(summary.get("scenario", ""))}</b> <span class="muted">shared: '
            f"{escape(host)}'s run, which reads through {escape(connector)}, judged its {escape(ids)}; its own run "
            "(into Spark's file sink) runs, and shows here, only when that one did not pass them all</span></div>")


def _runs(cert: Certification) -> str:
    sections = ["<h2>Scenario runs</h2>"]
    for connector in cert.connectors:
        sections.append(f"<h3>{escape(connector)}</h3>")
        for summary in [r for r in cert.results.get("runs", []) if connector in (r.get("also_judges") or {})]:
            sections.append(_shared_run(summary, connector))
        for summary in [r for r in cert.results.get("runs", []) if r.get("connector") == connector]:
            detail = cert.runs.get(summary.get("folder"), {})
            valid = summary.get("valid")
            state, said = {True: ("pass", "checks valid"), False: ("fail", "checks invalid")}.get(
                valid, ("unknown", "checks undecided"))
            head = (f'<b>{escape(summary.get("scenario", ""))}</b> <span class="{state}">&nbsp;{said}&nbsp;</span> '
                    f'<span class="muted">judges '
                    f'{escape(", ".join(summary.get("judges", [])))}{_also_judges(summary)} · '
                    f'{summary.get("duration_s") or 0:.0f} s · '
                    f'{summary.get("driver_attempts", 0)} driver attempt(s) · {summary.get("faults", 0)} fault(s) · '
                    f'seed {summary.get("seed")}</span>')
            error = f"<pre>{escape(str(summary['error']))}</pre>" if summary.get("error") else ""
            chart = run_timeline_svg(detail) if detail else None
            sections.append(f'<div class="run">{head}{error}{_coverage(summary.get("coverage"))}'
                            f'{_strike_coverage(summary.get("strike_coverage"))}{chart or ""}'
                            f'{_latency(detail)}{_recovery(detail)}</div>')
    return "".join(sections)


def _environment(cert: Certification) -> str:
    results = cert.results
    rows = [("command", results.get("command")), ("seed", results.get("seed")),
            ("provider", results.get("provider")), *sorted((results.get("versions") or {}).items()),
            *sorted((results.get("machine") or {}).items())]
    body = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>" for k, v in rows if v not in
                   (None, ""))
    return f'<h2>Environment</h2><table class="kv">{body}</table>'


def _capabilities(cert: Certification) -> str:
    """Each capability a connector claims (exactly-once, rescale...), held when every requirement behind it passed."""
    rows = []
    for connector, claimed in (cert.results.get("capabilities") or {}).items():
        for capability, judged in claimed.items():
            kind = judged["verdict"]
            behind = ", ".join(f"{req} {verdict}" for req, verdict in judged["requirements"].items()) or "none judged"
            rows.append(f'<tr><td>{escape(connector)}</td><td>{escape(capability)}</td>'
                        f'<td class="v {kind}">{_LABEL[kind]}</td><td class="muted">{escape(behind)}</td></tr>')
    if not rows:
        return ""
    return ("<h2>Capabilities</h2><table><tr><th>connector</th><th>capability</th><th>verdict</th>"
            "<th>requirements behind it</th></tr>" + "".join(rows) + "</table>")


def report_html(cert: Certification) -> str:
    """The whole page as one string."""
    body = "".join([_header(cert), _matrix(cert), _capabilities(cert),
                    _findings(cert), _runs(cert), _settled(cert), _environment(cert)])
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>streamcert certification</title><style>{_CSS}</style></head><body><main>{body}</main>"
            "</body></html>\n")


def _part(results: dict) -> str:
    """Which part of the plan the results hold: a shard of it, or the merge of its shards."""
    if results.get("shard"):
        return f" (shard {results['shard']}: merge the shards for every verdict)"
    if results.get("merged_from"):
        return f" (merged from {len(results['merged_from'])} shards)"
    return ""
