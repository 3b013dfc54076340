"""The stack's PostgreSQL as a system: a run's output is a table of it (sinks only; no source reads it).

Leftovers: ``pg_prepared_xacts`` since the run began (a prepared transaction nobody committed or rolled back holds
its locks and hides its rows forever). Runs in the harness's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamcert.harness.run.observers.base import Observer, OutputTarget
from streamcert.harness.run.observers.postgres import PostgresObserver
from streamcert.harness.systems.stack_system import StackSystem
from streamcert.spi.external import Endpoint, Leftovers

__all__ = ["PostgresTables"]


class PostgresTables(StackSystem):
    """Tables of the stack's PostgreSQL database; endpoint ``postgres`` (a DSN)."""

    name = "postgres"
    endpoint_names = ("postgres",)
    restart_fault = ("database_kill", "postgres", {}, 2.0)

    def endpoints(self) -> Mapping[str, Endpoint]:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self._needs(self.at.postgres_direct_dsn or self.at.postgres_dsn, "PostgreSQL"))
        return {"postgres": Endpoint(str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432))}

    def proxied(self) -> dict[str, str]:
        return {"postgres": self._needs(self.at.postgres_dsn, "PostgreSQL")}

    def direct(self) -> dict[str, str]:
        return {"postgres": self._needs(self.at.postgres_direct_dsn or self.at.postgres_dsn, "PostgreSQL")}

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        """A table name PostgreSQL takes unquoted: lower case letters, digits and underscores."""
        return PostgresObserver.output_name(stem, run_id, Path(workdir))

    def observer(self, name: str, unpack: Any = None) -> Observer:
        return PostgresObserver(OutputTarget("postgres", name, postgres_dsn=self.at.postgres_dsn,
                                             mark_address=self.at.postgres_direct_dsn), unpack=unpack)

    def leftovers_of(self, name: str) -> Leftovers:
        import psycopg

        dsn = self._needs(self.at.postgres_dsn, "PostgreSQL")
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as connection:
            rows = connection.execute("select gid, prepared::text, owner from pg_prepared_xacts where database = "
                                      "current_database() and prepared >= to_timestamp(%s) order by prepared",
                                      (self.at.since or 0.0,)).fetchall()
        found = [{"gid": gid, "prepared": prepared, "owner": owner} for gid, prepared, owner in rows]
        return Leftovers(found, {"prepared_transactions": len(found)})
