"""An external system's reader as an observer: its records are decoded like any output's, a commit's records share
one position, its location columns are kept, and a reader that orders some records of a round and not others is an
error the run reports."""

from __future__ import annotations

import time

from streamcert.harness.run.observers.reader import reader_observer
from streamcert.harness.run.workload import encode_value
from streamcert.spi.external import OutputReader, VisibleRecord


class _Reader(OutputReader):
    idle_s = 0.01

    def __init__(self, rounds) -> None:
        self.rounds, self.closed = list(rounds), False

    def read_new(self):
        return self.rounds.pop(0) if self.rounds else []

    def close(self) -> None:
        self.closed = True


def _record(record_id: int, order: int | None) -> VisibleRecord:
    return VisibleRecord(encode_value(record_id, 0, time.time(), 40), b"k", order, {"version": order})


def _observe(reader: _Reader, records: int):
    observer = reader_observer("thing", "out", reader)
    with observer:
        deadline = time.monotonic() + 10
        while observer.count() < records and observer.error is None and time.monotonic() < deadline:
            time.sleep(0.01)
    return observer


def test_records_of_one_commit_share_a_position_and_keep_their_location():
    reader = _Reader([[_record(1, 5), _record(2, 5), _record(3, 6)], [_record(4, 7)]])
    observer = _observe(reader, 4)
    frame = observer.frame()
    assert list(frame["id"]) == [1, 2, 3, 4] and list(frame["position"]) == [0, 0, 1, 2]
    assert list(frame["version"]) == [5, 5, 6, 7] and list(frame["key"]) == ["k"] * 4
    assert reader.closed and observer.visible_mark() == 4


def test_a_round_with_some_records_ordered_and_some_not_is_an_error():
    observer = _observe(_Reader([[_record(1, 5), _record(2, None)]]), 2)
    assert observer.error and "some records an order and some none" in observer.error
