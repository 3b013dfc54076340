"""Apache Iceberg tables of a Hadoop catalog on the local filesystem as an external system
(:mod:`streamcert.spi.external`): what the ``iceberg-sink`` declaration brings.

Spark reaches the tables through the catalog ``streamcert`` (``type=hadoop``, its warehouse a folder of the stack's);
each run's output is ``streamcert.db.t_<run id>``. Read back as a Python user reads an Iceberg table: with
``pyiceberg``, from the table's current metadata file (``version-hint.text`` names it), snapshot by snapshot in the
order they were committed; the data files a snapshot added are its commit (their records share its position in
that order), read with pyarrow. ``visible_mark`` is the metadata version (one small read). Data files no snapshot
added (a failed writer's) no reader sees: counted, not a finding. Runs in the harness's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from streamcert.spi.errors import ConfigurationError
from streamcert.connectors.table_files import file_leftovers, parquet_records
from streamcert.spi.external import ExternalSystem, Leftovers, OutputReader, VisibleRecord

__all__ = ["IcebergTableSystem", "IcebergTableReader", "ICEBERG_PACKAGES", "CATALOG"]

#: Iceberg's Spark runtime (one shaded jar), built for Spark 4.1.
ICEBERG_PACKAGES = ("org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",)
#: The Spark catalog the tables are in.
CATALOG = "streamcert"
_ADDED = 1  # a manifest entry's status: the file was added by the entry's snapshot


def table_location(warehouse: str, identifier: str) -> Path:
    """Where a Hadoop catalog keeps table ``catalog.db.table``."""
    parts = identifier.split(".")
    if len(parts) != 3 or parts[0] != CATALOG:
        raise ConfigurationError(f"{identifier!r} is not a table of the catalog {CATALOG!r}.",
                                 hint=f"Name tables {CATALOG}.<namespace>.<table>.")
    return Path(warehouse) / parts[1] / parts[2]


def metadata_version(location: Path) -> int | None:
    """The table's current metadata version (None: the table does not exist yet)."""
    try:
        return int((location / "metadata" / "version-hint.text").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


class IcebergTableReader(OutputReader):
    """Reads the records (``key``, ``value``) each snapshot of the table at ``location`` added, snapshot by
    snapshot."""

    idle_s = 0.2

    def __init__(self, location: Path) -> None:
        self.location = Path(location)
        self._snapshots: set[int] = set()
        self._files: set[str] = set()
        self._version: int | None = None

    def visible_mark(self) -> int:
        version = metadata_version(self.location)
        return -1 if version is None else version

    def read_new(self) -> list[VisibleRecord]:
        version = metadata_version(self.location)
        if version is None or version == self._version:
            return []
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(str(self.location / "metadata" / f"v{version}.metadata.json"))
        records: list[VisibleRecord] = []
        for snapshot in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0):
            if snapshot.snapshot_id in self._snapshots:
                continue
            for manifest in snapshot.manifests(table.io):
                for entry in manifest.fetch_manifest_entry(table.io):
                    path = entry.data_file.file_path
                    if int(entry.status) == _ADDED and entry.snapshot_id == snapshot.snapshot_id \
                            and path not in self._files:
                        self._files.add(path)
                        order = int(snapshot.sequence_number or 0)
                        records += parquet_records(path, order, {"snapshot_sequence": order})
            self._snapshots.add(snapshot.snapshot_id)
        self._version = version
        return records

    def leftovers(self) -> Leftovers:
        self.read_new()
        return file_leftovers(self.location / "data", self._files, {"snapshots": len(self._snapshots)})

    def transient(self, error: Exception) -> bool:
        return isinstance(error, OSError)


class IcebergTableSystem(ExternalSystem):
    """A Hadoop catalog whose warehouse is a folder of the stack's: nothing runs, no link."""

    name = "iceberg"

    def __init__(self) -> None:
        self.warehouse: str | None = None

    def start(self, workdir: str) -> None:
        self.warehouse = str(Path(workdir) / "warehouse")
        Path(self.warehouse).mkdir(parents=True, exist_ok=True)

    def spark_conf(self, endpoints: Mapping[str, str]) -> Mapping[str, str]:
        return {"spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
                f"spark.sql.catalog.{CATALOG}.type": "hadoop",
                f"spark.sql.catalog.{CATALOG}.warehouse": str(self._warehouse())}

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        return f"{CATALOG}.db.t_{run_id}"

    def reader(self, name: str, endpoints: Mapping[str, str]) -> IcebergTableReader:
        return IcebergTableReader(table_location(self._warehouse(), name))

    def _warehouse(self) -> str:
        if self.warehouse is None:
            raise ConfigurationError("The Iceberg system has not started: it has no warehouse yet.",
                                     hint="The harness starts it before the first run that needs it.")
        return self.warehouse
