"""A Delta Lake table on the local filesystem as an external system (:mod:`streamcert.spi.external`): what the
``delta-sink`` and ``delta-source`` declarations bring.

Read back as a Python user of the table reads it: with ``deltalake`` (delta-rs), an implementation of the Delta
protocol of its own, not the Spark connector under test judging itself. Each table version is a snapshot; the files a
version adds to the snapshot before it are its commit (their records share the version as their order), read with
pyarrow. ``visible_mark`` is the newest version in ``_delta_log`` (one listing). What a failed writer leaves, data
files no version of the log ever added, no reader sees: counted, not a finding (``VACUUM`` removes them).

The writer of a source's input commits each write as one version (``deltalake.write_deltalake``, append); a write
left uncommitted is a data file in the table's folder that no version adds, as a writer killed before its commit
leaves. Runs in the harness's process.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from streamcert.connectors.table_files import file_leftovers, parquet_records
from streamcert.spi.external import ExternalSystem, InputRecord, InputWriter, Leftovers, OutputReader, VisibleRecord

__all__ = ["DeltaTableSystem", "DeltaTableReader", "DeltaTableWriter", "DELTA_SPARK_CONF", "delta_packages"]

#: What Spark needs to write and read Delta tables by path (the session extension, the catalog for SQL).
DELTA_SPARK_CONF = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}

_VERSION_FILE = re.compile(r"(\d{20})\.json")


def delta_packages(version: str = "4.2.0") -> tuple[str, ...]:
    """The Delta Lake jars for Spark (the newest here, 4.2.0, is built for Spark 4.1)."""
    return (f"io.delta:delta-spark_2.13:{version}", f"io.delta:delta-storage:{version}")


def latest_version(table: Path) -> int | None:
    """The newest version in the table's ``_delta_log`` (None: no commit yet)."""
    try:
        found = [int(m.group(1)) for entry in (table / "_delta_log").iterdir()
                 if (m := _VERSION_FILE.fullmatch(entry.name))]
    except FileNotFoundError:
        return None
    return max(found, default=None)


class DeltaTableReader(OutputReader):
    """Reads the records (``key``, ``value``) each version of the table at ``path`` adds, version by version."""

    idle_s = 0.2

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._version = -1
        self._files: set[str] = set()
        self._table = None

    def visible_mark(self) -> int:
        version = latest_version(self.path)
        return -1 if version is None else version

    def read_new(self) -> list[VisibleRecord]:
        latest = latest_version(self.path)
        if latest is None or latest <= self._version:
            return []
        from deltalake import DeltaTable

        records: list[VisibleRecord] = []
        for version in range(self._version + 1, latest + 1):
            if self._table is None:
                self._table = DeltaTable(str(self.path), version=version)
            else:
                self._table.load_as_version(version)
            files = set(self._table.file_uris())
            for uri in sorted(files - self._files):
                records += parquet_records(uri, version, {"version": version})
            self._files, self._version = files, version
        return records

    def leftovers(self) -> Leftovers:
        self.read_new()
        return file_leftovers(self.path, self._files, {"versions": self._version + 1}, skip="_delta_log")

    def transient(self, error: Exception) -> bool:
        return isinstance(error, OSError)


class DeltaTableWriter(InputWriter):
    """Appends each write to the table at ``path`` as one version."""

    writes_uncommitted = True

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def prepare(self, partitions: int) -> None:
        from deltalake import write_deltalake

        write_deltalake(str(self.path), _arrow([]), mode="append")  # version 0: the schema, no rows

    def write(self, records: Sequence[InputRecord], commit: bool = True) -> None:
        import pyarrow.parquet as pq
        from deltalake import write_deltalake

        if commit:
            write_deltalake(str(self.path), _arrow(records), mode="append")
        else:  # a data file no version adds: what a writer killed before its commit leaves
            pq.write_table(_arrow(records), self.path / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet")


def _arrow(records: Sequence[InputRecord]):
    import pyarrow as pa

    return pa.table({"key": pa.array([r.key for r in records], pa.binary()),
                     "value": pa.array([r.value for r in records], pa.binary())})


class DeltaTableSystem(ExternalSystem):
    """Delta tables in the run's folder: nothing to start, no link (a filesystem is not a server)."""

    name = "delta-lake"

    def spark_conf(self, endpoints: Mapping[str, str]) -> Mapping[str, str]:
        return DELTA_SPARK_CONF

    def input_name(self, stem: str, run_id: str, workdir: str) -> str:
        return str(Path(workdir) / "input-table")

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        return str(Path(workdir) / "output-table")

    def writer(self, name: str, endpoints: Mapping[str, str]) -> DeltaTableWriter:
        return DeltaTableWriter(name)

    def reader(self, name: str, endpoints: Mapping[str, str]) -> DeltaTableReader:
        return DeltaTableReader(name)
