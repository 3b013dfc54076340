"""Metrics on synthetic deliveries: latency percentiles, per-second timeline, recovery after a fault."""

import numpy as np
import pandas as pd

from streamcert.harness.verify.metrics import latency_ms, per_second, recovery_times, summarize


def _ledger(acked_at):
    n = len(acked_at)
    return pd.DataFrame({"id": np.arange(n), "status": ["acked"] * n, "acked_at": acked_at})


def test_latency_uses_first_delivery_only():
    output = pd.DataFrame({"id": [1, 2, 2], "produced_at": [0.0, 0.0, 0.0], "visible_at": [0.010, 0.020, 5.0]})
    result = latency_ms(output)
    assert result["count"] == 2 and result["max"] == 20.0 and result["p50"] == 15.0


def test_timeline_counts_and_backlog():
    origin = 1000.0
    ledger = _ledger(origin + np.array([0.1, 0.2, 0.3, 1.5]))
    output = pd.DataFrame({"id": [0, 1, 2, 3], "visible_at": origin + np.array([0.5, 1.2, 1.3, 2.1])})
    timeline = per_second(output, ledger, origin)
    assert timeline["delivered"].tolist()[:3] == [1, 2, 1]
    assert timeline["backlog"].tolist()[:3] == [2, 1, 0]


def test_backlog_is_drained_by_acknowledged_records_only():
    origin = 1000.0
    ledger = _ledger(origin + np.array([0.1, 0.2, np.nan]))
    ledger.loc[2, "status"] = "indeterminate"
    # second 0: the indeterminate record 2 (recovered) and an unexpected 7 arrive; second 1: 0 and 1 do.
    output = pd.DataFrame({"id": [2, 7, 0, 1], "visible_at": origin + np.array([0.3, 0.4, 1.1, 1.2])})
    timeline = per_second(output, ledger, origin)
    assert timeline["delivered"].tolist()[:2] == [2, 2]
    assert timeline["acked_total"].tolist()[:2] == [2, 2]
    assert timeline["backlog"].tolist()[:2] == [2, 0]


def test_recovery_is_measured_from_fault_stop_until_rate_and_backlog_are_back():
    origin = 0.0
    # 100/s acknowledged throughout; delivered 100/s, nothing during a fault from 10 to 15 s, then a catch-up
    # of 400 and 300 (the 500 backlog is gone by the end of second 16), then 100/s again.
    rates = [100] * 10 + [0] * 5 + [400, 300, 100, 100, 100]
    visible = np.concatenate([s + np.linspace(0.01, 0.99, r) for s, r in enumerate(rates) if r])
    acked = np.concatenate([s + np.linspace(0.0, 0.98, 100) for s in range(len(rates))])
    output = pd.DataFrame({"id": np.arange(len(visible)), "visible_at": visible})
    timeline = per_second(output, _ledger(acked), origin)
    history = [{"kind": "fault-start", "fault": "down", "target": "kafka", "time": 10.0},
               {"kind": "fault-stop", "fault": "down", "target": "kafka", "time": 15.0}]
    [recovery] = recovery_times(timeline, history, origin)
    assert recovery["pre_fault_rate"] == 100.0
    assert timeline["backlog"].tolist()[15:17] == [200, 0]
    assert recovery["recovery_s"] == 1.0  # second 16: rate >= 90 and backlog back to 0


def test_a_fault_never_recovered_from_reports_none():
    output = pd.DataFrame({"id": np.arange(100), "visible_at": np.linspace(0.01, 0.99, 100)})
    ledger = _ledger(np.linspace(0, 5, 500))
    timeline = per_second(output, ledger, 0.0)
    history = [{"kind": "fault-start", "fault": "x", "target": "t", "time": 1.0},
               {"kind": "fault-stop", "fault": "x", "target": "t", "time": 2.0}]
    assert recovery_times(timeline, history, 0.0)[0]["recovery_s"] is None


def test_summary_is_json_ready():
    output = pd.DataFrame({"id": [0, 1], "produced_at": [0.0, 0.0], "visible_at": [0.1, 0.2]})
    summary = summarize(output, _ledger(np.array([0.05, 0.06])), [], 0.0)
    assert summary["throughput"]["records"] == 2 and summary["latency_ms"]["count"] == 2
    import json

    json.dumps(summary)
