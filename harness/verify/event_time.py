"""The event-time drift between a source's partitions, as the query saw it (SRC-11; seed 001's FLIP-182).

A source that aligns its partitions in event time keeps a skewed backlog from reaching the query at once: no
partition runs ahead of another one with input by more than the drift it claims. :class:`EventTimeDriftChecker`
measures that per micro-batch from the output and the ledger (each record's partition and event time, as the
workload wrote them; nothing the connector reports):

- a partition's *head* at batch ``b`` is the event time of its first record the query had not emitted before ``b``
  (the earliest one it emits in ``b`` or later): where it stood when ``b`` was planned;
- the batch's *spread* is, over the partitions it emitted records of, the latest event time each emitted in ``b``
  minus the lowest head of the *other* partitions at ``b``.

Valid when every batch's spread stays within ``bound_ms``. A partition's records that arrive only after it idled
(a source's idleness timeout passed with no input) may rightly be overtaken: the runs that judge this feed their
input faster than the query reads it, so no partition idles with records still to come. Unknown without event
times in the ledger (the workload set none) or batches in the output (a reader that cannot tell them).
"""

from __future__ import annotations

import pandas as pd

from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["EventTimeDriftChecker"]

_SHOWN = 5


class EventTimeDriftChecker:
    """Per batch, how far past the other partitions' heads it emitted event time, against ``bound_ms``."""

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
        delivered = (output.loc[output["id"].isin(known.index), ["id", "batch"]].sort_values("batch", kind="stable")
                     .drop_duplicates("id"))  # a record delivered twice counts where it was first emitted
        if delivered.empty:
            return CheckResult(self.name, UNKNOWN, error="no record of the ledger was delivered")
        rows = delivered.join(known[["partition", "event_time"]], on="id")
        spreads = _spreads(rows)
        over = spreads[spreads["spread_ms"] > self.bound_ms]
        counts = {"batches": int(rows["batch"].nunique()), "checked_batches": int(len(spreads)),
                  "max_spread_ms": int(spreads["spread_ms"].max()) if len(spreads) else 0,
                  "bound_ms": self.bound_ms, "over_bound": int(len(over))}
        violations = [{"kind": "drift", "batch": int(row.batch), "spread_ms": int(row.spread_ms),
                       "bound_ms": self.bound_ms, "ahead": int(row.ahead), "behind": int(row.behind)}
                      for row in over.head(_SHOWN).itertuples()]
        return CheckResult(self.name, len(over) == 0, counts=counts, violations=violations)


def _spreads(rows: pd.DataFrame) -> pd.DataFrame:
    """Per batch with another partition still to emit: its spread, the partition furthest ahead and the one whose
    head it is measured from."""
    latest = rows.groupby(["batch", "partition"])["event_time"].max().unstack("partition").sort_index()
    earliest = rows.groupby(["batch", "partition"])["event_time"].min().unstack("partition").sort_index()
    # per partition, the earliest event time it emits in this batch or a later one (none once it has emitted all)
    heads = earliest[::-1].cummin().ffill()[::-1]
    out = []
    for batch in latest.index:
        emitted, standing = latest.loc[batch].dropna(), heads.loc[batch].dropna()
        worst = None
        for ahead, reached in emitted.items():
            others = standing.drop(ahead, errors="ignore")
            if others.empty:
                continue
            spread = int(reached - others.min())
            if worst is None or spread > worst["spread_ms"]:
                worst = {"batch": batch, "spread_ms": spread, "ahead": ahead, "behind": others.idxmin()}
        if worst is not None:
            out.append(worst)
    return pd.DataFrame(out, columns=["batch", "spread_ms", "ahead", "behind"])
