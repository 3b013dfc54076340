"""The Python worker's garbage collector, made cheap for a data source: :func:`freeze_imports` once per process.

pyspark's daemon runs ``gc.collect()`` in a reused Python worker after every task it runs (``pyspark/daemon.py``),
and the planning and commit runners of a streaming write run in such workers too. A full collection walks every
object the process holds: with pyarrow, pandas, pyspark and a Kafka or PostgreSQL client imported, ~93,000 objects
and 80-90 ms of CPU on a 2-core machine, once per task and once per batch's write planning and commit. Nothing of
it is garbage: it is the imported modules. On a machine whose cores the driver, the broker and the load share, that
CPU is taken from the batch itself (a reference pipeline at 1,000 records/s spent ~0.5 core in its Python workers).

``gc.freeze()`` moves every object the process holds to the permanent generation, which collections skip; later
objects (a task's rows, its iterators) are collected as before. It is called once per process, before the
connector's own work in each method Spark runs in a worker: ``read``, ``write``, ``streamWriter``, ``commit``,
``abort``, and an aggregator's ``init`` on executors. It is never called in the user's own process, whose garbage
is the user's. It freezes the imports, the unpickled command of the task that calls it, and whatever cyclic
garbage happens to be alive then: a bounded, once-per-process cost, the same trade CPython's documentation
describes for pre-fork servers. A process forked later (pyspark's daemon forks its workers) inherits the frozen
generation and freezes what it gained since on its own first call.
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_imports", "frozen_in_this_process"]

_frozen_in: int | None = None  # the pid that froze; a forked child has another pid and freezes again


def freeze_imports() -> None:
    """Move what this process holds now to the permanent generation, once per process (idempotent, cheap after)."""
    global _frozen_in
    pid = os.getpid()
    if _frozen_in == pid:
        return
    gc.freeze()
    _frozen_in = pid


def frozen_in_this_process() -> bool:
    return _frozen_in == os.getpid()
