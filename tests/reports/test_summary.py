"""The Markdown summary: the outcome, counts per connector, each failed or unknown requirement with its replay."""

from __future__ import annotations

from streamcert.reports.certification import load_certification
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
