"""`streamcert report`: renders the three reports from a results.json; a path that is not one is a usage error
(exit 2) that says what it saw and what to give instead."""

from __future__ import annotations

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
