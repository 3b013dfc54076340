"""The benchmark page, ``bench.html``: one self-contained HTML file (inline CSS and SVG charts, no script, no
network) rendered from ``bench.json``.

Top to bottom: the settings and outcome; the cases side by side (throughput, MB/s, latency percentiles, backlog,
share of the raw ceiling; medians with their min-max over the repeats); the comparisons (ratios measured in the
same repeat); the raw ceiling; the cases overlaid over time (output rate, p99 latency, backlog); per case, its
repeats over time (input and output rate, latency p50 and p99, backlog, faults shaded), recovery after faults,
and the rate search's probes; the environment.
"""

from __future__ import annotations

from html import escape
from typing import Any

from streamcert.reports.charts import series_svg
from streamcert.reports.html import matrix_css

__all__ = ["bench_html"]

_CASE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_PERCENTILES = ("p50", "p75", "p95", "p99", "p99.9", "max")


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:,.{digits}f}"


def _spread(spread: dict[str, Any] | None, digits: int = 0, unit: str = "") -> str:
    """``median`` with ``min–max`` under it."""
    if not spread:
        return "–"
    text = f"<b>{_num(spread['median'], digits)}</b>{unit}"
    if spread.get("n", 1) > 1:
        text += f'<br><span class="muted small">{_num(spread["min"], digits)}–{_num(spread["max"], digits)}</span>'
    return text


def _header(results: dict[str, Any]) -> str:
    settings = results.get("settings") or {}
    badge = ('<span class="badge ok">complete</span>' if results.get("complete")
             else '<span class="badge incomplete">incomplete</span>')
    rate = settings.get("rate")
    rate_text = "the highest sustained rate (searched)" if rate == "max" else f"{_num(rate)} records/s"
    faults = settings.get("faults") or []
    fault_text = ", ".join(f"{f['fault']} on {f['target']} at {f['at_s']:g} s for {f['duration_s']:g} s"
                           for f in faults) or "none"
    error = f'<p class="finding">{escape(str(results["error"]))}</p>' if results.get("error") else ""
    return (f"<h1>streamcert benchmark {badge}</h1>"
            f'<p class="muted">Open-loop load at {escape(rate_text)} for {_num(settings.get("duration_s"))} s, '
            f'{_num(settings.get("record_bytes"))}-byte records, {_num(settings.get("repeats"))} repeat(s); '
            f"faults: {escape(fault_text)}. Medians over the repeats, min–max under them; latency is produce → "
            f"visible to a read_committed reader. Duration {_num(results.get('duration_s'))} s.</p>{error}")


def _cases_table(results: dict[str, Any]) -> str:
    head = ("<tr><th>case</th><th>pipeline</th><th>rate asked</th><th>output records/s</th><th>MB/s</th>"
            + "".join(f"<th>{p} ms</th>" for p in _PERCENTILES)
            + "<th>backlog max</th><th>sustained</th><th>share of raw consume</th><th>redelivered</th></tr>")
    rows = []
    for name, body in (results.get("cases") or {}).items():
        case = body.get("case") or {}
        spread = body.get("spread") or {}
        runs = body.get("runs") or []
        rates = sorted({run.get("rate") for run in runs if run.get("rate") is not None})
        latency = "".join(f"<td>{_spread(spread.get(f'latency_{p}_ms'), 1)}</td>" for p in _PERCENTILES)
        share = body.get("share_of_raw_consume")
        share_text = _spread({k: v * 100 if k != "n" else v for k, v in share.items()}, 1, " %") if share else "–"
        failed = body.get("failed_repeats") or 0
        note = f'<br><span class="bad-text">{failed} repeat(s) failed</span>' if failed else ""
        bound = body.get("observer_bound_repeats") or 0
        note += (f'<br><span class="bad-text" title="the harness read the output more than a round behind it: '
                 f'latency includes its reading">observer-bound ({bound} repeat(s))</span>') if bound else ""
        note += ('<br><span class="bad-text" title="every rate-search probe above this rate failed only because '
                 'the load generator fell behind: the case sustains at least this rate">load-bound (rate searched '
                 'is a lower bound)</span>') if body.get("load_bound") else ""
        sustained = body.get("sustained")
        rows.append(
            f'<tr><td><a href="#case-{escape(name)}"><b>{escape(name)}</b></a>{note}</td>'
            f'<td class="small">{escape(case.get("source", ""))} → {escape(case.get("sink", ""))}'
            f'{" (direct)" if case.get("kafka_path") == "direct" else ""}</td>'
            f"<td>{', '.join(_num(r) for r in rates) or '–'}</td>"
            f"<td>{_spread(spread.get('output_records_per_s'))}</td>"
            f"<td>{_spread(spread.get('output_mb_per_s'), 3)}</td>"
            f"{latency}<td>{_spread(spread.get('backlog_max'))}</td>"
            f'<td class="{"pass" if sustained else "fail" if sustained is False else ""}">{_num(sustained)}</td>'
            f"<td>{share_text}</td><td>{_spread(spread.get('redelivered'))}</td></tr>")
    return f"<h2>Cases</h2><table>{head}{''.join(rows)}</table>"


