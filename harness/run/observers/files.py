"""The files observer: reads what Spark's file sink committed: only the files its ``_spark_metadata`` log lists.

A failed or killed attempt can leave Parquet files in the output folder that
were never committed; a reader that lists the folder would see duplicates.
The metadata log (``N`` and ``N.compact`` files, one JSON entry per line after
a version line) is the sink's truth, as for Spark's own readers.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from streamcert.harness.run.observers.base import Observer, OutputTarget

__all__ = ["committed_files", "read_committed_table", "FilesObserver"]


def committed_files(output: Path) -> list[str]:
    """Paths of the data files the sink committed, in the order of the batches that committed them (as each log
    lists them): a reader that follows it sees each key's records in the order the query wrote them."""
    paths: dict[str, None] = {}
    log_dir = Path(output) / "_spark_metadata"
    if not log_dir.is_dir():
        return []
    for log in sorted(log_dir.iterdir(), key=lambda p: (int(p.name.split(".")[0]) if p.name[0].isdigit() else -1)):
        if log.name.startswith("."):
            continue
        entries = [json.loads(line) for line in log.read_text().splitlines()[1:]]  # line 0 is the version
        for entry in entries:
            path = unquote(urlparse(entry["path"]).path)
            if entry.get("action", "add") == "add":
                paths.setdefault(path, None)
            else:
                paths.pop(path, None)
    return list(paths)


def read_committed_table(output: Path) -> pa.Table | None:
    """All committed rows as one Arrow table (None when nothing was committed)."""
    files = committed_files(output)
    if not files:
        return None
    return pa.concat_tables([pq.read_table(path) for path in files])


class FilesObserver(Observer):
    """Reads column ``value`` (and ``key`` if written) of each data file once the sink's log commits it.

    Location column: ``file``. Polls the log every half second; a file is read once, when it first appears.
    """

    kind = "files"
    idle_s = 0.5

    @classmethod
    def output_name(cls, stem: str, run_id: str, workdir: Path) -> str:
        """The folder ``output`` in the run's work folder."""
        return str(workdir / "output")

    def __init__(self, target: OutputTarget, unpack=None) -> None:
        super().__init__(target, unpack)
        self._read: set[str] = set()

    def visible_mark(self) -> tuple[str, ...]:
        """The entries of the sink's ``_spark_metadata`` log: a new one is a batch committed (one listing)."""
        log_dir = Path(self.target.name) / "_spark_metadata"
        try:
            return tuple(sorted(entry.name for entry in log_dir.iterdir() if not entry.name.startswith(".")))
        except FileNotFoundError:
            return ()

    def _read_new(self) -> pd.DataFrame | None:
        new = [path for path in committed_files(Path(self.target.name)) if path not in self._read]
        if not new:
            return None
        frames = []
        for path in new:
            table = pq.read_table(path)
            columns = [c for c in ("key", "value") if c in table.column_names]
            frame = table.select(columns).to_pandas()
            frame["file"] = path
            frames.append(frame)
            self._read.add(path)
        return pd.concat(frames, ignore_index=True)
