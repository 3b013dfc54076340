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

from streamcert.harness.run.observers.base import VISIBILITY_ORDER, Observer, OutputTarget
from streamcert.harness.verify.checkers import ORDER_STREAM, ORDER_WITHIN

__all__ = ["committed_batches", "committed_files", "read_committed_table", "FilesObserver"]


def committed_batches(output: Path) -> dict[str, int]:
    """Path of each data file the sink committed -> the batch that committed it, in the order of the batches (as
    each log lists them): a reader that follows it sees each key's records in the order the query wrote them."""
    paths: dict[str, int] = {}
    log_dir = Path(output) / "_spark_metadata"
    if not log_dir.is_dir():
        return {}
    for log in sorted(log_dir.iterdir(), key=lambda p: (int(p.name.split(".")[0]) if p.name[0].isdigit() else -1)):
        if log.name.startswith("."):
            continue
        batch = int(log.name.split(".")[0])
        for line in log.read_text().splitlines()[1:]:  # line 0 is the version
            entry = json.loads(line)
            path = unquote(urlparse(entry["path"]).path)
            if entry.get("action", "add") == "add":
                paths.setdefault(path, batch)  # a compacted log repeats earlier batches' entries
            else:
                paths.pop(path, None)
    return paths


def committed_files(output: Path) -> list[str]:
    """Paths of the data files the sink committed, in the order of the batches that committed them."""
    return list(committed_batches(output))


def read_committed_table(output: Path) -> pa.Table | None:
    """All committed rows as one Arrow table (None when nothing was committed)."""
    files = committed_files(output)
    if not files:
        return None
    return pa.concat_tables([pq.read_table(path) for path in files])


class FilesObserver(Observer):
    """Reads column ``value`` (and ``key``, and the source's ``partition`` as ``source_partition``, if written) of
    each data file once the sink's log commits it.

    Location columns: ``file`` and ``batch`` (the batch whose log entry committed it; one file is one task's
    output in that batch). Polls the log every half second; a file is read once, when it first appears. A batch's
    files became visible at once (one position); inside a file, rows keep the order the task wrote them in
    (``order_stream`` / ``order_within``, which the order checker reads).
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
        batches = committed_batches(Path(self.target.name))
        new = [path for path in batches if path not in self._read]
        if not new:
            return None
        frames = []
        for path in new:
            table = pq.read_table(path)
            columns = [c for c in ("key", "value", "partition") if c in table.column_names]
            frame = table.select(columns).to_pandas().rename(columns={"partition": "source_partition"})
            frame["file"] = path
            frame["batch"] = batches[path]
            # a batch's files become visible at once (one log entry); inside a file, rows keep the task's order
            frame[VISIBILITY_ORDER] = batches[path]
            frame[ORDER_STREAM] = path
            frame[ORDER_WITHIN] = range(len(frame))
            frames.append(frame)
            self._read.add(path)
        return pd.concat(frames, ignore_index=True)
