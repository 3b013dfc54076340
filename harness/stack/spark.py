"""Spark sessions for streamcert: the engine the connectors under test run on.

``local[2,3]`` by default (two cores, each task tried up to three times, so
injected task failures are retried); ``local-cluster[2,1,1024]`` gives real
executor JVMs that a fault can kill; any other master URL is passed through.

pyspark starts the driver JVM as a child of this Python process and keeps it
for the life of the process. :func:`stop_spark` stops the session *and* that
JVM, so a run leaves no process behind. The JVMs start with the options of
:mod:`~streamcert.harness.stack.jvm_start` (a class archive; the quick JIT when
``jit="quick"``).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Mapping

from streamcert.harness.stack.cache import cache_dir
from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.install import find_java
from streamcert.harness.stack.jvm_start import JIT_VAR, ensure_class_archive, start_up_options
from streamcert.harness.stack.process import OWNER_VAR, RUN_TOKEN_VAR, run_owner
from streamcert.harness.stack.python_forks import ForkServer, fork_server_default
from streamcert.harness.stack.checkpoint_hold import HOLD_CLASS, HOLD_DELEGATE_KEY
from streamcert.harness.stack.spark_checkpoints import (CHECKPOINT_MANAGER_KEY, checkpoint_file_manager,
                                                        checkpoint_manager_mode)

__all__ = ["DEFAULT_MASTER", "STANDALONE", "SparkConfig", "pyspark_version", "validate_master", "runs_in_driver",
           "refuse_unreachable_master", "spark_session", "stop_spark", "SparkResource"]

DEFAULT_MASTER = "local[2,3]"
#: The master that asks streamcert to start a standalone cluster of its own (a master and worker JVMs).
STANDALONE = "standalone"
_MASTER_PATTERNS = (
    r"local",
    r"local\[(\*|[1-9][0-9]*)\]",
    r"local\[(\*|[1-9][0-9]*),\s*[1-9][0-9]*\]",
    r"local-cluster\[[1-9][0-9]*,\s*[1-9][0-9]*,\s*(?P<memory>[1-9][0-9]*)\]",
    r"spark://[^:/,\s]+:[1-9][0-9]*(,[^:/,\s]+:[1-9][0-9]*)*",
    STANDALONE,
)
#: Spark refuses executors with less memory than 1.5 x its 300 MiB reserve.
_MIN_EXECUTOR_MB = 450
_MASTER_HINT = ("Use local[N,F] (N cores, F tries per task), local-cluster[W,C,MB] (W executor JVMs of C cores and MB "
                f"MiB each, MB >= {_MIN_EXECUTOR_MB}), standalone (a standalone cluster streamcert starts) or "
                "spark://host:port (a standalone master of yours).")


@dataclass
class SparkConfig:
    """How to build the session. ``packages`` go to ``spark.jars.packages`` (Maven coordinates)."""

    master: str = DEFAULT_MASTER
    app_name: str = "streamcert"
    packages: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "ERROR"
    shuffle_partitions: int = 4
    driver_memory: str = "1g"
    #: ``full`` (what users run: certifications and benchmarks) or ``quick`` (C1 only: starts about a third faster,
    #: batches slower; the project's own tests use it); default from ``STREAMCERT_JIT``
    jit: str = field(default_factory=lambda: os.environ.get(JIT_VAR, "full"))
    #: more JVM options for the driver and the executors
    java_options: str = ""
    #: fork the driver's Python planning and streaming processes from a preloaded server
    #: (:mod:`~streamcert.harness.stack.python_forks`); default from ``STREAMCERT_FORK_SERVER``
    fork_server: bool = field(default_factory=fork_server_default)
    #: ``filesystem`` (one rename per checkpoint log file, no forked processes) or ``spark`` (Spark's default)
    checkpoint_manager: str = field(default_factory=checkpoint_manager_mode)
    #: with master ``standalone``: the workers streamcert starts, each one executor of one core
    workers: int = 2
    worker_memory_mb: int = 1024


def pyspark_version() -> str:
    """The version of the pyspark this process runs (and its queries run on): ``4.3.0``."""
    import pyspark

    return pyspark.__version__


def runs_in_driver(master: str) -> bool:
    """Whether ``master`` (``local``, ``local[N]``, ``local[N,F]``) runs its tasks inside the driver's JVM."""
    return master == "local" or master.startswith("local[")