def _comparisons(results: dict[str, Any]) -> str:
    found = results.get("comparisons") or {}
    if not found:
        return ""
    rows = "".join(
        f"<tr><td><b>{escape(name)}</b>{_not_sustained(body)}</td>"
        f"<td>{escape(body['numerator'])} / {escape(body['denominator'])}</td>"
        f"<td>{_spread(body.get('output_records_per_s'), 3)}</td><td>{_spread(body.get('latency_p50_ms'), 3)}</td>"
        f"<td>{_spread(body.get('latency_p99_ms'), 3)}</td></tr>" for name, body in found.items())
    return ("<h2>Comparisons</h2><p class=\"muted\">Each ratio is taken within one repeat (both cases measured "
            "back to back), then the median and range over the repeats. Throughput above 1: the numerator is "
            "faster; latency below 1: the numerator is quicker.</p>"
            "<table><tr><th>comparison</th><th>ratio of</th><th>throughput</th><th>p50 latency</th>"
            f"<th>p99 latency</th></tr>{rows}</table>")


def _not_sustained(body: dict[str, Any]) -> str:
    cases = body.get("not_sustained") or []
    bound = body.get("observer_bound") or []
    text = (f'<br><span class="bad-text">not sustained: {escape(", ".join(cases))} (a saturated pipeline: the '
            "ratio is not one of highest sustained rates)</span>") if cases else ""
    text += (f'<br><span class="bad-text">observer-bound: {escape(", ".join(bound))} (the harness read its '
             "output behind it: the ratio measures the reader too)</span>" if bound else "")
    loaded = body.get("load_bound") or []
    return text + (f'<br><span class="bad-text">load-bound: {escape(", ".join(loaded))} (its rate was the most the '
                   "load generator produced beside it, not its own ceiling: the throughput ratio compares the "
                   "generator's reach, the latency ratios hold at that rate)</span>" if loaded else "")


def _raw(results: dict[str, Any]) -> str:
    raw = results.get("raw_ceiling") or {}
    runs = raw.get("runs") or []
    errors = [run["error"] for run in runs if "error" in run]
    cells = "".join(f"<td>{_spread(raw.get(k), 1 if 'mb' in k else 0)}</td>" for k in (
        "produce_records_per_s", "produce_mb_per_s", "consume_records_per_s", "consume_mb_per_s",
        "observer_records_per_s", "load_generator_records_per_s"))
    note = f'<p class="bad-text">{escape(errors[0])}</p>' if errors else ""
    return ("<h2>Raw ceiling of this machine</h2><p class=\"muted\">librdkafka straight to the broker (no Spark, no "
            "proxy), measured in every repeat; and the harness's own Kafka observer (what stamps each output "
            "record visible) reading the same records alone: a case near its rate measures the observer too; and "
            "the open-loop load generator alone, asked for more than it can send through the cases' link: a case "
            "near its rate measures the generator.</p><table><tr><th>produce records/s</th><th>produce MB/s</th>"
            "<th>consume records/s</th><th>consume MB/s</th><th>observer records/s</th>"
            "<th>load generator records/s</th></tr>"
            f"<tr>{cells}</tr></table>{note}")


