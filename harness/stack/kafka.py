"""A real Apache Kafka broker (KRaft, combined broker+controller) on loopback.

Three listeners:

- ``EXTERNAL`` is what clients use. It is *advertised as the Toxiproxy
  address*, so metadata sends every client connection back through the proxy
  and network faults reach all Kafka traffic.
- ``INTERNAL`` is advertised as itself: the broker's own inter-broker traffic
  (transaction markers) and raw-broker benchmarks bypass the proxy.
- ``CONTROLLER`` carries the KRaft quorum.

The broker can be stopped cleanly, killed with SIGKILL, paused with SIGSTOP and
restarted on the same ports and log directory (the broker faults).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.diagnosis import with_diagnosis
from streamcert.harness.stack.install import KAFKA_VERSION, ensure_kafka, find_java
from streamcert.harness.stack.ports import LOOPBACK, ensure_port_free, free_port
from streamcert.harness.stack.process import ManagedProcess, ProcessBacked, run_logged, tail_file, token_env
from streamcert.harness.stack.readiness import kafka_readiness

__all__ = ["BROKER_TUNING", "KafkaPorts", "render_server_properties", "render_log4j2", "new_cluster_id", "LocalKafka"]

#: How a user gives the broker more heap (the JVM options are ours).
_HEAP_HINT = "--kafka-heap-mb, default 512; EnvironmentConfig(kafka_heap_mb=...)"


@dataclass(frozen=True)
class KafkaPorts:
    internal: int
    controller: int
    external: int

    @classmethod
    def allocate(cls) -> "KafkaPorts":
        return cls(free_port(), free_port(), free_port())


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (as `kafka-storage random-uuid`).

    Like Kafka's own ``Uuid.randomUuid``, never one that starts with ``-``: the storage tool would read it as an
    option (one id in 64 would fail ``format -t <id>``).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


#: What every broker of a run gets, one node or a cluster's: no topic appears by itself, a group starts at once,
#: and short timeouts keep fault recovery (and zombie fencing) inside test budgets. The log cleaner's dedupe buffer
#: (128 MiB by default, one contiguous array allocated as the broker starts) is cut to 16 MiB: a run's compacted
#: topics are the broker's own small ones, and on a 256 MiB heap a restarted node died allocating it
#: (``OutOfMemoryError`` in ``SkimpyOffsetMap``, "Error starting LogManager").
BROKER_TUNING: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
    "transaction.max.timeout.ms": "900000",
    "log.flush.interval.messages": "9223372036854775807",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}


def render_server_properties(
    ports: KafkaPorts,
    advertised_external: tuple[str, int],
    log_dir: Path,
    overrides: Mapping[str, str] | None = None,
    node_id: int = 1,
    bind_host: str = LOOPBACK,
) -> str:
    """The broker's ``server.properties``: single node, replication factor 1 everywhere.

    ``bind_host`` is where the listeners bind: loopback for a local broker, all
    interfaces inside a container (whose published ports are bound to loopback).
    """
    adv_host, adv_port = advertised_external
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@{LOOPBACK}:{ports.controller}",
        "listeners": (f"INTERNAL://{bind_host}:{ports.internal},CONTROLLER://{bind_host}:{ports.controller},"
                      f"EXTERNAL://{bind_host}:{ports.external}"),
        "advertised.listeners": f"INTERNAL://{LOOPBACK}:{ports.internal},EXTERNAL://{adv_host}:{adv_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        **BROKER_TUNING,
    }
    props.update(overrides or {})
    return "".join(f"{key}={value}\n" for key, value in props.items())


def render_log4j2(log_file: Path, level: str = "INFO") -> str:
    """Log4j 2 properties sending the broker's log to ``log_file`` (read back on failures)."""
    return (
        "status = warn\n"
        "appender.file.type = File\n"
        "appender.file.name = FILE\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        f"rootLogger.level = {level}\n"
        "rootLogger.appenderRef.file.ref = FILE\n"
        "logger.state.name = state.change.logger\n"
        "logger.state.level = WARN\n"
    )


