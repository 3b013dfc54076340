"""The connector benchmark: bad arguments are refused at once; a small run (slow) reports every case."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamcert.benchmarks.connectors import ALL_CASES, main

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


@pytest.mark.slow
def test_a_small_run_measures_every_case_and_their_ratios(tmp_path):
    out = tmp_path / "connectors.json"
    done = subprocess.run([sys.executable, "-m", "streamcert.benchmarks.connectors", "--records", "20000",
                           "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["schema_version"] == 1
    assert report["failed"] == {}
    measured = set(report["cases"]) | set(report["skipped"])
    assert measured == set(ALL_CASES)
    assert all(case["complete"] and case["records_per_s"] > 0 for case in report["cases"].values())
    assert "source_vs_raw_consume" in report["ratios"]
