"""The Markdown summary: the outcome, counts per connector, each failed or unknown requirement with its replay."""

from __future__ import annotations

import json

from streamcert.reports.certification import load_certification
from streamcert.reports.html import report_html
from streamcert.reports.summary import summary_markdown
from tests.reports.fixtures import write_certification


def test_the_summary_names_the_outcome_counts_and_problems(tmp_path):
    text = summary_markdown(load_certification(write_certification(tmp_path)))
    assert "**not certified**" in text
    assert "2 passed, 1 failed, 1 unknown, 1 skipped; 3 scenario runs, seed 5, quick plan, 2.7 min." in text
    assert "| dup-sink | 1 | 1 | 1 | 0 |" in text and "| good-source | 1 | 0 | 0 | 1 |" in text
    assert "| dup-sink | SNK-1 | ❌ fail | duplicate invalid in driver-kills: 60 duplicated ids |" in text
    assert "`streamcert certify --connector dup-sink --requirements SNK-6 --seed 5`" in text
    assert "SRC-1 |" not in text  # a pass is counted, not listed


def test_an_interrupted_certification_says_so(tmp_path):
    text = summary_markdown(load_certification(write_certification(tmp_path, complete=False)))
    assert "**incomplete**" in text


def test_a_quick_plan_that_passed_what_it_judged_says_so_and_is_not_certified(tmp_path):
    path = write_certification(tmp_path)
    results = json.loads(path.read_text())
    for verdict in results["verdicts"]:
        if verdict["verdict"] == "fail":
            verdict["verdict"] = "pass"
        elif verdict["verdict"] == "unknown":
            verdict["evidence"] = {**verdict.get("evidence", {}), "full_plan_only": True}
    path.write_text(json.dumps(results))
    certification = load_certification(path)
    assert certification.quick_passed() and not certification.passed()
    assert "**quick plan passed**: every requirement it judged passed; 1 are judged only by the full" in \
        summary_markdown(certification)
    assert '<span class="badge ok">quick plan passed</span>' in report_html(certification)
    results["quick"] = False
    path.write_text(json.dumps(results))
    assert not load_certification(path).quick_passed()
