"""A real benchmark on the stack: one case under a Kafka outage, measured end to end; bench.json and bench.html
written with every figure (throughput, latency, backlog, recovery, raw ceiling)."""

from __future__ import annotations

import json

import pytest

from streamcert.benchmarks.bench import CASES, BenchSettings, run_bench
from streamcert.reports.render import render_bench_page
from streamcert.harness.faults.schedule import FaultSpec

pytestmark = pytest.mark.integration


def test_a_short_benchmark_under_an_outage_measures_every_figure(stack, tmp_path):
    settings = BenchSettings(rate=150, duration_s=8, repeats=1, quick=True,
                             faults=(FaultSpec("down", "kafka", 3.0, 2.0),))
    results = run_bench(settings, [CASES["reference"]], tmp_path, env=stack, render=render_bench_page)
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["complete"] and saved["schema_version"] == 1 and saved == json.loads(json.dumps(results))
    body = saved["cases"]["reference"]
    [run] = body["runs"]
    assert "error" not in run, run
    assert run["lost"] == 0 and run["delivered"] == run["acked"] == run["latency_ms"]["count"] > 1000
    assert run["latency_ms"]["p50"] <= run["latency_ms"]["p99"] <= run["latency_ms"]["max"]
    assert [r["fault"] for r in run["recovery"]] == ["down"] and run["faults"][0]["fault"] == "down"
    assert sum(run["series"]["output_per_s"]) == run["delivered"]
    assert body["records_per_s"] > 0 and body["share_of_raw_consume"]["median"] > 0
    ceiling = saved["raw_ceiling"]["produce_records_per_s"]["median"]
    assert ceiling > 1000  # librdkafka straight to the broker: far above the case's 150 records/s
    page = (tmp_path / "bench.html").read_text()
    assert 'id="case-reference"' in page and "<svg" in page
