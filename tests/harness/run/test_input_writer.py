"""Loading through an external system's writer: one write per planned transaction, aborted ones left uncommitted,
a refused write's records indeterminate, and a writer that cannot leave a write uncommitted refused up front."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.input_writer import load_with_writer, load_workload
from streamcert.harness.run.workload import WorkloadSpec, record_id_of
from streamcert.spi.external import InputWriter


class _Writer(InputWriter):
    writes_uncommitted = True

    def __init__(self, refuse: int | None = None) -> None:
        self.writes: list[tuple[list[int], bool]] = []
        self.refuse = refuse

    def write(self, records, commit=True):
        if len(self.writes) == self.refuse:
            self.writes.append(([], commit))
            raise ConnectionError("the table is locked")
        self.writes.append(([record_id_of(r.value) for r in records], commit))


def test_each_planned_transaction_is_one_write_and_the_ledger_says_what_became_of_it():
    spec = WorkloadSpec(total=500, transaction_records=50, aborted_fraction=0.3, seed=4)
    writer = _Writer(refuse=2)
    ledger = load_with_writer(writer, "t", spec).frame.set_index("id")
    assert len(writer.writes) == 10 and all(len(ids) == 50 for ids, _ in writer.writes[:2])
    for index, (ids, commit) in enumerate(writer.writes):
        expected = "acked" if commit else "aborted"
        if index == 2:
            rows = ledger.iloc[100:150]
            assert set(rows["status"]) == {"indeterminate" if commit else "aborted"}
            continue
        assert set(ledger.loc[ids, "status"]) == {expected}
    assert (ledger["status"] == "aborted").any() and (ledger["status"] == "acked").any()


def test_a_writer_that_cannot_leave_a_write_uncommitted_is_refused_for_a_workload_that_aborts():
    writer = _Writer()
    writer.writes_uncommitted = False
    with pytest.raises(ConfigurationError, match="cannot leave a write uncommitted"):
        load_with_writer(writer, "t", WorkloadSpec(total=200, transaction_records=10, aborted_fraction=0.5, seed=1))
    load_with_writer(writer, "t", WorkloadSpec(total=100, seed=1))
    assert all(commit for _, commit in writer.writes)


def test_a_writer_with_a_bulk_load_of_its_own_loads_the_whole_workload_with_it_and_others_write_by_transaction():
    class Bulk(_Writer):
        def load(self, spec):
            self.loaded = spec
            return "its own ledger"

    spec = WorkloadSpec(total=100, transaction_records=10, seed=1)
    bulk = Bulk()
    assert load_workload(bulk, "t", spec) == "its own ledger" and bulk.loaded is spec and bulk.writes == []
    plain = _Writer()
    assert len(load_workload(plain, "t", spec).frame) == 100 and len(plain.writes) == 10


def test_a_gated_load_asks_with_the_readable_records_before_each_write_and_stops_where_the_gate_says():
    spec = WorkloadSpec(total=1000, transaction_records=50, aborted_fraction=0.3, seed=4)
    asked: list[int] = []

    def gate(readable: int) -> bool:
        asked.append(readable)
        return readable < 200

    writer = _Writer(refuse=1)
    ledger = load_with_writer(writer, "t", spec, gate).frame
    # an aborted write's records and a refused write's are never readable: the gate is not told of them
    readable = [0]
    for ids, commit in writer.writes:
        readable.append(readable[-1] + (len(ids) if commit and ids else 0))
    assert asked == readable and asked[-1] >= 200 > asked[-2]
    assert list(ledger["id"]) == list(range(50 * len(writer.writes)))  # the rest was never written, nor ledgered
    assert (ledger["status"] == "aborted").any() and (ledger["status"] == "indeterminate").any()


def test_a_bulk_load_that_takes_no_gate_gives_way_to_one_write_per_transaction_when_the_load_is_gated():
    class Bulk(_Writer):
        def load(self, spec):
            raise AssertionError("a gated load must not call a bulk load that cannot be gated")

    class GatedBulk(_Writer):
        def load(self, spec, gate=None):
            self.gate = gate
            return "its own ledger"

    spec = WorkloadSpec(total=100, transaction_records=10, seed=1)
    plain = Bulk()
    assert len(load_workload(plain, "t", spec, gate=lambda written: written < 30).frame) == 30
    gated = GatedBulk()
    gate = lambda written: True  # noqa: E731
    assert load_workload(gated, "t", spec, gate=gate) == "its own ledger" and gated.gate is gate
