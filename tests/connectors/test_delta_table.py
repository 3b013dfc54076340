"""The Delta table system reads back what each version committed, in version order, and never a data file no
version added (what a writer killed before its commit leaves: counted, not read)."""

from __future__ import annotations

from streamcert.connectors.delta_table import DeltaTableReader, DeltaTableSystem, DeltaTableWriter, latest_version
from streamcert.spi.external import ExternalSystem, InputRecord, InputWriter, OutputReader


def _records(*values: bytes) -> list[InputRecord]:
    return [InputRecord(b"k" + value, value) for value in values]


def test_the_delta_system_satisfies_the_spi():
    assert isinstance(DeltaTableSystem(), ExternalSystem) and DeltaTableSystem().faults() == ()
    assert issubclass(DeltaTableReader, OutputReader) and issubclass(DeltaTableWriter, InputWriter)


def test_each_version_is_read_once_in_order_and_uncommitted_files_are_counted_not_read(tmp_path):
    table = str(tmp_path / "t")
    writer, reader = DeltaTableWriter(table), DeltaTableReader(table)
    assert reader.read_new() == [] and reader.visible_mark() == -1
    writer.prepare(1)
    writer.write(_records(b"a", b"b"))
    writer.write(_records(b"x"), commit=False)
    first = reader.read_new()
    assert [(r.value, r.key, r.order) for r in first] == [(b"a", b"ka", 1), (b"b", b"kb", 1)]
    writer.write(_records(b"c"))
    writer.write(_records(b"d"))
    assert [(r.value, r.order) for r in reader.read_new()] == [(b"c", 2), (b"d", 3)]
    assert reader.read_new() == [] and reader.visible_mark() == latest_version(tmp_path / "t") == 3
    leftovers = reader.leftovers()
    assert leftovers.found == () and leftovers.counts["uncommitted_files"] == 1
    assert leftovers.counts["committed_files"] == 3
