"""The checkpoint file manager of the harness's Spark sessions: how a query writes ``offsets/N`` and ``commits/N``.

Spark's default manager writes each log file through Hadoop's ``FileContext``: a temporary file, then a rename that
first asks for the link status of source and target. On the local file system without Hadoop's native library
both steps start processes from the driver JVM: four ``readlink`` and one ``chmod`` per file, ten per micro-batch
(JFR's ``jdk.ProcessStart`` events of a benchmark run: 504 ``readlink`` and 126 ``chmod`` for each of the two logs
over 126 batches). On two busy cores that was most of ``walCommit`` and ``commitOffsets``: 50-100 ms each, every
batch, for every pipeline. The ``FileSystem``-based manager that Spark ships renames with one ``rename(2)`` and keeps
one ``chmod`` per file: the two phases fell to 15-44 ms (medians of steady batches at 1,000 records/s, both
pipelines; ``docs/architecture.md`` has the runs).

The guarantee on a local disk is the same: both managers check that the target is absent and then rename, neither
atomically against a second writer, and Spark lets one query at a time run on a checkpoint. A session that sets
``spark.sql.streaming.checkpointFileManagerClass`` itself keeps its own (``SparkConfig.conf`` comes last).

``STREAMCERT_CHECKPOINT_MANAGER=filesystem|spark`` says which a session uses when its SparkConfig does not:
certifications and the project's tests use ``filesystem`` unless it is set; benchmarks use ``spark``, as a user's
query on a default pyspark install does (the forks are part of what such a query pays every batch).
"""

from __future__ import annotations

import contextlib
import functools
import zipfile
from collections.abc import Iterator
from pathlib import Path

from streamcert.harness.stack.settings import switch_value, variable_default

__all__ = ["CHECKPOINT_MANAGER_KEY", "SWITCH_VAR", "CERTIFICATION_CHECKPOINT_MANAGER", "checkpoint_manager_mode",
           "default_checkpoint_manager", "checkpoint_file_manager"]

CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
#: ``filesystem`` or ``spark``: the checkpoint manager of Spark sessions whose SparkConfig does not say.
SWITCH_VAR = "STREAMCERT_CHECKPOINT_MANAGER"
_SWITCH_VALUES = ("filesystem", "spark")
#: What a certification's sessions use when ``STREAMCERT_CHECKPOINT_MANAGER`` does not say.
CERTIFICATION_CHECKPOINT_MANAGER = "filesystem"


def checkpoint_manager_mode(default: str = "spark") -> str:
    """``filesystem`` or ``spark``: what ``STREAMCERT_CHECKPOINT_MANAGER`` says, or ``default`` when it is unset; any
    other value is a :class:`ConfigurationError` (raised before anything starts)."""
    return switch_value(SWITCH_VAR, _SWITCH_VALUES, default,
                        hint=f"Set {SWITCH_VAR}=filesystem to write checkpoint logs with one rename and no readlink "
                             "processes, spark for Spark's default manager, or unset it.")


@contextlib.contextmanager
def default_checkpoint_manager(mode: str) -> Iterator[str]:
    """``STREAMCERT_CHECKPOINT_MANAGER=mode`` for the sessions started inside (driver children, standbys and a driver
    pool inherit it) unless the variable is set already; yields the mode in effect."""
    with variable_default(SWITCH_VAR, checkpoint_manager_mode(mode)) as effective:
        yield effective

# Spark 4.1 moved the streaming classes into subpackages; the older name is kept for the releases before it.
_CANDIDATES = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)


@functools.cache
def checkpoint_file_manager(jars: Path | None = None) -> str | None:
    """The class name of the ``FileSystem``-based checkpoint manager in this pyspark's ``spark-sql`` jar (or the
    jars in ``jars``), or None when no known name is there (Spark's default manager is kept then)."""
    if jars is None:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("spark-sql_*.jar")):
        try:
            with zipfile.ZipFile(jar) as archive:
                names = set(archive.namelist())
        except (OSError, zipfile.BadZipFile):
            continue
        for name in _CANDIDATES:
            if name.replace(".", "/") + ".class" in names:
                return name
    return None
