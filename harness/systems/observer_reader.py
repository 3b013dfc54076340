"""An :class:`~streamcert.spi.external.OutputReader` over one of the harness's observers: the stack's systems
offered through the SPI's reader interface, one record object per row.

Runs in the harness's process, in whichever thread polls it (as any reader).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import pandas as pd

from streamcert.harness.run.observers.base import VISIBILITY_ORDER, Observer
from streamcert.spi.external import Leftovers, OutputReader, VisibleRecord

__all__ = ["ObserverReader"]


class ObserverReader(OutputReader):
    """Reads through ``observer`` (never started: this reader's caller polls it); ``leftovers`` answers
    :meth:`leftovers`."""

    def __init__(self, observer: Observer, leftovers: Callable[[], Leftovers | None] | None = None) -> None:
        self.observer = observer
        self._leftovers = leftovers
        self._opened = False
        self.idle_s = observer.idle_s  # type: ignore[misc] - per instance: the observer's kind decides

    @property
    def carries_keys(self) -> bool:  # type: ignore[override]
        return bool(self.observer.carries_keys)

    def read_new(self) -> Sequence[VisibleRecord]:
        if not self._opened:
            self.observer._open()
            self._opened = True
        frame = self.observer._read_new()
        return [] if frame is None or frame.empty else _records(frame)

    def visible_mark(self) -> Hashable | None:
        return self.observer.visible_mark()

    def leftovers(self) -> Leftovers | None:
        return self._leftovers() if self._leftovers is not None else None

    def transient(self, error: Exception) -> bool:
        return self.observer._transient(error)

    def close(self) -> None:
        try:
            if self._opened:
                self.observer._close()
        finally:
            self.observer.stop()


def _records(frame: pd.DataFrame) -> list[VisibleRecord]:
    location = [c for c in frame.columns if c not in ("key", "value", VISIBILITY_ORDER)]
    keys = frame["key"].tolist() if "key" in frame.columns else [None] * len(frame)
    orders = frame[VISIBILITY_ORDER].tolist() if VISIBILITY_ORDER in frame.columns else [None] * len(frame)
    places = frame[location].to_dict("records") if location else [{}] * len(frame)
    return [VisibleRecord(bytes(value), _bytes(key), None if order is None else int(order), _plain(place))
            for value, key, order, place in zip(frame["value"].tolist(), keys, orders, places, strict=True)]


def _bytes(key: Any) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    return str(key).encode()


def _plain(place: dict[str, Any]) -> dict[str, Any]:
    return {name: value.item() if hasattr(value, "item") else value for name, value in place.items()}
