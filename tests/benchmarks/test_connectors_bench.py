"""The drain benchmark: bad arguments are refused at once; the drain rate is timed past the first batch from Spark's
progress reports; a small run (slow) measures every case, each a run of the scenario runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamcert.benchmarks.connectors import ALL_CASES, drain_figures, drain_scenario, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["--cases", "source_noop,nope"], ["--record-bytes", "10"]])
def test_bad_arguments_exit_2_with_a_hint(argv, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "x.json")]) == 2
    assert "Hint:" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_a_count_below_one_is_refused_by_its_option(capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        main(["--records", "0", "--out", str(tmp_path / "x.json")])
    assert exited.value.code == 2 and "--records: expected a positive integer, got 0" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def _events(*batches: int, ended: bool = True, error: str | None = None) -> list[dict]:
    events = [{"event": "started", "time": 100.0}]
    events += [{"event": "progress", "numInputRows": rows, "time": 110.0 + 2 * i} for i, rows in enumerate(batches)]
    return events + ([{"event": "terminated", "time": 110.0 + 2 * len(batches), "error": error}] if ended else [])


def test_a_drain_is_timed_from_its_first_batch_s_end_to_the_query_s_end():
    figures = drain_figures(_events(500, 1000, 1000, 0, 1000))
    # 3,000 records after the first batch, reported at 110 s; the query ended at 120 s
    assert figures == {"rows": 3500, "timed_rows": 3000, "seconds": 10.0, "records_per_s": 300, "batches": 4,
                       "first_batch_s": 10.0}


@pytest.mark.parametrize("events", [_events(500, 1000, ended=False), _events(3000), _events(500, 1000, error="boom")])
def test_a_drain_that_did_not_end_by_itself_or_read_all_in_one_batch_has_no_rate(events):
    assert drain_figures(events) is None


def test_a_drain_case_is_a_scenario_of_a_backlog_read_to_its_end_in_about_twenty_batches():
    scenario = drain_scenario("source_pg_2pc", 10_000, 100, 4)
    assert (scenario.source, scenario.sink, scenario.trigger) == ("streamcert-kafka", "streamcert-pg-2pc",
                                                                   "available_now")
    assert scenario.load_before_start and not scenario.schedule and scenario.procedure is None
    assert scenario.options["max_records_per_batch"] == 500 and scenario.workload.aborted_fraction == 0.0


@pytest.mark.slow
def test_a_small_run_measures_every_case_and_their_ratios(tmp_path):
    out = tmp_path / "connectors.json"
    done = subprocess.run([sys.executable, "-m", "streamcert.benchmarks.connectors", "--records", "20000",
                           "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["schema_version"] == 2
    assert report["failed"] == {}
    measured = set(report["cases"]) | set(report["skipped"])
    assert measured == set(ALL_CASES)
    assert all(case["complete"] and case["records_per_s"] > 0 for case in report["cases"].values())
    assert "source_vs_raw_consume" in report["ratios"]
    # every Spark case was a run of the scenario runner, judged by its checks
    for name, case in report["cases"].items():
        if name != "raw_consume":
            assert all(run["valid"] is True and run["checks"]["lost"] is True for run in case["runs"]), case


def test_the_skewed_cases_read_the_same_skewed_backlog_one_of_them_aligned():
    from streamcert.spi.connector import DRIFT_OPTION

    plain, aligned = (drain_scenario(case, 12_000, 100, 4) for case in ("skewed_source_files", "aligned_source_files"))
    assert plain.workload == aligned.workload and plain.workload.event_time_lead_ms == 2 * 3600 * 1000
    assert plain.workload.event_time_step_ms * 3000 >= 2 * 3600 * 1000 - 2400  # each partition spans about 2 h
    assert DRIFT_OPTION not in plain.options and aligned.options[DRIFT_OPTION] > 0
