"""`streamcert report`: renders the three reports from a results.json, bench.html from a bench.json; a path that
is not one is a usage error (exit 2) that says what it saw and what to give instead."""

from __future__ import annotations

import json

from streamcert.cli import main
from streamcert.reports.render import REPORT_FILES
from tests.reports.fixtures import write_certification


def test_report_renders_beside_the_results_or_into_out(tmp_path, capsys):
    results = write_certification(tmp_path / "cert")
    assert main(["report", str(results)]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "cert" / name) for name in REPORT_FILES]
    assert main(["report", str(tmp_path / "cert"), "--out", str(tmp_path / "pages")]) == 0
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == sorted(REPORT_FILES)


def test_report_of_something_else_is_a_usage_error_with_a_hint(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "No results file at" in err and "Hint:" in err and "Traceback" not in err
    assert "bench.json" in err  # a benchmark's results are rendered too


def test_report_re_renders_a_benchmark_page_with_its_derived_figures_computed_afresh(tmp_path, capsys):
    """A bench.json written before a judgement existed (here: load-bound) gets it on its re-rendered page; the
    measurements are the file's."""
    from tests.benchmarks.test_bench import _bench_results, _probe

    results = _bench_results()
    results["rate_search"]["builtin"] = {"max_rate": 2000, "probes": [_probe(2000, 2000), _probe(4000, 2600)],
                                         "confirmations": []}
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench.json").write_text(written := json.dumps(results))
    assert main(["report", str(tmp_path / "bench")]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "bench" / "bench.html")]
    page = (tmp_path / "bench" / "bench.html").read_text()
    assert "Load-bound: every probe that failed" in page and "load-bound (rate searched is a lower bound)" in page
    assert f"<b>{results['cases']['builtin']['records_per_s']:,.0f}</b>" in page
    assert (tmp_path / "bench" / "bench.json").read_text() == written  # the file is left as it was
    assert main(["report", str(tmp_path / "bench" / "bench.json"), "--out", str(tmp_path / "pages")]) == 0
    assert (tmp_path / "pages" / "bench.html").exists()
