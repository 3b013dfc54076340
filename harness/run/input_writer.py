"""Loading the workload through an external system's writer (:class:`~streamcert.spi.external.InputWriter`), for a
source that reads something other than Kafka.

The same plan as a Kafka load (:func:`~streamcert.harness.run.workload.plan`: ids, keys, per-key seqs, the
transactions the plan aborts), written one planned transaction per :meth:`InputWriter.write` call (one table
commit), paced at the workload's rate when it has one. The ledger is a Kafka load's: a write that returned is
acknowledged, a write that raised leaves its records ``indeterminate`` (they may be there), an aborted one is
``aborted``. Runs in the harness's process, in the thread that loads.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable

import numpy as np

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.progress import step
from streamcert.harness.run.workload import Deliveries, Ledger, WorkloadSpec, encode_value, plan
from streamcert.spi.external import InputRecord, InputWriter

__all__ = ["load_workload", "load_with_writer"]


def load_workload(writer: InputWriter, name: str, spec: WorkloadSpec,
                  gate: Callable[[int], bool] | None = None, grown: Callable[[int], bool] | None = None) -> Ledger:
    """Load the workload into input ``name``: by the writer's own bulk ``load(spec)`` when it offers one (a Kafka
    topic's batches records across transactions), else one planned transaction per write
    (:func:`load_with_writer`). ``gate`` (a :class:`~streamcert.harness.run.feed.FeedGate`) paces the load by what
    the query read and may end it early; a bulk load that takes no ``gate`` is replaced by one write per
    transaction then. ``grown`` waits for the partitions a workload with ``added_partitions`` writes into once they
    exist (:class:`~streamcert.harness.run.topic_growth.TopicGrowth`): only a bulk load that takes it can."""
    bulk = getattr(writer, "load", None)
    takes = set(inspect.signature(bulk).parameters) if callable(bulk) else set()
    if spec.added_partitions and "grown" not in takes:
        raise ConfigurationError(
            f"The workload adds {spec.added_partitions} partition(s) to {name!r} while the query runs, and the "
            f"input's writer ({type(writer).__name__}) cannot wait for them.",
            hint="Give added_partitions only to a Kafka topic's workload (its writer's load takes grown=).")
    if callable(bulk) and (gate is None or "gate" in takes):
        options = {**({"gate": gate} if gate is not None else {}), **({"grown": grown} if "grown" in takes else {})}
        return bulk(spec, **options)
    return load_with_writer(writer, name, spec, gate)


def load_with_writer(writer: InputWriter, name: str, spec: WorkloadSpec,
                     gate: Callable[[int], bool] | None = None) -> Ledger:
    """Write the workload into input ``name`` with ``writer`` (prepared already); return the ledger. ``gate``, when
    given, is asked before each write with the records written so far that a reader can read (committed writes'): it
    may block, and False ends the load (the ledger holds what was written). Never raises for a failed write (its
    records are indeterminate); closes nothing (the caller owns the writer)."""
    records = plan(spec)
    aborted = records["aborted"].to_numpy()
    if aborted.any() and not writer.writes_uncommitted:
        raise ConfigurationError(
            f"The workload aborts {int(aborted.sum())} records, and the input's writer ({type(writer).__name__}) "
            "cannot leave a write uncommitted.", hint="Run this source with aborted_fraction 0, or give its "
            "system's writer writes_uncommitted = True and a write(records, commit=False) that leaves them unread.")
    deliveries = Deliveries(len(records))
    ids, seqs, keys = records["id"].to_numpy(), records["seq"].to_numpy(), records["key"].to_numpy()
    partitions, txns = records["partition"].to_numpy(), records["txn"].to_numpy()
    bounds = np.flatnonzero(np.diff(txns)) + 1
    began = time.time()
    written, readable = len(records), 0
    with step(f"Writing {len(records):,} records into {name}") as progress:
        for rows in np.split(np.arange(len(records)), bounds):
            if gate is not None and not gate(readable):
                written = int(rows[0])
                break
            if spec.rate is not None:
                time.sleep(max(0.0, began + int(rows[0]) / spec.rate - time.time()))
            now = time.time()
            batch = [InputRecord(str(keys[i]).encode(), encode_value(int(ids[i]), int(seqs[i]), now,
                                                                     spec.record_bytes), int(partitions[i]))
                     for i in rows]
            for i in rows:
                deliveries.sent(int(i), now)
            try:
                writer.write(batch, commit=not bool(aborted[rows[0]]))
                error = None
            except Exception as exc:  # noqa: BLE001 - a refused write is a ledger fact, not the load's end
                error = f"{type(exc).__name__}: {exc}"
            acked_at = time.time()
            for i in rows:
                deliveries.report(int(i), error, -1, acked_at)
            if error is None and not aborted[rows[0]]:
                readable += len(rows)
            progress.update(f"{int(rows[-1]) + 1:,}/{len(records):,}")
    return Ledger.from_deliveries(records, deliveries, spec, name, rows=np.arange(written), aborted=aborted)