def _first_runs(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    out = []
    for index, (name, body) in enumerate((results.get("cases") or {}).items()):
        run = next((r for r in body.get("runs") or [] if "series" in r), None)
        if run is not None:
            out.append((name, run, _CASE_COLOURS[index % len(_CASE_COLOURS)]))
    return out


def _overlay(results: dict[str, Any]) -> str:
    runs = _first_runs(results)
    if len(runs) < 2:
        return ""

    def lines(key: str) -> list[dict[str, Any]]:
        return [{"label": name, "x": run["series"]["second"], "y": run["series"][key], "colour": colour}
                for name, run, colour in runs]

    svg = series_svg([{"ylabel": "output records/s", "lines": lines("output_per_s")},
                      {"ylabel": "p99 latency ms", "lines": lines("latency_p99_ms")},
                      {"ylabel": "backlog", "lines": lines("backlog")}],
                     title="The cases overlaid (first repeat of each)", xlabel="seconds since the load began")
    return f'<h2>Over time, side by side</h2><div class="run">{svg}</div>' if svg else ""


def _case_section(name: str, body: dict[str, Any], search: dict[str, Any] | None) -> str:
    runs = [run for run in body.get("runs") or [] if "series" in run]
    parts = [f'<h3 id="case-{escape(name)}">{escape(name)}</h3>'
             f'<p class="muted">{escape((body.get("case") or {}).get("about", ""))}</p>']
    if runs:
        def lines(key: str, colour: str, label: str) -> list[dict[str, Any]]:
            return [{"label": label if index == 0 else None, "x": run["series"]["second"], "y": run["series"][key],
                     "colour": colour, "alpha": 0.9 if index == 0 else 0.4} for index, run in enumerate(runs)]

        svg = series_svg([
            {"ylabel": "records/s", "lines": lines("input_per_s", "#7f7f7f", "input") +
             lines("output_per_s", "#2ca02c", "output")},
            {"ylabel": "latency ms", "lines": lines("latency_p50_ms", "#1f77b4", "p50") +
             lines("latency_p99_ms", "#d62728", "p99")},
            {"ylabel": "backlog", "lines": lines("backlog", "#7f7f7f", "backlog")}],
            faults=runs[0].get("faults"), title=f"{name}: {len(runs)} repeat(s), the first drawn darker",
            xlabel="seconds since the load began")
        if svg:
            parts.append(f'<div class="run">{svg}</div>')
    parts.append(_repeats_table(body.get("runs") or []))
    if search:
        tried = [("probe", p) for p in search.get("probes") or []] + \
            [("confirming", p) for p in search.get("confirmations") or []]
        rows = "".join(f"<tr><td>{_num(p['rate'])}</td><td>{role}{_seconds(p)}</td>"
                       f"<td class=\"{'pass' if p['sustained'] else 'fail'}\">"
                       f"{_num(p['sustained'])}</td><td>{_num(p.get('input_records_per_s'))}"
                       f"{'' if p.get('generator_kept_up', True) else ' (load generator behind)'}</td>"
                       f"<td>{_num(p.get('output_records_per_s'))}</td>"
                       f"<td>{_num(p.get('backlog_growth_per_s'), 1)}</td><td>{_num(p.get('latency_p99_ms'), 1)}</td>"
                       f"</tr>" for role, p in tried)
        confirmed = {True: " (held for a whole measured run)", False: " (no rate held for a whole measured run: the "
                     "lowest tried)", None: ""}[search.get("confirmed")]
        bound = (f' <span class="bad-text">Load-bound: every probe that failed, failed only because the load '
                 f"generator fell behind (it produced at most {_num(search.get('load_generator_records_per_s'))} "
                 "records/s beside this pipeline, which kept up with all of it): the case sustains at least this "
                 "rate; its own ceiling is above what this machine can offer it.</span>"
                 if search.get("load_bound") else "")
        parts.append(f"<p>Rate search: highest sustained rate <b>{_num(search.get('max_rate'))}</b> records/s"
                     f"{confirmed}.{bound}</p><table><tr><th>rate</th><th>run</th><th>sustained</th>"
                     "<th>input records/s</th>"
                     "<th>output records/s</th><th>backlog growth/s</th>"
                     f"<th>p99 ms</th></tr>{rows}</table>")
    return "".join(parts)


def _seconds(probe: dict[str, Any]) -> str:
    return f" ({_num(probe['duration_s'])} s)" if probe.get("duration_s") is not None else ""


def _repeats_table(runs: list[dict[str, Any]]) -> str:
    rows = []
    for index, run in enumerate(runs, 1):
        if "error" in run:
            rows.append(f'<tr><td>{index}</td><td colspan="8" class="bad-text">{escape(run["error"])}</td></tr>')
            continue
        recovery = "; ".join(f"{r['fault']}: {_num(r.get('recovery_s'), 1)} s" if r.get("recovery_s") is not None
                             else f"{r['fault']}: not recovered" for r in run.get("recovery") or []) or "–"
        rows.append(f"<tr><td>{index}</td><td>{_num(run.get('output_records_per_s'))}</td>"
                    f"<td>{_num(run.get('latency_p50_ms'), 1)}</td><td>{_num(run.get('latency_p99_ms'), 1)}</td>"
                    f"<td>{_num(run.get('backlog_max'))}</td><td>{_num(run.get('lost'))}</td>"
                    f"<td>{_num(run.get('redelivered'))}</td><td>{_num(run.get('observer_unread_max'))}"
                    f"{' (bound)' if run.get('observer_bound') else ''}</td><td>{escape(recovery)}</td></tr>")
    return ("<table><tr><th>repeat</th><th>output records/s</th><th>p50 ms</th><th>p99 ms</th><th>backlog max</th>"
            "<th>lost</th><th>redelivered</th><th>observer unread max</th><th>recovery after faults</th></tr>"
            f"{''.join(rows)}</table>")


def _environment(results: dict[str, Any]) -> str:
    rows = [("command", results.get("command")), ("provider", results.get("provider")),
            *sorted((results.get("versions") or {}).items()), *sorted((results.get("machine") or {}).items())]
    body = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>" for k, v in rows
                   if v not in (None, ""))
    return f'<h2>Environment</h2><table class="kv">{body}</table>'


def bench_html(results: dict[str, Any]) -> str:
    """The whole page as one string."""
    cases = results.get("cases") or {}
    searches = results.get("rate_search") or {}
    sections = "".join(_case_section(name, body, searches.get(name)) for name, body in cases.items())
    body = "".join([_header(results), _cases_table(results), _comparisons(results), _raw(results),
                    _overlay(results), f"<h2>Each case</h2>{sections}", _environment(results)])
    css = matrix_css() + ".small{font-size:12px}.bad-text{color:#a40e26}td b{font-weight:600}"
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>streamcert benchmark</title><style>{css}</style></head><body><main>{body}</main></body></html>\n")
