"""Smoke test: the checkers benchmark runs end to end on a small ledger and finds what it injected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_checkers_benchmark_writes_its_report_and_finds_the_injected_faults(tmp_path):
    out = tmp_path / "bench" / "checkers.json"
    command = [sys.executable, "-m", "streamcert.benchmarks.checkers", "--records", "20000", "--seed", "3",
               "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    report = json.loads(out.read_text())
    assert report["schema_version"] == 1
    assert {"platform", "cpu_count", "python"} <= report["machine"].keys()
    assert report["parameters"] == {
        "records": 20000,
        "keys": 10000,
        "seed": 3,
        "faults": 10,
        "pinned_cpu": report["parameters"]["pinned_cpu"],
        "tracemalloc": True,
        "categorical_keys": False,
    }
    names = ["lost", "duplicate", "unexpected", "aborted_read", "per_key_order"]
    assert list(report["checkers"]) == names
    for name in names:
        entry = report["checkers"][name]
        assert entry["seconds"] >= 0 and entry["valid"] is False
    assert report["total_seconds"] >= 0 and report["peak_rss_mib"] > 0

    # Exactly what was injected, no more: ten of each fault kind.
    counts = {name: report["checkers"][name]["counts"] for name in names}
    assert counts["lost"]["lost"] == 10
    assert counts["duplicate"]["extra_deliveries"] == 10
    assert counts["unexpected"]["unexpected"] == 10
    assert counts["aborted_read"]["aborted_reads"] == 10
    assert counts["per_key_order"]["non_monotonic"] == 10 and counts["per_key_order"]["gaps"] == 20
    assert report["found_all_injected"] is True and report["valid"] is False
    assert [r["name"] for r in report["results"]] == names
    assert "per_key_order" in done.stdout and "total" in done.stdout