@dataclass
class LocalKafka(ProcessBacked):
    """One KRaft broker process. Use as a context manager, or ``start()`` / ``stop()``.

    ``advertised_external`` is the address clients are told to use: the
    Toxiproxy proxy in front of ``ports.external``.
    """

    workdir: Path
    advertised_external: tuple[str, int] | None = None
    ports: KafkaPorts = field(default_factory=KafkaPorts.allocate)
    heap_mb: int = 512
    version: str = KAFKA_VERSION
    run_token: str = ""
    overrides: Mapping[str, str] = field(default_factory=dict)
    start_timeout: float = 60.0
    #: a cluster's node: its whole server.properties (else the single-node one is rendered), the cluster's id
    #: (every node is formatted with the same), and its other listeners' ports (checked free before start)
    properties: str | None = None
    cluster_id: str | None = None
    extra_ports: tuple[int, ...] = ()
    name: str = "Kafka broker"
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def direct_bootstrap(self) -> str:
        """The INTERNAL listener: bypasses Toxiproxy (raw-broker measurements, admin)."""
        return f"{LOOPBACK}:{self.ports.internal}"

    @property
    def upstream(self) -> str:
        """The EXTERNAL listener's real address, which the proxy forwards to."""
        return f"{LOOPBACK}:{self.ports.external}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def start(self) -> None:
        """Install if needed, format storage on first start, launch, wait until a topic can be created."""
        if self._process is not None and self._process.is_running():
            return
        self.launch()
        self.await_ready()

    def launch(self) -> None:
        """Format storage on first start and start the JVM, without waiting (a cluster's nodes start together:
        none answers before a quorum of controllers runs)."""
        if self._process is not None and self._process.is_running():
            return
        lib = ensure_kafka(self.version)
        java = find_java().path
        for port, what in ((self.ports.internal, "Kafka (internal listener)"),
                           (self.ports.controller, "Kafka (controller listener)"),
                           (self.ports.external, "Kafka (external listener)"),
                           *((port, "Kafka (replication listener)") for port in self.extra_ports)):
            ensure_port_free(port, what)
        self.workdir.mkdir(parents=True, exist_ok=True)
        props_file = self.workdir / "server.properties"
        props_file.write_text(self.properties or render_server_properties(
            self.ports, self.advertised_external or (LOOPBACK, self.ports.external), self.data_dir, self.overrides))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(render_log4j2(self.log_file))
        base = [java, f"-Xmx{self.heap_mb}m", f"-Xms{min(self.heap_mb, 128)}m", "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{lib}/*"]
        env = token_env(self.run_token)
        if not (self.data_dir / "meta.properties").exists():
            self._format(base, props_file, env)
        self._process = ManagedProcess(
            self.name, base + ["kafka.Kafka", str(props_file)], self.workdir / "stdout.log", env=env,
        )
        self._process.start()

    def await_ready(self) -> None:
        """Wait until this node answers and a topic can be created (after :meth:`launch`)."""
        assert self._process is not None
        self._process.wait_ready(kafka_readiness(
            self.direct_bootstrap,
            hint=f"Look at {self.log_file}; a slow machine may need a longer start timeout, "
            "a small one a smaller heap (--kafka-heap-mb).",
        ), self.start_timeout, heap_hint=_HEAP_HINT)

    def _format(self, base: list[str], props_file: Path, env: dict[str, str]) -> None:
        code, output = run_logged(
            base + ["kafka.tools.StorageTool", "format", "-t", self.cluster_id or new_cluster_id(), "-c",
                    str(props_file)],
            description=f"Formatting {self.name}'s storage", timeout=120, env=env,
        )
        if code != 0:
            error = StartupFailed(f"Formatting Kafka storage in {self.data_dir} failed (exit code {code}).",
                                  hint="Delete the folder and retry; check the Java version (17+).", details=output)
            raise with_diagnosis(error, folder=self.workdir, heap_hint=_HEAP_HINT)

    def tail(self, lines: int = 20) -> str:
        """The broker's own log (log4j), not the JVM's stdout."""
        return tail_file(self.log_file, lines)

