"""The observer of an external system's output: an :class:`~streamcert.spi.external.OutputReader` polled by the
observer's thread, its records stamped, unpacked and decoded like every other output kind's.

Not registered under an output kind: a sink with an ``output_system`` gets one from the scenario runner
(:func:`reader_observer`), made from its system's reader. The reader's ``order`` becomes the round's visibility
order (records of one table version share a position), its ``location`` the frame's location columns.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pandas as pd

from streamcert.harness.run.observers.base import VISIBILITY_ORDER, Observer, OutputTarget
from streamcert.spi.external import OutputReader

__all__ = ["ReaderObserver", "reader_observer"]


class ReaderObserver(Observer):
    """Reads ``target.name`` through ``reader``; ``stop()`` closes the reader (in the observer's thread)."""

    def __init__(self, target: OutputTarget, reader: OutputReader, unpack=None) -> None:
        super().__init__(target, unpack)
        self.reader = reader
        self.idle_s = reader.idle_s
        self.carries_keys = reader.carries_keys

    def prepare(self, partitions: int) -> None:
        self.reader.prepare(partitions)

    def visible_mark(self) -> Hashable:
        mark = self.reader.visible_mark()
        return self.count() if mark is None else mark

    def _read_new(self) -> pd.DataFrame | None:
        records = list(self.reader.read_new())
        if not records:
            return None
        columns: dict[str, list[Any]] = {"key": [r.key for r in records], "value": [bytes(r.value) for r in records]}
        if any(r.order is not None for r in records):
            if any(r.order is None for r in records):
                raise TypeError(f"{type(self.reader).__name__}.read_new() gave some records an order and some none: "
                                "give every record of a round its order, or none")
            columns[VISIBILITY_ORDER] = [r.order for r in records]
        for name in dict.fromkeys(name for r in records for name in r.location):
            columns[name] = [r.location.get(name) for r in records]
        return pd.DataFrame(columns)

    def _transient(self, error: Exception) -> bool:
        return self.reader.transient(error)

    def _close(self) -> None:
        self.reader.close()


def reader_observer(kind: str, name: str, reader: OutputReader, unpack=None) -> ReaderObserver:
    """The observer of output ``name`` of an external system called ``kind``, read by ``reader``."""
    return ReaderObserver(OutputTarget(kind, name), reader, unpack)
