"""Probing a sink's participant after a run: what a failed attempt may have left behind (SNK-2, SNK-3).

Asked of the sink's system (:meth:`~streamcert.spi.external.OutputReader.leftovers`), as a user of the sink would
look; the stack's three systems look at PostgreSQL's ``pg_prepared_xacts`` (a prepared
transaction nobody committed or rolled back holds locks and hides rows forever), a Kafka topic's last stable
offset against its high watermark (an open transaction blocks every read_committed reader), a file sink's folder
(data files its ``_spark_metadata`` log does not commit are invisible to Spark's readers: counted, not a
finding). Called in the harness's process right after a run, while the stack still runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["probe_system_leftovers"]


def probe_system_leftovers(system: Any, output: str, endpoints: Mapping[str, str]) -> CheckResult:
    """The ``leftovers`` check of ``output`` in ``system`` (``endpoints``: its own addresses): what its reader says
    the sink left; unknown when the reader cannot look or cannot tell."""
    reader = None
    try:
        reader = system.reader(output, endpoints)
        found = reader.leftovers()
    except Exception as exc:  # noqa: BLE001 - a probe that cannot look decides nothing
        return CheckResult("leftovers", UNKNOWN, {}, [], f"the {system.name} output could not be probed: "
                                                         f"{type(exc).__name__}: {exc}")
    finally:
        if reader is not None:
            try:
                reader.close()
            except Exception:  # noqa: BLE001 - closing after the look: nothing left to decide
                pass
    if found is None:
        return CheckResult("leftovers", UNKNOWN, {}, [], f"the reader of {system.name} cannot tell what a sink "
                                                         "leaves behind (its leftovers() says None)")
    items = [dict(item) for item in found.found]
    return CheckResult("leftovers", not items, {**dict(found.counts), "found": len(items)}, items[:10],
                       f"{len(items)} leftover(s) in {system.name}" if items else None)
