"""Run metrics from the observer's deliveries, the ledger and the history.

End-to-end latency is ``visible_at - produced_at`` per record (first delivery);
throughput is deliveries per second; backlog at second *t* is acknowledged
records minus the delivered ones among them (an indeterminate record that was
recovered, or an unexpected one, drains no backlog); recovery time after a fault is how long after it
stopped the throughput is back within 10% of its pre-fault level and the
backlog is drained (to its pre-fault level).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["PERCENTILES", "latency_ms", "per_second", "recovery_times", "summarize"]

PERCENTILES = (50, 75, 95, 99, 99.9)


def latency_ms(output: pd.DataFrame) -> dict[str, float | None]:
    first = output.drop_duplicates("id")
    values = ((first["visible_at"] - first["produced_at"]) * 1000).dropna().to_numpy()
    if len(values) == 0:
        return {**{f"p{p:g}": None for p in PERCENTILES}, "max": None, "count": 0}
    result = {f"p{p:g}": round(float(np.percentile(values, p)), 3) for p in PERCENTILES}
    return {**result, "max": round(float(values.max()), 3), "count": int(len(values))}


def per_second(output: pd.DataFrame, ledger: pd.DataFrame, origin: float) -> pd.DataFrame:
    """One row per second since ``origin``: delivered, acknowledged (cumulative) and backlog.

    ``delivered`` counts every first delivery; ``backlog`` is acknowledged records not yet delivered.
    """
    first = output.drop_duplicates("id")
    owed = ledger.loc[ledger["status"] == "acked"]
    acked = owed["acked_at"].dropna().to_numpy()
    visible = first["visible_at"].to_numpy()
    visible_owed = first.loc[first["id"].isin(owed["id"]), "visible_at"].to_numpy()
    end = max([origin + 1, *(visible.max(initial=origin),), *(acked.max(initial=origin),)])
    seconds = np.arange(0, int(np.ceil(end - origin)) + 1)
    edges = origin + seconds
    bins = np.append(edges, edges[-1] + 1)
    delivered = np.histogram(visible, bins=bins)[0]
    acked_cum = np.searchsorted(np.sort(acked), edges + 1, side="left")
    delivered_cum = np.cumsum(delivered)
    owed_delivered_cum = np.cumsum(np.histogram(visible_owed, bins=bins)[0])
    return pd.DataFrame({"second": seconds, "delivered": delivered, "acked_total": acked_cum,
                         "delivered_total": delivered_cum, "backlog": np.maximum(acked_cum - owed_delivered_cum, 0)})


def recovery_times(timeline: pd.DataFrame, history: list[dict[str, Any]], origin: float,
                   window_s: int = 5) -> list[dict[str, Any]]:
    """For each fault that stopped: seconds until throughput and backlog are back to pre-fault levels."""
    starts = {}
    out = []
    for event in history:
        key = (event.get("fault"), event.get("target"))
        if event["kind"] == "fault-start":
            starts[key] = event["time"] - origin
        elif event["kind"] == "fault-stop" and key in starts:
            began, ended = starts.pop(key), event["time"] - origin
            before = timeline[(timeline["second"] >= began - window_s) & (timeline["second"] < began)]
            base_rate = float(before["delivered"].mean()) if len(before) else 0.0
            base_backlog = float(before["backlog"].max()) if len(before) else 0.0
            after = timeline[timeline["second"] >= int(np.ceil(ended))]
            healthy = after[(after["delivered"] >= 0.9 * base_rate) & (after["backlog"] <= base_backlog)]
            recovered = None if healthy.empty else round(float(healthy["second"].iloc[0] - ended), 3)
            out.append({"fault": key[0], "target": key[1], "start_s": round(began, 3), "stop_s": round(ended, 3),
                        "pre_fault_rate": round(base_rate, 3), "recovery_s": recovered})
    return out


def summarize(output: pd.DataFrame, ledger: pd.DataFrame, history: list[dict[str, Any]],
              origin: float) -> dict[str, Any]:
    timeline = per_second(output, ledger, origin)
    busy = timeline[timeline["delivered"] > 0]
    return {
        "latency_ms": latency_ms(output),
        "throughput": {"records": int(output["id"].nunique()), "deliveries": int(len(output)),
                       "mean_per_s": round(float(busy["delivered"].mean()), 3) if len(busy) else 0.0,
                       "peak_per_s": int(timeline["delivered"].max()) if len(timeline) else 0},
        "timeline": timeline.to_dict(orient="list"),
        "recovery": recovery_times(timeline, history, origin),
    }
