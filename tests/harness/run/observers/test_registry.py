"""The observer registry and what every observer shares (no servers needed): one observer per output kind,
found by kind; the files observer reads only what Spark's file sink committed."""

from __future__ import annotations

import json
import time

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.observers import OUTPUT_COLUMNS, OutputTarget, observer_classes, observer_for
from streamcert.harness.run.observers.base import VISIBILITY_ORDER
from streamcert.harness.run.observers.files import FilesObserver, committed_files
from streamcert.harness.run.workload import encode_value
from streamcert.harness.waiting import wait_for


def test_every_observer_module_registers_its_kind_and_names_outputs_per_run(tmp_path):
    classes = observer_classes()
    assert {"kafka", "postgres", "files"} <= set(classes)
    for kind, cls in classes.items():
        assert cls.kind == kind
        first = cls.output_name("my-scenario", "r1", tmp_path)
        second = cls.output_name("my-scenario", "r2", tmp_path / "b")
        assert first and first != second
    assert classes["postgres"].output_name("My Scenario-1", "ab12", tmp_path) == "out_my_scenario_1_ab12"


def test_an_unknown_output_kind_is_a_configuration_error_listing_the_known_ones():
    with pytest.raises(ConfigurationError, match="'s3'") as caught:
        observer_for(OutputTarget("s3", "bucket"))
    assert "kafka" in caught.value.hint and "files" in caught.value.hint


def test_a_postgres_output_without_a_database_is_refused_before_the_run():
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        observer_for(OutputTarget("postgres", "out_table"))


def _write_file(folder, name, ids):
    path = folder / name
    pq.write_table(pa.table({"value": [encode_value(i, i, 1.0, 64) for i in ids]}), path)
    return path


def _commit(folder, batch, paths, action="add"):
    log = folder / "_spark_metadata"
    log.mkdir(exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f"file://{p}", "action": action}) for p in paths]
    (log / str(batch)).write_text("\n".join(lines) + "\n")


def test_the_files_observer_reads_committed_files_only_and_each_once(tmp_path):
    first = _write_file(tmp_path, "part-0.parquet", [1, 2])
    _write_file(tmp_path, "part-orphan.parquet", [99])  # written by a killed attempt, never committed
    _commit(tmp_path, 0, [first])
    with FilesObserver(OutputTarget("files", str(tmp_path))) as observer:
        wait_for(lambda: observer.count() == 2, what="the first committed file", timeout=10)
        second = _write_file(tmp_path, "part-1.parquet", [3])
        _commit(tmp_path, 1, [second])
        wait_for(lambda: observer.count() == 3, what="the second committed file", timeout=10)
        time.sleep(1.2)  # two more rounds: nothing is read twice
        frame = observer.frame()
    assert sorted(frame["id"]) == [1, 2, 3]
    assert list(frame.columns[:len(OUTPUT_COLUMNS)]) == list(OUTPUT_COLUMNS)
    assert set(frame["file"]) == {str(first), str(second)}
    assert observer.error is None


def test_a_file_the_log_deletes_is_not_committed(tmp_path):
    first, second = _write_file(tmp_path, "a.parquet", [1]), _write_file(tmp_path, "b.parquet", [2])
    _commit(tmp_path, 0, [first, second])
    _commit(tmp_path, 1, [first], action="delete")
    assert committed_files(tmp_path) == [str(second)]


def test_committed_files_come_in_the_order_of_their_batches_not_of_their_names(tmp_path):
    """Random file names sort in any order; a key's records are in order only if batches are read in order."""
    later_name = _write_file(tmp_path, "part-b.parquet", [1])
    earlier_name = _write_file(tmp_path, "part-a.parquet", [2])
    _commit(tmp_path, 0, [later_name])
    _commit(tmp_path, 1, [earlier_name])
    _commit(tmp_path, 10, [_write_file(tmp_path, "part-0.parquet", [3])])
    assert committed_files(tmp_path) == [str(later_name), str(earlier_name), str(tmp_path / "part-0.parquet")]


