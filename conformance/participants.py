"""Probing a sink's participant after a run: what a failed attempt may have left behind (SNK-2, SNK-3).

Read by output kind, as a user of the sink would look: PostgreSQL's ``pg_prepared_xacts`` (a prepared
transaction nobody committed or rolled back holds locks and hides rows forever), a Kafka topic's last stable
offset against its high watermark (an open transaction blocks every read_committed reader), a file sink's folder
(data files its ``_spark_metadata`` log does not commit are invisible to Spark's readers: counted, not a
finding). Called in the harness's process right after a run, while the stack still runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["probe_leftovers", "probe_system_leftovers"]


def probe_leftovers(output_kind: str, output: str, bootstrap: str | None, postgres_dsn: str | None,
                    since: float | None = None) -> CheckResult:
    """The ``leftovers`` check of one run's output (``output`` is the topic, table or folder); ``since`` (epoch
    seconds, the run's start) leaves out what was there before the run (another run's, on a shared server)."""
    try:
        if output_kind == "postgres":
            return _postgres(postgres_dsn, since)
        if output_kind == "kafka":
            return _kafka(bootstrap, output)
        if output_kind == "files":
            return _files(Path(output))
    except Exception as exc:  # noqa: BLE001 - a probe that cannot look decides nothing
        return CheckResult("leftovers", UNKNOWN, {}, [], f"the {output_kind} participant could not be probed: "
                                                         f"{type(exc).__name__}: {exc}")
    return CheckResult("leftovers", UNKNOWN, {}, [], f"no probe for output kind {output_kind!r}")


def probe_system_leftovers(system: Any, output: str, endpoints: Mapping[str, str]) -> CheckResult:
    """The ``leftovers`` check of an output in a connector's own system: what its reader says the sink left."""
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


def _postgres(dsn: str | None, since: float | None) -> CheckResult:
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as connection:
        rows = connection.execute("select gid, prepared::text, owner from pg_prepared_xacts where database = "
                                  "current_database() and prepared >= to_timestamp(%s) order by prepared",
                                  (since or 0.0,)).fetchall()
    found = [{"gid": gid, "prepared": prepared, "owner": owner} for gid, prepared, owner in rows]
    return CheckResult("leftovers", not found, {"prepared_transactions": len(found)}, found[:10],
                       f"{len(found)} prepared transaction(s) left behind" if found else None)


def _kafka(bootstrap: str | None, topic: str) -> CheckResult:
    from streamcert.harness.stack.kafka_clients import end_offsets

    stable, high = end_offsets(bootstrap, topic, "read_committed"), end_offsets(bootstrap, topic, "read_uncommitted")
    open_ = [{"partition": p, "last_stable_offset": stable.get(p), "high_watermark": h}
             for p, h in sorted(high.items()) if stable.get(p) != h]
    return CheckResult("leftovers", not open_, {"partitions": len(high), "open_transactions": len(open_)}, open_,
                       f"{len(open_)} partition(s) held by an open transaction" if open_ else None)


def _files(folder: Path) -> CheckResult:
    from streamcert.harness.run.observers.files import committed_files

    committed = set(committed_files(folder))
    written = {str(path) for path in folder.rglob("*.parquet")} if folder.is_dir() else set()
    return CheckResult("leftovers", True, {"committed_files": len(committed),
                                           "uncommitted_files": len(written - committed)}, [])
