"""The certification page: self-contained (no URL it would fetch), every section present, the numbers in it are
those of results.json, each matrix cell links to its evidence, each run with a timeline has its chart with its
faults shaded."""

from __future__ import annotations

import re

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.reports.certification import load_certification
from streamcert.reports.charts import fault_windows, run_timeline_svg
from streamcert.reports.html import report_html
from streamcert.reports.render import REPORT_FILES, render_certification
from tests.reports.fixtures import run_results, write_certification


@pytest.fixture
def page(tmp_path) -> str:
    return report_html(load_certification(write_certification(tmp_path)))


def test_the_page_needs_no_network(page):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page and "@import" not in page


def test_every_section_is_there_with_the_numbers_of_the_results(page):
    for heading in ("Verdicts", "Findings", "Scenario runs", "Passed and skipped", "Environment"):
        assert f"<h2>{heading}</h2>" in page
    assert "not certified" in page and "seed 5 · quick plan · 3 scenario runs · 2.7 min" in page
    assert "at least 133 s here\">cores 81% busy</span>" in page  # the machine's CPU over the certification
    for count, kind in ((2, "pass"), (1, "fail"), (1, "unknown"), (1, "skip")):
        assert f'<span class="{kind}">&nbsp;{count} {kind}&nbsp;</span>' in page
    assert "90 s · 4 driver attempt(s) · 3 fault(s) · seed 78" in page
    assert "StartupFailed: the driver exited" in page  # the run that broke, with its error
    assert "<td>1.50 s</td><td>2.50 s</td><td>4.10 s</td><td>4.32 s</td>" in page  # p50 p95 p99 max
    assert "<td>latency</td><td>15.0–18.5 s</td><td>3.5 s</td>" in page  # recovery after the toxic
    assert "abc123" in page and "streamcert certify --connector good-source --connector dup-sink" in page


def test_each_matrix_cell_links_to_its_evidence(page):
    cells = re.findall(r'<td class="v (\w+)" title="[^"]*"><a href="#(v-[^"]+)">', page)
    assert sorted(cells) == sorted([("pass", "v-good-source-SRC-1"), ("skip", "v-good-source-SRC-11"),
                                    ("fail", "v-dup-sink-SNK-1"), ("unknown", "v-dup-sink-SNK-6"),
                                    ("pass", "v-dup-sink-GEN-1")])
    for _, anchor in cells:
        assert f'id="{anchor}"' in page
    verdicts = page[:page.index("<h2>Scenario runs</h2>")]
    assert verdicts.count('<td class="na"') == 2 * 5 - 5  # requirements a connector has no verdict for
    assert "duplicate invalid (deliveries=660, duplicated_ids=60)" in page and "r-000017" in page


def test_a_run_chart_shades_each_fault_window_and_marks_instant_faults():
    run = run_results([("driver_kill_on_output", "driver", 8.0, 8.1), ("latency", "kafka", 15.0, 18.5)])
    assert [(w["fault"], round(w["start_s"], 1), round(w["stop_s"], 1)) for w in fault_windows(run)] == [
        ("driver_kill_on_output", 8.0, 8.1), ("latency", 15.0, 18.5)]
    svg = run_timeline_svg(run, "dup-sink / driver-kills")
    assert svg.startswith("<svg") and "driver_kill_on_output" in svg and "latency" in svg
    assert "dup-sink / driver-kills" in svg
    assert run_timeline_svg({"metrics": {}}) is None


def test_the_chart_reaches_the_runs_last_event_not_only_its_last_delivery():
    run = run_results([("task_fail_at", "executor", 55.0, 56.0)], seconds=40)
    svg = run_timeline_svg(run)
    assert "task_fail_at" in svg and ">50<" in svg  # an axis tick past the last delivered second (39)


def test_a_fault_still_active_at_the_end_is_open():
    run = run_results([])
    run["history"].append({"kind": "fault-start", "time": run["history"][0]["time"] + 5, "fault": "down",
                           "target": "postgres"})
    assert fault_windows(run)[-1]["stop_s"] is None
    assert run_timeline_svg(run).startswith("<svg")


def test_render_writes_the_three_reports_beside_results_or_elsewhere(tmp_path):
    results = write_certification(tmp_path / "cert")
    assert [p.name for p in render_certification(results)] == list(REPORT_FILES)
    assert all((tmp_path / "cert" / name).stat().st_size > 0 for name in REPORT_FILES)
    assert [p.parent for p in render_certification(tmp_path / "cert", tmp_path / "else")] == [tmp_path / "else"] * 3


def test_what_is_not_a_certification_is_refused_with_a_hint(tmp_path):
    with pytest.raises(ConfigurationError, match="No results file") as info:
        load_certification(tmp_path / "nowhere.json")
    assert "streamcert certify --out DIR" in info.value.hint
    (tmp_path / "bench.json").write_text('{"kind": "bench"}')
    with pytest.raises(ConfigurationError, match="not a certification"):
        load_certification(tmp_path / "bench.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ConfigurationError, match="not a readable JSON"):
        load_certification(tmp_path / "broken.json")


def test_a_run_whose_results_are_missing_or_torn_shows_its_summary_only(tmp_path):
    results = write_certification(tmp_path)
    (tmp_path / "runs/good-source/driver-kills/results.json").write_text('{"history": [')
    certification = load_certification(results)
    assert set(certification.runs) == {"runs/dup-sink/driver-kills"}
    page = report_html(certification)
    assert "62 s · 3 driver attempt(s)" in page and page.count("<svg") == 1


def test_a_run_with_faults_aimed_at_moments_shows_their_grid_with_the_missed_cell(page):
    grid = page[page.index("moment × struck"):]
    grid = grid[:grid.index("</table>")]
    assert "1 planned cell(s) missed" in grid and "<th>reset peer</th><th>server kill</th>" in grid
    assert '<td>writing</td><td class="v pass">1 in flight</td>' in grid
    assert '<td>commit in flight</td><td class="na">–</td><td class="v unknown">missed</td>' in grid
