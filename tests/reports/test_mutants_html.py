"""The mutation score page: the rate, a mutant x seed table with the moment that caught each, missed pairs said so."""

from __future__ import annotations

from streamcert.reports.mutants_html import mutants_html
from streamcert.reports.render import render_results


def _report(complete: bool = True) -> dict:
    caught = {"mutant": "kafka_replay_not_checked", "bug": "never reads its log", "seed": 1, "caught": True,
              "requirements": {"SNK-4": {"verdict": "fail", "caught": True, "timeout_only": False,
                                         "findings": [{"run": "driver-kills", "check": "duplicate"}],
                                         "attribution": "preceding",
                                         "killed_by": [{"moments": ["commit_in_flight", "output_visible"],
                                                        "batch_class": "steady"}]}}}
    missed = {**caught, "seed": 2, "caught": False,
              "requirements": {"SNK-4": {"verdict": "pass", "caught": False, "timeout_only": False, "findings": [],
                                         "killed_by": []}}}
    return {"kind": "mutation-score", "complete": complete, "pairs": [caught, missed],
            "score": {"pairs": 2, "caught": 1, "detection_rate": 0.5}}


def test_the_page_shows_the_rate_the_catching_moment_and_the_missed_pair():
    page = mutants_html(_report())
    assert "50.0% detected" in page and "1 of 2 (mutant, seed) pairs" in page
    assert "commit_in_flight+<wbr>output_visible<wbr>@steady" in page and "MISSED" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    assert "incomplete run" in mutants_html(_report(complete=False))
    assert "the full plan" in page and "quick plan" not in page
    assert "(quick plan)</h1>" in mutants_html({**_report(), "plan": "quick"})


def test_a_pair_the_plan_cannot_catch_says_so_and_the_rate_within_the_plan_s_reach_is_shown():
    report = _report()
    out_of_reach = {**report["pairs"][1], "mutant": "aggregator_virtual_keys", "unplanned": ["AGG-5"]}
    report = {**report, "plan": "quick", "pairs": [*report["pairs"], out_of_reach],
              "score": {"pairs": 3, "caught": 1, "detection_rate": 0.3333,
                        "in_plan": {"pairs": 2, "caught": 1, "detection_rate": 0.5,
                                    "left_out": ["aggregator_virtual_keys"]}}}
    page = mutants_html(report)
    assert "not in the plan" in page and "AGG-5 left to the full plan" in page
    assert "AGG-5 left to the full plan</span></td><td>–</td></tr>" in page  # no 0/1 tally for it
    assert "Within the plan's reach: <b>50.0%</b> (1 of 2 pairs)" in page
    assert "Within the plan's reach" not in mutants_html(_report())


def test_streamcert_report_renders_a_mutation_score_beside_its_json(tmp_path):
    import json

    path = tmp_path / "mutants.json"
    path.write_text(json.dumps(_report()))
    [written] = render_results(path)
    assert written == tmp_path / "mutants.html" and "mutation score" in written.read_text()


def test_a_finding_with_no_time_of_its_own_names_its_checks_and_whether_faults_preceded_it():
    report = _report()
    base = report["pairs"][0]
    report["pairs"] = [
        {**base, "mutant": "reads_aborted", "requirements": {"SRC-6": {
            "caught": True, "attribution": "candidates", "killed_by": [],
            "findings": [{"run": "baseline", "check": "aborted_read"}]}}},
        {**base, "mutant": "never_rolls_back", "requirements": {"SNK-2": {
            "caught": True, "attribution": "candidates", "findings": [{"run": "task-failures", "check": "leftovers"}],
            "killed_by": [{"fault": "python_worker_kill_moment", "moments": ["writing"], "batch_class": "steady"}]}}},
    ]
    page = mutants_html(report)
    assert "aborted_read (no fault needed)" in page and "leftovers after the run&#x27;s faults" in page


def test_the_requirement_matrix_names_what_each_mutant_proves_and_every_requirement_none_proves():
    page = mutants_html(_report())
    assert "<h2>Requirements × mutants</h2>" in page
    assert "<td>SNK-4</td>" in page and "kafka_replay_not_checked (1/2)" in page
    proven_row = page[page.index("<td>SNK-4</td>"):].split("</tr>")[0]
    assert "proven" in proven_row and "no mutant proves it" not in proven_row
    unproven_row = page[page.index("<td>SRC-5</td>"):].split("</tr>")[0]
    assert "no mutant proves it" in unproven_row
    assert "GEN-3" in page.split("No mutant of this run proves")[1].split("</p>")[0]
    assert "BRK-1" not in page  # the cluster's requirements are no connector's
    missed_only = {**_report(), "pairs": [_report()["pairs"][1]]}
    snk4 = mutants_html(missed_only).split("<td>SNK-4</td>")[1].split("</tr>")[0]
    assert "no mutant proves it" in snk4 and "kafka_replay_not_checked (0/1)" in snk4  # certified, never caught
