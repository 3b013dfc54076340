"""Comparisons: verdicts that got worse are regressions and come first; regression checks on benchmark metrics
pass and fail on crafted pairs; the exit codes of `streamcert compare` say which (0 same or better, 1 regression,
2 bad input)."""

from __future__ import annotations

import json

import pytest

from streamcert.cli import main
from streamcert.harness.errors import ConfigurationError
from streamcert.reports.compare import bench_metrics, compare_files
from streamcert.reports.regression import parse_check
from tests.reports.fixtures import write_certification


def _bench(path, throughput: float, p99: float):
    path.write_text(json.dumps({"schema_version": 1, "benchmark": "connectors", "cases": {
        "source_noop": {"records_per_s": throughput, "latency_ms": {"p50": 10.0, "p99": p99}},
        "raw_consume": {"records_per_s": 1000.0}}}))
    return path


def _candidate(tmp_path, changes: dict[tuple[str, str], str]):
    path = write_certification(tmp_path / "candidate")
    results = json.loads(path.read_text())
    for verdict in results["verdicts"]:
        verdict["verdict"] = changes.get((verdict["connector"], verdict["requirement"]), verdict["verdict"])
    path.write_text(json.dumps(results))
    return path


def test_a_verdict_that_got_worse_is_a_regression_listed_first(tmp_path):
    baseline = write_certification(tmp_path / "baseline")
    candidate = _candidate(tmp_path, {("dup-sink", "SNK-1"): "pass", ("good-source", "SRC-1"): "fail"})
    comparison = compare_files(baseline, candidate)
    assert [(c.connector, c.requirement, c.before, c.after, c.regressed) for c in comparison.verdicts] == [
        ("good-source", "SRC-1", "pass", "fail", True), ("dup-sink", "SNK-1", "fail", "pass", False)]
    assert comparison.regressed
    assert not compare_files(baseline, _candidate(tmp_path / "b", {("dup-sink", "SNK-1"): "pass"})).regressed
    # a guarantee given up is a regression too: a passed requirement no longer claimed
    unclaimed = compare_files(baseline, _candidate(tmp_path / "c", {("good-source", "SRC-1"): "skip"}))
    assert unclaimed.regressed and unclaimed.lines()[0].startswith("REGRESSION: good-source SRC-1 pass -> skip")


@pytest.mark.parametrize(("text", "before", "after", "regressed"), [
    ("throughput:-5%", 1000.0, 960.0, False), ("throughput:-5%", 1000.0, 940.0, True),
    ("throughput:-5%", 1000.0, 2000.0, False), ("p99_latency:+10%", 100.0, 109.0, False),
    ("p99_latency:+10%", 100.0, 111.0, True), ("p99_latency:+10%", 100.0, 50.0, False),
    ("throughput:-0%", 0.0, 0.0, False), ("p99_latency:+10%", 0.0, 1.0, True)])
def test_a_regression_check_fails_only_past_its_limit_in_its_direction(text, before, after, regressed):
    outcome = parse_check(text).evaluate("case", before, after)
    assert outcome.regressed is regressed and ("REGRESSION" in outcome.message()) is regressed


@pytest.mark.parametrize("text", ["throughput", "throughput:5%", "throughput:-5", "p99 latency:+1%", ":+1%"])
def test_a_malformed_check_is_refused_with_a_hint(text):
    with pytest.raises(ConfigurationError, match="not a regression check") as info:
        parse_check(text)
    assert "throughput:-5%" in info.value.hint


def test_benchmark_metrics_are_judged_per_case(tmp_path):
    baseline, candidate = _bench(tmp_path / "a.json", 1000, 50), _bench(tmp_path / "b.json", 900, 50)
    assert bench_metrics(json.loads(baseline.read_text()))["source_noop"] == {
        "throughput": 1000.0, "p50_latency": 10.0, "p99_latency": 50.0}
    comparison = compare_files(baseline, candidate, [parse_check("throughput:-5%"), parse_check("p99_latency:+10%")])
    assert [(o.case, o.metric, o.regressed) for o in comparison.checks] == [
        ("raw_consume", "throughput", False), ("source_noop", "throughput", True),
        ("source_noop", "p99_latency", False)]
    assert comparison.regressed
    missing = compare_files(baseline, candidate, [parse_check("p42_latency:+1%")])
    assert missing.regressed and "no case has the metric 'p42_latency'" in missing.problems[0]


def test_the_exit_codes_of_compare(tmp_path, capsys):
    baseline, worse = _bench(tmp_path / "a.json", 1000, 50), _bench(tmp_path / "b.json", 900, 80)
    assert main(["compare", str(baseline), str(baseline), "--check", "throughput:-5%"]) == 0
    assert main(["compare", str(baseline), str(worse), "--check", "p99_latency:+10%"]) == 1
    assert "REGRESSION: source_noop p99_latency 50 -> 80 (+60.0%, limit p99_latency:+10%)" in capsys.readouterr().out
    certification = write_certification(tmp_path / "cert")
    assert main(["compare", str(baseline), str(certification)]) == 2
    assert "different kinds" in capsys.readouterr().err
    assert main(["compare", str(certification), str(certification), "--check", "throughput:-5%"]) == 2
    assert main(["compare", str(baseline), str(worse), "--check", "fast"]) == 2
    assert main(["compare", str(certification), str(certification)]) == 0
    assert "no certification difference" in capsys.readouterr().out


