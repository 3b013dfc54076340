"""What the lakehouse table readers share: a data file's local path from the URI a table's metadata gives, its
records read with pyarrow as :class:`~streamcert.spi.external.VisibleRecord`, and the count of data files in a
table's folder that no commit added. Runs in the harness's process."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

from streamcert.spi.external import Leftovers, VisibleRecord

__all__ = ["local_path", "parquet_records", "file_leftovers"]


def local_path(uri: str) -> str:
    """``file:///t/a.parquet``, ``file:/t/a.parquet`` or ``/t/a.parquet`` -> ``/t/a.parquet`` (resolved)."""
    parsed = urlparse(uri)
    path = unquote(parsed.path) if parsed.scheme == "file" else uri
    return str(Path(path).resolve())


def parquet_records(uri: str, order: int, location: Mapping[str, object]) -> list[VisibleRecord]:
    """The ``key`` and ``value`` of every row of the data file at ``uri``, visible at ``order``; ``location`` plus the
    file's name says where each was found."""
    import pyarrow.parquet as pq

    path = local_path(uri)
    table = pq.read_table(path, columns=["key", "value"])
    where = {**location, "file": Path(path).name}
    return [VisibleRecord(value, key, order, where)
            for key, value in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)]


def file_leftovers(folder: Path, committed: Iterable[str], counts: Mapping[str, int],
                   skip: str | None = None) -> Leftovers:
    """Data files under ``folder`` (outside a ``skip`` sub-folder) that no commit added: what failed writers left,
    which no reader sees (counted, not a finding)."""
    written = {str(path.resolve()) for path in Path(folder).rglob("*.parquet") if skip not in path.parts}
    kept = {local_path(uri) for uri in committed}
    return Leftovers(found=(), counts={**counts, "committed_files": len(kept),
                                       "uncommitted_files": len(written - kept)})