def validate_master(master: str) -> str:
    """Return ``master`` if Spark would accept it and streamcert can run on it, else raise a clear error."""
    if re.match(r"(yarn|k8s|mesos)\b", master):
        raise ConfigurationError(
            f"Spark master {master!r} is not one streamcert can run on: the stack it tests against (Kafka, "
            "Toxiproxy, PostgreSQL) listens on this machine's loopback only, which executors on YARN or Kubernetes "
            "nodes cannot reach (and Spark 4 has no Mesos support).", hint=_MASTER_HINT)
    for pattern in _MASTER_PATTERNS:
        match = re.fullmatch(pattern, master)
        if match is None:
            continue
        memory = match.groupdict().get("memory")
        if memory is not None and int(memory) < _MIN_EXECUTOR_MB:
            raise ConfigurationError(
                f"Spark master {master!r} gives each executor {memory} MiB; Spark refuses executors with less than "
                f"{_MIN_EXECUTOR_MB} MiB.", hint=f"Give at least {_MIN_EXECUTOR_MB}, e.g. local-cluster[2,1,1024].")
        return master
    raise ConfigurationError(f"{master!r} is not a Spark master URL.", hint=_MASTER_HINT)


def refuse_unreachable_master(master: str) -> None:
    """A standalone master nobody answers at fails at once (Spark itself retries for a minute)."""
    if not master.startswith("spark://"):
        return
    from streamcert.harness.stack.settings import host_port, refused_address

    addresses = [host_port("--spark-master", entry, example="spark://127.0.0.1:7077")
                 for entry in master[len("spark://"):].split(",")]
    reasons = [refused_address(host, port) for host, port in addresses]
    if all(reason is not None for reason in reasons):
        raise ConfigurationError(f"No Spark master answers at {master} ({reasons[0]}).",
                                 hint="Start the standalone master (spark-class org.apache.spark.deploy.master."
                                      "Master), or choose another --spark-master, e.g. local[2,3].")


def _start_failure(master: str, exc: BaseException) -> StartupFailed:
    """Spark's refusal as one paragraph, read while its JVM still answers (the CLI prints after teardown)."""
    java = getattr(exc, "java_exception", None)
    try:
        said = str(java.toString()) if java is not None else str(exc)
    except Exception:  # the JVM is already gone: say what Python saw
        said = f"{type(exc).__name__}: {getattr(exc, 'errmsg', '') or exc.args[:1]}"
    first = next((line.strip() for line in said.splitlines() if line.strip()), type(exc).__name__)
    return StartupFailed(f"Spark did not start with master {master!r}: {first[:500]}",
                         hint="Spark's own lines above say more; check --spark-master and that Java and pyspark "
                              "match.")


def _quiet_log4j2() -> Path:
    path = cache_dir() / "spark-log4j2.properties"
    path.write_text(
        "rootLogger.level = error\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex\n"
        # These two warn on every local start about things that do not matter on loopback.
        "logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader\n"
        "logger.nativecode.level = error\n"
        "logger.utils.name = org.apache.spark.util.Utils\n"
        "logger.utils.level = error\n"
        # Lost and failed task attempts: the evidence of task faults (a zombie's replaced attempt, say).
        "logger.tasks.name = org.apache.spark.scheduler.TaskSetManager\n"
        "logger.tasks.level = warn\n"
    )
    return path


