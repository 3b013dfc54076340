"""Spark's checkpoint writes held open: the harness's checkpoint file manager, built on first use, and its protocol.

Spark writes ``commits/N`` once a batch's sink commit returned and ``offsets/N`` once a batch is planned. Between
the sink's commit and ``commits/N`` lies the window where a replayed commit must be a no-op (SNK-4, AGG-4); a kill
that lands there by racing a poll is luck. ``java/HoldingCheckpointFileManager.java`` is Spark's default checkpoint
file manager (``spark.sql.streaming.checkpointFileManagerClass``) with one addition: armed, it holds the write of
``<log>/N`` before any byte of it exists and says so in ``<checkpoint>/.streamcert-hold/held-<log>-<N>``; the harness
then kills the driver, or lets the write go. :func:`ensure_hold_jar` compiles it against the running pyspark's jars
into the cache once (a second or two; Spark moved ``CheckpointFileManager`` between versions, so its package is read
from the jar); :func:`hold_spark_conf` is what a driver needs to use it; :class:`CheckpointHold` is the harness's side
of the protocol on one checkpoint. Runs in the harness's process.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from streamcert.harness.errors import PrerequisiteMissing
from streamcert.harness.stack.cache import cache_dir, cache_lock

__all__ = ["HOLD_CLASS", "HOLD_DELEGATE_KEY", "HOLD_FOLDER", "LOGS", "ensure_hold_jar", "hold_spark_conf",
           "CheckpointHold"]

HOLD_CLASS = "streamcert.HoldingCheckpointFileManager"
#: The manager the holding one writes through: the one the session would have used (Spark's default when unset).
HOLD_DELEGATE_KEY = "spark.hadoop.streamcert.checkpointHold.delegate"
#: The folder of the protocol's files, inside the checkpoint (Spark reads nothing there).
HOLD_FOLDER = ".streamcert-hold"
#: The checkpoint logs whose writes can be held.
LOGS = ("commits", "offsets")
_SOURCE = Path(__file__).resolve().parent / "java" / "HoldingCheckpointFileManager.java"
_INTERFACE = "CheckpointFileManager.class"


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


@functools.cache  # a scan of spark-sql's jar: once per process, not once per run's driver settings
def _interface_package(jars: Path) -> str:
    """The package of Spark's ``CheckpointFileManager`` in this pyspark's spark-sql jar."""
    for jar in sorted(jars.glob("spark-sql_*.jar")):
        with zipfile.ZipFile(jar) as archive:
            for name in archive.namelist():
                if name.endswith("/" + _INTERFACE) and "/streaming/" in name:
                    return name[: -len(_INTERFACE) - 1].replace("/", ".")
    raise PrerequisiteMissing(f"No CheckpointFileManager class in {jars}/spark-sql_*.jar: this pyspark cannot hold "
                              "its checkpoint writes.", hint="Install a pyspark streamcert supports (4.1 to 4.3).")


def _javac() -> tuple[str, str]:
    """``javac`` and ``jar`` of the JDK that runs Spark (JAVA_HOME first, then PATH)."""
    java_home = os.environ.get("JAVA_HOME")
    found = [str(Path(java_home) / "bin" / tool) if java_home and (Path(java_home) / "bin" / tool).is_file()
             else shutil.which(tool) for tool in ("javac", "jar")]
    if not all(found):
        raise PrerequisiteMissing("Holding Spark's checkpoint writes needs a JDK's javac and jar to build its "
                                  "checkpoint file manager once, and neither JAVA_HOME nor PATH has them.",
                                  hint="Install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless) or "
                                       "point JAVA_HOME at one.")
    return found[0], found[1]


def ensure_hold_jar() -> Path:
    """The jar of the holding checkpoint file manager for this pyspark, built into the cache on first use."""
    jars = _pyspark_jars()
    package = _interface_package(jars)
    source = _SOURCE.read_text().replace("@CFM_PACKAGE@", package)
    digest = hashlib.sha256(f"{source}\n{jars}".encode()).hexdigest()[:16]
    target = cache_dir() / "jvm" / f"checkpoint-hold-{digest}.jar"
    if target.exists():
        return target
    with cache_lock("checkpoint-hold"):
        if target.exists():
            return target
        javac, jar = _javac()
        with tempfile.TemporaryDirectory(prefix="streamcert-hold-") as work:
            java_file = Path(work) / "streamcert" / "HoldingCheckpointFileManager.java"
            java_file.parent.mkdir()
            java_file.write_text(source)
            classes = Path(work) / "classes"
            built = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", f"{jars}/*", "-d", str(classes),
                                    str(java_file)], capture_output=True, text=True, timeout=300)
            if built.returncode != 0:
                raise PrerequisiteMissing("Building the checkpoint file manager that holds Spark's checkpoint "
                                          f"writes failed: {(built.stderr or built.stdout).strip()[:600]}",
                                          hint=f"Check that {javac} is a JDK 17+ and pyspark's jars are in {jars}.")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".tmp")
            subprocess.run([jar, "cf", str(partial), "-C", str(classes), "."], check=True, capture_output=True,
                           timeout=120)
            partial.replace(target)
    return target


def hold_spark_conf() -> dict[str, str]:
    """The Spark settings of a driver whose checkpoint writes can be held (``spark.jars`` to be joined with others)."""
    return {"spark.sql.streaming.checkpointFileManagerClass": HOLD_CLASS, "spark.jars": str(ensure_hold_jar())}


class CheckpointHold:
    """The harness's side of the hold protocol on the checkpoint ``checkpoint`` (a local folder)."""

    def __init__(self, checkpoint: str | Path) -> None:
        self.folder = Path(str(checkpoint).removeprefix("file:")) / HOLD_FOLDER

    def arm(self, log: str, from_batch: int) -> None:
        """Hold the next write of ``log``/N with N >= ``from_batch``."""
        self._check(log)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f".arm-{log}.tmp"
        partial.write_text(f"{int(from_batch)}\n")
        partial.replace(self.folder / f"arm-{log}")

    def held(self, log: str) -> list[int]:
        """The batches whose write of ``log`` is held now (or was, by a driver since killed)."""
        self._check(log)
        if not self.folder.exists():
            return []
        prefix = f"held-{log}-"
        return sorted(int(p.name[len(prefix):]) for p in self.folder.glob(prefix + "*")
                      if p.name[len(prefix):].isdigit())

    def release(self, log: str, batch: int) -> None:
        """Let the held write of ``log``/``batch`` go on."""
        self._check(log)
        (self.folder / f"release-{log}-{int(batch)}").touch()

    def disarm(self, log: str) -> None:
        """Hold nothing more of ``log``, let any held write go, and forget what was held."""
        self._check(log)
        for path in [self.folder / f"arm-{log}", *self.folder.glob(f"held-{log}-*"),
                     *self.folder.glob(f"release-{log}-*")]:
            path.unlink(missing_ok=True)

    @staticmethod
    def _check(log: str) -> None:
        if log not in LOGS:
            raise ValueError(f"no checkpoint log {log!r}: use one of {', '.join(LOGS)}")
