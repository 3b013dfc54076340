"""The folder of Spark's file sink as a system: a run's output is a folder of the run's own (no server, no link).

Leftovers: data files the sink's ``_spark_metadata`` log does not commit are invisible to Spark's readers: counted,
never a finding. Runs in the harness's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamcert.harness.run.observers.base import Observer, OutputTarget
from streamcert.harness.run.observers.files import FilesObserver, committed_files
from streamcert.harness.systems.stack_system import StackSystem
from streamcert.spi.external import Endpoint, Leftovers

__all__ = ["SparkFileSink"]


class SparkFileSink(StackSystem):
    """A folder written by Spark's file sink (``format("parquet")``), read by its commit log."""

    name = "files"
    endpoint_names = ()

    def endpoints(self) -> Mapping[str, Endpoint]:
        return {}

    def proxied(self) -> dict[str, str]:
        return {}

    def direct(self) -> dict[str, str]:
        return {}

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        """The folder ``output`` in the run's work folder."""
        return str(Path(workdir) / "output")

    def observer(self, name: str, unpack: Any = None) -> Observer:
        return FilesObserver(OutputTarget("files", name), unpack=unpack)

    def leftovers_of(self, name: str) -> Leftovers:
        folder = Path(name)
        committed = set(committed_files(folder))
        written = {str(path) for path in folder.rglob("*.parquet")} if folder.is_dir() else set()
        return Leftovers((), {"committed_files": len(committed), "uncommitted_files": len(written - committed)})