def spark_session(config: SparkConfig | None = None, run_token: str = ""):
    """Create (or return the running) SparkSession for ``config``.

    Sets ``PYSPARK_PYTHON`` to this interpreter so Python workers find the same
    packages (pyarrow, pandas, the connectors under test).
    """
    from pyspark.sql import SparkSession

    config = config or SparkConfig()
    validate_master(config.master)
    refuse_unreachable_master(config.master)
    find_java()
    ensure_class_archive()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if _FORK_SERVER is None:  # a previous session's server is gone
        for name in ForkServer.VARIABLES:
            os.environ.pop(name, None)
    log4j = _quiet_log4j2()
    java_opts = " ".join(filter(None, [f"-Dlog4j2.configurationFile=file:{log4j}", start_up_options(config.jit),
                                       config.java_options]))
    builder = (
        SparkSession.builder.master(config.master)
        .appName(config.app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", config.driver_memory)
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    manager = checkpoint_file_manager() if config.checkpoint_manager == "filesystem" else None
    if manager is not None:
        builder = builder.config(CHECKPOINT_MANAGER_KEY, manager)
        if config.conf.get(CHECKPOINT_MANAGER_KEY) == HOLD_CLASS:  # holds write through the manager chosen here
            builder = builder.config(HOLD_DELEGATE_KEY, manager)
    if config.packages:
        builder = builder.config("spark.jars.packages", ",".join(config.packages))
        builder = builder.config("spark.jars.ivy", str(cache_dir() / "ivy"))
    for key, value in config.conf.items():
        builder = builder.config(key, value)
    # The token is inherited by the driver JVM, executors and Python workers (so teardown finds them
    # all) but must not leak into processes this interpreter starts later.
    owner = run_owner(run_token).spec() if run_token else None
    with _env_var(RUN_TOKEN_VAR, run_token or None), _env_var(OWNER_VAR, owner):
        try:
            if config.fork_server:
                _start_fork_server()
            spark = builder.getOrCreate()
        except Exception as exc:
            failure = _start_failure(config.master, exc)
            stop_spark()
            raise failure from None
    spark.sparkContext.setLogLevel(config.log_level)
    return spark


#: The fork server of this process's session, if it has one (one Spark session per process).
_FORK_SERVER: ForkServer | None = None


def _start_fork_server() -> None:
    """Start the session's fork server (carrying the run token, as the JVM does) and point Spark's Python at it:
    the JVM inherits ``PYSPARK_PYTHON`` and the server's variables."""
    global _FORK_SERVER
    if _FORK_SERVER is None:  # a second call while the session runs (getOrCreate) keeps the first server
        _FORK_SERVER = ForkServer().start()
    os.environ["PYSPARK_PYTHON"] = _FORK_SERVER.python()
    os.environ.update(_FORK_SERVER.environment())


def _stop_fork_server() -> None:
    global _FORK_SERVER
    server, _FORK_SERVER = _FORK_SERVER, None
    if server is not None:
        server.stop()
    for name in ForkServer.VARIABLES:
        os.environ.pop(name, None)
    os.environ["PYSPARK_PYTHON"] = sys.executable


@contextlib.contextmanager
def _env_var(name: str, value: str | None) -> Iterator[None]:
    previous = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def stop_spark(spark=None) -> None:
    """Stop the session, the driver JVM pyspark launched and the session's fork server; idempotent."""
    try:
        _stop_spark(spark)
    finally:
        _stop_fork_server()


def _stop_spark(spark=None) -> None:
    from pyspark import SparkContext

    if spark is not None:
        for query in spark.streams.active:
            try:
                query.stop()
            except Exception:  # a query failing while it stops must not keep the JVM alive
                pass
        spark.stop()
    elif SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # the JVM may already be gone; we kill it below either way
        pass
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except Exception:
            proc.kill()
            proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
    from pyspark.sql import SparkSession

    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


class SparkResource:
    """A SparkSession as a context-managed resource (``start`` / ``stop``)."""

    def __init__(self, config: SparkConfig | None = None, run_token: str = "", workdir: Path | None = None) -> None:
        self.config = config or SparkConfig()
        self.run_token = run_token
        #: where a standalone cluster keeps its logs and work folders (master ``standalone`` only)
        self.workdir = workdir
        self.session = None
        self.cluster = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def preflight(self) -> None:
        """Refuse a master Spark cannot use or cannot reach, in a second, before anything else starts."""
        validate_master(self.config.master)
        start_up_options(self.config.jit)
        refuse_unreachable_master(self.config.master)
        if self.config.master == STANDALONE:
            from streamcert.harness.stack.spark_standalone import LocalSparkCluster

            LocalSparkCluster.check(self.config.workers, 1, self.config.worker_memory_mb)

    def start(self):
        if self.session is None:
            from pyspark import SparkContext

            if SparkContext._active_spark_context is not None:
                # Spark allows one driver per process; sharing it would let one owner's stop() kill the other's.
                raise ConfigurationError(
                    "A Spark session is already running in this process, started by someone else.",
                    hint="Use one Environment with Spark per process (stop the other first), "
                    "or run this one in a child process.",
                )
            config = self.config
            if config.master == STANDALONE:
                config = replace(config, master=self._start_cluster())
            self.session = spark_session(config, self.run_token)
        return self.session

    def _start_cluster(self) -> str:
        import tempfile

        from streamcert.harness.stack.spark_standalone import LocalSparkCluster

        folder = self.workdir or Path(tempfile.mkdtemp(prefix="streamcert-spark-"))
        self.cluster = LocalSparkCluster(folder, workers=self.config.workers, memory_mb=self.config.worker_memory_mb,
                                         run_token=self.run_token)
        self.cluster.start()
        return self.cluster.url

    def stop(self) -> None:
        session, self.session = self.session, None
        cluster, self.cluster = self.cluster, None
        try:
            if session is not None:
                stop_spark(session)
        finally:
            if cluster is not None:
                cluster.stop()