def test_two_benchmarks_compared_on_a_page_with_their_runs_overlaid(tmp_path, capsys):
    from tests.benchmarks.test_bench import _bench_results

    baseline = _bench_results()
    candidate = json.loads(json.dumps(baseline))
    slower = candidate["cases"]["builtin"]
    slower["records_per_s"] = baseline["cases"]["builtin"]["records_per_s"] * 0.8
    (tmp_path / "a.json").write_text(json.dumps(baseline))
    (tmp_path / "b.json").write_text(json.dumps(candidate))
    code = main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--check", "throughput:-5%",
                 "--out", str(tmp_path / "page")])
    assert code == 1 and "REGRESSION: builtin throughput" in capsys.readouterr().out
    page = (tmp_path / "page" / "compare.html").read_text()
    assert "Metrics side by side" in page and "REGRESSION" in page and "-20.0 %" in page
    assert page.count("<svg") == 2  # one overlay per case both results have
    assert "baseline and candidate over time" in page


def test_two_certifications_compared_on_a_page(tmp_path):
    from streamcert.reports.compare_html import compare_html

    baseline = _candidate(tmp_path / "a", {("dup-sink", "SNK-1"): "pass"})
    candidate = _candidate(tmp_path / "b", {("dup-sink", "SNK-1"): "fail"})
    page = compare_html(compare_files(baseline, candidate))
    assert "Verdicts that changed" in page and "REGRESSION" in page and "dup-sink" in page


def test_compare_html_numbers_are_whole_above_a_thousand_and_four_digits_below():
    from streamcert.reports.compare_html import _value

    assert _value(10029.6) == "10,030" and _value(1003.8) == "1,004"  # never 1.003e+04
    assert _value(993.279) == "993.3" and _value(0.10255) == "0.1026" and _value(None) == "–"


def test_console_lines_print_figures_as_people_read_them(tmp_path):
    baseline, candidate = _bench(tmp_path / "a.json", 10029.6, 50), _bench(tmp_path / "b.json", 12000.4, 50)
    lines = compare_files(baseline, candidate, [parse_check("throughput:-5%")]).lines()
    assert "source_noop throughput: 10,030 -> 12,000" in lines
    assert any(line.startswith("ok: source_noop throughput 10,030 -> 12,000 (+19.6%") for line in lines)
    assert not any("e+0" in line for line in lines)


def test_cases_offered_other_rates_are_compared_with_a_warning_not_a_regression(tmp_path, capsys):
    from tests.benchmarks.test_bench import _bench_results

    baseline = _bench_results()
    candidate = json.loads(json.dumps(baseline))
    for run in candidate["cases"]["builtin"]["runs"]:
        run["rate"] = run["rate"] * 10
    (tmp_path / "a.json").write_text(json.dumps(baseline))
    (tmp_path / "b.json").write_text(json.dumps(candidate))
    comparison = compare_files(tmp_path / "a.json", tmp_path / "b.json")
    assert not comparison.regressed
    assert [w.split(" was offered")[0] for w in comparison.warnings] == ["builtin"]
    assert "compare different loads" in comparison.warnings[0]
    assert compare_files(tmp_path / "a.json", tmp_path / "a.json").warnings == []
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "page")]) == 0
    assert "warning: builtin was offered" in capsys.readouterr().out
    assert 'class="warning"' in (tmp_path / "page" / "compare.html").read_text()


def test_a_load_bound_case_is_compared_with_a_warning_that_its_throughput_is_the_generators(tmp_path, capsys):
    """Load-bound is judged from each file's rate search (as today's streamcert judges, whatever wrote the file)."""
    from tests.benchmarks.test_bench import _bench_results, _probe

    baseline = _bench_results()
    candidate = json.loads(json.dumps(baseline))
    generator_behind = {"max_rate": 2000, "probes": [_probe(2000, 2000), _probe(4000, 2600)], "confirmations": []}
    candidate["rate_search"]["builtin"] = generator_behind
    (tmp_path / "a.json").write_text(json.dumps(baseline))
    (tmp_path / "b.json").write_text(json.dumps(candidate))
    assert compare_files(tmp_path / "a.json", tmp_path / "b.json").warnings == [
        "builtin's rate was load-bound in the candidate (the most the load generator produced beside it): its "
        "throughput there is a lower bound, not the connector's ceiling"]
    baseline["rate_search"]["builtin"] = generator_behind
    (tmp_path / "a.json").write_text(json.dumps(baseline))
    assert "in the baseline and the candidate" in compare_files(tmp_path / "a.json", tmp_path / "b.json").warnings[0]
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    assert "warning: builtin's rate was load-bound" in capsys.readouterr().out
    # a pipeline that fell behind what it was offered is its own ceiling: no warning
    baseline["rate_search"]["builtin"] = {**generator_behind, "probes": [_probe(2000, 2000),
                                                                         _probe(4000, 4000, capacity=2500)]}
    candidate["rate_search"]["builtin"] = baseline["rate_search"]["builtin"]
    (tmp_path / "a.json").write_text(json.dumps(baseline))
    (tmp_path / "b.json").write_text(json.dumps(candidate))
    assert compare_files(tmp_path / "a.json", tmp_path / "b.json").warnings == []