def test_unpack_turns_each_output_row_into_records_with_extra_columns(tmp_path):
    """What an aggregator does: one output row holds several records; its extra columns reach the frame."""
    first = _write_file(tmp_path, "part-0.parquet", [1])
    _commit(tmp_path, 0, [first])

    def unpack(frame: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"key": ["k", "k"], "value": [encode_value(7, 1, 1.0, 64), encode_value(8, 2, 1.0, 64)],
                             "batch_id": ["b0", "b0"]})

    with FilesObserver(OutputTarget("files", str(tmp_path)), unpack=unpack) as observer:
        wait_for(lambda: observer.count() == 2, what="the unpacked records", timeout=10)
    frame = observer.frame()
    assert list(frame["id"]) == [7, 8] and list(frame["batch_id"]) == ["b0", "b0"] and list(frame["key"]) == ["k"] * 2
    assert list(frame["position"]) == [0, 1]


class _Flaky(FilesObserver):
    """Fails its first rounds with a transient error, then with ``final`` if given, else reads normally."""

    retry_s = 0.01

    def __init__(self, target, transient: int, final: Exception | None = None) -> None:
        super().__init__(target)
        self.failures, self.final = transient, final

    def _transient(self, error):
        return isinstance(error, ConnectionError)

    def _read_new(self):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the server went away")
        if self.final is not None:
            raise self.final
        return super()._read_new()


def test_an_observer_reads_on_after_transient_errors_and_counts_them(tmp_path):
    _commit(tmp_path, 0, [_write_file(tmp_path, "part-0.parquet", [1, 2])])
    with _Flaky(OutputTarget("files", str(tmp_path)), transient=3) as observer:
        wait_for(lambda: observer.count() == 2, what="the records after the outage", timeout=10)
    assert observer.transient_errors == 3 and observer.error is None


def test_an_error_that_is_not_transient_stops_the_observer_and_is_reported(tmp_path):
    with _Flaky(OutputTarget("files", str(tmp_path)), transient=1, final=ValueError("bad row")) as observer:
        wait_for(lambda: observer.error is not None, what="the observer's error", timeout=10)
    assert observer.error == "ValueError: bad row" and observer.transient_errors == 1


class _Scripted(FilesObserver):
    """Returns the given rounds, one per call, then nothing."""

    idle_s = 0.01

    def __init__(self, target, rounds: list[pd.DataFrame]) -> None:
        super().__init__(target)
        self.rounds = list(rounds)

    def _read_new(self):
        return self.rounds.pop(0) if self.rounds else None


def _round(ids: list[int], order: list[int] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame({"key": ["k"] * len(ids), "value": [encode_value(i, i, 1.0, 64) for i in ids]})
    if order is not None:
        frame[VISIBILITY_ORDER] = order
    return frame


def test_positions_follow_rounds_and_tie_rows_the_round_says_became_visible_at_once(tmp_path):
    rounds = [_round([1, 2]), _round([5, 3, 4, 6], order=[900, 100, 100, 900]), _round([7])]
    with _Scripted(OutputTarget("files", str(tmp_path)), rounds) as observer:
        wait_for(lambda: observer.count() == 7, what="the three rounds", timeout=10)
    frame = observer.frame()
    assert list(frame["id"]) == [1, 2, 5, 3, 4, 6, 7]
    # round 2: its commit at 100 (ids 3, 4) before its commit at 900 (5, 6), each commit's rows tied
    assert list(frame["position"]) == [0, 1, 3, 2, 2, 3, 4]
    assert VISIBILITY_ORDER not in frame.columns


def test_an_observer_samples_what_it_left_unread_and_says_when_it_fell_more_than_a_round_behind(monkeypatch):
    from streamcert.harness.run.observers import base

    class Reader(base.Observer):
        kind = "lagging-test"
        round_records = 100

        def __init__(self, unread):
            super().__init__(OutputTarget("kafka", "t"))
            self.left = list(unread)

        def _read_new(self):
            if not self.left:
                self._stopping.set()
            return None

        def _unread_count(self):
            return self.left.pop(0) if self.left else None

    monkeypatch.setattr(base, "_LAG_SAMPLE_S", 0.0)
    reader = Reader([0, 50, 250, 400, 0, 10, 0, 0, 0, 0])
    reader._run()
    lag = reader.read_lag()
    assert lag.samples == 10 and lag.max_unread == 400 and lag.mean_unread == pytest.approx(71.0)
    assert lag.behind_share == pytest.approx(0.2)  # two samples more than a round (100) behind
    assert lag.as_dict()["behind_share"] == 0.2

    class Blind(Reader):
        def _unread_count(self):
            self.left.pop(0) if self.left else None
            return None

    blind = Blind([1, 2])
    blind._run()
    assert blind.read_lag() is None  # a kind that cannot tell says nothing, not "never behind"
