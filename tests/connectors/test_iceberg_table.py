"""The Iceberg table reader reads back what each snapshot added, snapshot by snapshot, once, as a Hadoop catalog's
table shows it (its current metadata named by ``version-hint.text``), and never a data file no snapshot added.

The tables are written with PyIceberg (a SQL catalog on SQLite: no Spark here), their metadata files then laid out
as a Hadoop catalog lays them out (``metadata/v<N>.metadata.json`` and the hint)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from streamcert.connectors.iceberg_table import IcebergTableReader, IcebergTableSystem, metadata_version
from streamcert.spi import ConfigurationError
from streamcert.spi.external import ExternalSystem, OutputReader

_SCHEMA = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary())])


class _HadoopLayout:
    """A PyIceberg table whose metadata, after each append, is published the way a Hadoop catalog does."""

    def __init__(self, folder: Path) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("test", uri=f"sqlite:///{folder / 'catalog.db'}", warehouse=f"file://{folder}")
        catalog.create_namespace("db")
        self.table = catalog.create_table("db.t", schema=_SCHEMA)
        self.location = Path(self.table.location().removeprefix("file://"))
        self.version = 0

    def append(self, *values: bytes) -> None:
        self.table.append(pa.table({"key": [b"k" + v for v in values], "value": list(values)}, schema=_SCHEMA))
        self.version += 1
        metadata = self.location / "metadata"
        shutil.copy(self.table.metadata_location.removeprefix("file://"), metadata / f"v{self.version}.metadata.json")
        (metadata / "version-hint.text").write_text(str(self.version))


def test_the_iceberg_system_satisfies_the_spi_and_names_a_table_of_its_warehouse(tmp_path):
    system = IcebergTableSystem()
    assert isinstance(system, ExternalSystem) and issubclass(IcebergTableReader, OutputReader)
    with pytest.raises(ConfigurationError, match="not started"):
        system.reader("streamcert.db.t_x", {})
    system.start(str(tmp_path))
    assert system.output_name("s", "x1", str(tmp_path)).endswith("t_x1")
    assert "warehouse" in system.spark_conf({})["spark.sql.catalog.streamcert.warehouse"]


def test_each_snapshot_is_read_once_in_order_and_a_file_no_snapshot_added_is_never_read(tmp_path):
    table = _HadoopLayout(tmp_path)
    reader = IcebergTableReader(table.location)
    assert reader.read_new() == [] and reader.visible_mark() == -1
    table.append(b"a", b"b")
    first = reader.read_new()
    assert sorted((r.value, r.key) for r in first) == [(b"a", b"ka"), (b"b", b"kb")]
    assert len({r.order for r in first}) == 1  # one snapshot: visible at once
    orphan = table.location / "data" / "orphan.parquet"  # what a writer killed before its commit leaves
    orphan.parent.mkdir(exist_ok=True)
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"key": [b"kz"], "value": [b"z"]}, schema=_SCHEMA), orphan)
    table.append(b"c")
    table.append(b"d")
    later = reader.read_new()
    assert [r.value for r in later] == [b"c", b"d"] and later[0].order < later[1].order
    assert later[0].order > first[0].order
    assert reader.read_new() == [] and reader.visible_mark() == metadata_version(table.location) == 3
    leftovers = reader.leftovers()
    assert list(leftovers.found) == [] and leftovers.counts["uncommitted_files"] == 1
