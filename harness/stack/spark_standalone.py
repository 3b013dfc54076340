"""A real Spark standalone cluster on loopback: one master and N workers, each its own JVM.

Started from the pyspark installation's own launcher (``bin/spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``), so the cluster runs exactly the Spark the driver runs. The driver connects with
``spark://127.0.0.1:<port>``; each worker launches its executor JVM for the application, and the executors start
Python workers from ``PYSPARK_PYTHON`` (the driver sets it to this interpreter). Connectors under test must be
importable there: an installed package (``pip install``), as for any Spark cluster, or shipped with the query
(``spark.submit.pyFiles`` / ``SparkContext.addPyFile``).

Worker faults: :meth:`LocalSparkCluster.kill_worker` SIGKILLs a worker's process group (its executor and Python
workers die with it; Spark reschedules the lost tasks on the other workers), :meth:`LocalSparkCluster.restart_worker`
starts it again on the same ports; the master's JSON status (``/json``) says which workers are alive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.install import find_java
from streamcert.harness.stack.ports import LOOPBACK, ensure_port_free, free_port
from streamcert.harness.stack.process import ManagedProcess, ProcessBacked, token_env
from streamcert.harness.stack.readiness import Readiness

__all__ = ["spark_home", "StandaloneMaster", "StandaloneWorker", "LocalSparkCluster"]

#: Spark refuses executors below this (1.5 x its 300 MiB reserve).
MIN_WORKER_MEMORY_MB = 450


def spark_home() -> Path:
    """The pyspark installation, which holds ``bin/spark-class`` and Spark's jars."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise StartupFailed(f"The pyspark installation at {home} has no bin/spark-class; a standalone cluster "
                            "cannot be started from it.", hint="Reinstall pyspark (pip install 'pyspark>=4.3,<4.4').")
    return home


def _launcher_env(run_token: str, folder: Path) -> dict[str, str]:
    java = Path(find_java().path)
    env = token_env(run_token)
    env.update(SPARK_HOME=str(spark_home()), JAVA_HOME=str(java.parent.parent), SPARK_LOCAL_IP=LOOPBACK,
               SPARK_LOG_DIR=str(folder), SPARK_NO_DAEMONIZE="1")
    return env


@dataclass
class StandaloneMaster(ProcessBacked):
    """The standalone master. ``url`` is what drivers and workers connect to."""

    workdir: Path
    run_token: str = ""
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    start_timeout: float = 60.0
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        if self._process is not None and self._process.is_running():
            return
        ensure_port_free(self.port, "the Spark master")
        ensure_port_free(self.ui_port, "the Spark master's status page")
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                "--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port)]
        self._process = ManagedProcess("Spark master", argv, self.workdir / "master.log",
                                       env=_launcher_env(self.run_token, self.workdir))
        self._process.start()
        self._process.wait_ready(Readiness(f"the Spark master on {self.url}", self.status,
                                           hint=f"Look at {self.workdir / 'master.log'}."), self.start_timeout)

    def status(self) -> dict[str, Any]:
        """The master's JSON status: ``workers`` (each with ``state``), ``activeapps``, ``status``."""
        response = requests.get(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=2)
        response.raise_for_status()
        return response.json()

    def alive_workers(self) -> list[dict[str, Any]]:
        return [worker for worker in self.status().get("workers", []) if worker.get("state") == "ALIVE"]


@dataclass
class StandaloneWorker(ProcessBacked):
    """One worker; the executors it launches are its children (they die with its process group)."""

    workdir: Path
    master_url: str
    index: int = 0
    cores: int = 1
    memory_mb: int = 1024
    run_token: str = ""
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def address(self) -> str:
        """How the master names this worker (``host:port``)."""
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        """Launch the worker; :meth:`LocalSparkCluster.start` waits until the master counts it alive."""
        if self._process is not None and self._process.is_running():
            return
        ensure_port_free(self.port, f"Spark worker {self.index}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                "--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port),
                "--cores", str(self.cores), "--memory", f"{self.memory_mb}m", "--work-dir", str(self.workdir / "work"),
                self.master_url]
        self._process = ManagedProcess(f"Spark worker {self.index}", argv, self.workdir / "worker.log",
                                       env=_launcher_env(self.run_token, self.workdir))
        self._process.start()


class LocalSparkCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory_mb`` MiB each; a context manager.

    ``stop()`` is idempotent and safe before ``start()``.
    """

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory_mb: int = 1024,
                 run_token: str = "", start_timeout: float = 60.0) -> None:
        self.check(workers, cores, memory_mb)
        self.workdir = Path(workdir)
        self.start_timeout = start_timeout
        self.master = StandaloneMaster(self.workdir / "master", run_token=run_token, start_timeout=start_timeout)
        self.workers = [StandaloneWorker(self.workdir / f"worker-{index}", self.master.url, index=index, cores=cores,
                                         memory_mb=memory_mb, run_token=run_token) for index in range(workers)]

    @staticmethod
    def check(workers: int, cores: int, memory_mb: int) -> None:
        """Refuse a cluster Spark cannot run, before anything starts."""
        if workers < 1 or cores < 1:
            raise ConfigurationError(f"A standalone cluster needs at least one worker of one core (asked: {workers} "
                                     f"worker(s) of {cores} core(s)).", hint="Use --spark-workers 1 or more.")
        if memory_mb < MIN_WORKER_MEMORY_MB:
            raise ConfigurationError(f"Workers of {memory_mb} MiB cannot run an executor: Spark refuses executors "
                                     f"below {MIN_WORKER_MEMORY_MB} MiB.",
                                     hint=f"Give each worker {MIN_WORKER_MEMORY_MB} MiB or more (default 1024).")

    @property
    def url(self) -> str:
        return self.master.url

    def __enter__(self) -> "LocalSparkCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self.master.start()
            for worker in self.workers:
                worker.start()
            self.wait_for_workers(len(self.workers))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Workers first (their executors with them), then the master; idempotent."""
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its executor: the master marks it dead, Spark reschedules its tasks."""
        self.workers[index].kill()

    def restart_worker(self, index: int) -> None:
        """Start worker ``index`` again (after a kill or not) and wait until the master counts it alive."""
        worker = self.workers[index]
        worker.restart(clean=True)
        self.wait_for_workers(sum(1 for other in self.workers if other.pid is not None))

    def wait_for_workers(self, count: int, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait until the master counts ``count`` live workers among ours; return them."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        alive: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            dead = [worker for worker in self.workers if worker._process is not None
                    and worker._process.exited() is not None]
            if dead:
                raise StartupFailed(f"Spark worker {dead[0].index} {dead[0]._process.exited()}.",
                                    hint=f"Look at {dead[0].workdir / 'worker.log'}.",
                                    details=dead[0].tail())
            try:
                alive = self.alive_workers()
            except requests.RequestException:
                alive = []
            if len(alive) >= count:
                return alive
            time.sleep(0.3)
        raise StartupFailed(f"The Spark master counted {len(alive)} of {count} worker(s) alive after "
                            f"{timeout or self.start_timeout:.0f} s.",
                            hint=f"Look at the workers' logs under {self.workdir}.")

    def alive_workers(self) -> list[dict[str, Any]]:
        """The master's view of our workers that are alive now."""
        ours = {worker.address for worker in self.workers}
        return [worker for worker in self.master.alive_workers()
                if f"{worker.get('host')}:{worker.get('port')}" in ours]

    def server_pids(self) -> dict[str, int | None]:
        return {"master": self.master.pid, **{f"worker-{w.index}": w.pid for w in self.workers}}
