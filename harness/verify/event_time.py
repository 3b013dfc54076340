"""The event-time drift between a source's partitions, as the query saw it (SRC-11; seed 001's FLIP-182).

A source that aligns its partitions in event time keeps a skewed backlog from reaching the query at once: no
partition runs ahead of a slower one with input by more than the drift it claims. :class:`EventTimeDriftChecker`
measures that per micro-batch from the output and the ledger (each record's partition and event time, as the
workload wrote them; nothing the connector reports):

- a partition's *watermark* after batch ``b`` is the latest event time it delivered in batches up to ``b``;
- a partition *counts* at ``b`` while it is under way: it delivered in a batch up to ``b`` and delivers again in a
  later one (one not started yet, or finished, is neither ahead nor behind);
- the batch's *spread* is the highest watermark of the counting partitions minus the lowest.

It is valid when every batch's spread stays within ``bound_ms`` plus the widest event-time gap between two
consecutive records of one partition (``step_ms``): a source aligns on the records it has not read yet, and a
partition held back has delivered the record before its next one. Unknown without event times in the ledger
(the workload set none) or batches in the output (a reader that cannot tell them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["EventTimeDriftChecker"]

_SHOWN = 5


class EventTimeDriftChecker:
    """Per batch, the spread of the partitions' event-time watermarks against ``bound_ms``."""

    name = "event_time_drift"

    def __init__(self, bound_ms: int) -> None:
        self.bound_ms = int(bound_ms)

    def check(self, ledger: pd.DataFrame, output: pd.DataFrame) -> CheckResult:
        missing = [f"ledger {c}" for c in ("id", "partition", "event_time") if c not in ledger.columns] + \
                  [f"output {c}" for c in ("id", "batch") if c not in output.columns]
        if missing:
            return CheckResult(self.name, UNKNOWN, error=f"needs {', '.join(missing)} (a workload with event times "
                                                         "read by an output whose batches are known)")
        known = ledger[ledger["status"] != "aborted"] if "status" in ledger.columns else ledger
        known = known.drop_duplicates("id").set_index("id")
        delivered = output.loc[output["id"].isin(known.index), ["id", "batch"]].drop_duplicates("id")
        if delivered.empty:
            return CheckResult(self.name, UNKNOWN, error="no record of the ledger was delivered")
        rows = delivered.join(known[["partition", "event_time"]], on="id")
        step = _widest_step(known)
        spreads = _spreads(rows)
        allowed = self.bound_ms + step
        over = spreads[spreads["spread_ms"] > allowed]
        counts = {"batches": int(rows["batch"].nunique()), "checked_batches": int(len(spreads)),
                  "max_spread_ms": int(spreads["spread_ms"].max()) if len(spreads) else 0,
                  "bound_ms": self.bound_ms, "step_ms": step, "over_bound": int(len(over))}
        violations = [{"kind": "drift", "batch": int(row.batch), "spread_ms": int(row.spread_ms),
                       "allowed_ms": allowed, "ahead": int(row.ahead), "behind": int(row.behind)}
                      for row in over.head(_SHOWN).itertuples()]
        return CheckResult(self.name, len(over) == 0, counts=counts, violations=violations)


def _widest_step(known: pd.DataFrame) -> int:
    """The widest event-time gap between two consecutive records of one partition (ms)."""
    times = known.sort_values(["partition", "event_time"])
    gaps = times.groupby("partition")["event_time"].diff().dropna()
    return int(gaps.max()) if len(gaps) else 0


def _spreads(rows: pd.DataFrame) -> pd.DataFrame:
    """Per batch with at least two partitions under way: the spread of their watermarks, and which partitions
    were furthest ahead and behind."""
    per = rows.groupby(["partition", "batch"])["event_time"].max().unstack("partition").sort_index()
    watermarks = per.cummax()  # a partition's watermark holds through the batches it delivers nothing in
    batches = per.index.to_numpy()
    first = {p: per[p].first_valid_index() for p in per.columns}
    last = {p: per[p].last_valid_index() for p in per.columns}
    out = []
    for position, batch in enumerate(batches):
        under_way = [p for p in per.columns if first[p] <= batch < last[p]]
        if len(under_way) < 2:
            continue
        marks = watermarks.iloc[position][under_way].astype(np.int64)
        out.append({"batch": batch, "spread_ms": int(marks.max() - marks.min()),
                    "ahead": marks.idxmax(), "behind": marks.idxmin()})
    return pd.DataFrame(out, columns=["batch", "spread_ms", "ahead", "behind"])
