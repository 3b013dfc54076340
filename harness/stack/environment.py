"""The environment: broker, Toxiproxy, PostgreSQL and Spark, started and stopped as one.

Every client connection to Kafka and PostgreSQL goes through a Toxiproxy
*link* (``kafka_link``, ``postgres_link``) where network faults are injected;
:attr:`Environment.endpoints` gives the proxied addresses (what connectors
use) and the direct ones (for admin work and raw-broker baselines).

>>> with Environment(EnvironmentConfig(spark=SparkConfig())) as env:   # doctest: +SKIP
...     env.endpoints.bootstrap_servers, env.spark

``stop`` is idempotent, runs on errors during ``start`` too, and finishes by
killing any process that still carries the run token, so a run never leaves
a server behind. A run whose owner is killed before it can stop stays in the
run registry (:mod:`streamcert.harness.stack.runs`); the next start on the
machine reaps it (``reaped`` says what it found).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streamcert.harness.errors import ConfigurationError, StreamcertError
from streamcert.harness.progress import note
from streamcert.harness.stack.install import ensure_kafka, ensure_postgres, ensure_toxiproxy
from streamcert.harness.stack.kafka import KafkaPorts, LocalKafka
from streamcert.harness.stack.kafka_cluster import ClusterSettings, LocalKafkaCluster
from streamcert.harness.stack.ports import LOOPBACK, free_port
from streamcert.harness.stack.postgres import LocalPostgres
from streamcert.harness.stack.process import processes_with_token, reap
from streamcert.harness.stack.providers import external_endpoints, refuse_unreachable, select_provider
from streamcert.harness.stack.settings import toxiproxy_address
from streamcert.harness.stack.readiness import kafka_readiness, postgres_readiness
from streamcert.harness.stack.resources import KafkaServer, PostgresServer, ToxiproxyServer
from streamcert.harness.stack.runs import ReapReport, RunRecord, reap_orphans, register_run, unregister_run
from streamcert.harness.stack.spark import SparkConfig, SparkResource
from streamcert.harness.stack.external import ExternalSystems
from streamcert.harness.stack.toxiproxy import Link, LinkGroup, LocalToxiproxy, ToxiproxyApi

__all__ = ["EnvironmentConfig", "Endpoints", "Environment"]


@dataclass
class EnvironmentConfig:
    """What to start. ``spark=None`` starts no Spark session."""

    provider: str = "auto"
    kafka: bool = True
    postgres: bool = True
    spark: SparkConfig | None = None
    kafka_heap_mb: int = 512
    #: Kafka brokers: 1, or a cluster of KRaft nodes (local provider) with ``cluster``'s replication settings
    brokers: int = 1
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    workdir: Path | None = None
    keep_workdir: bool = False
    start_timeout: float = 60.0


@dataclass(frozen=True)
class Endpoints:
    bootstrap_servers: str | None
    kafka_direct_bootstrap: str | None
    toxiproxy_api: str | None
    postgres_dsn: str | None
    postgres_direct_dsn: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Environment:
    """Starts what :class:`EnvironmentConfig` asks for, by provider; a context manager."""

    def __init__(self, config: EnvironmentConfig | None = None) -> None:
        self.config = config or EnvironmentConfig()
        self.provider: str | None = None
        self.run_token = uuid.uuid4().hex
        self.workdir: Path | None = None
        self.toxiproxy: ToxiproxyServer | None = None
        self.kafka: KafkaServer | None = None
        self.postgres: PostgresServer | None = None
        self.kafka_link: Link | None = None
        self.postgres_link: Link | None = None
        self._spark = SparkResource(self.config.spark, self.run_token) if self.config.spark else None
        self._external = None
        self._network: Any = None
        self._own_workdir = False
        self._extra_folders: list[Path] = []
        self._keep_files = False
        self.startup_seconds: float | None = None
        self.reaped: ReapReport | None = None
        self._started = False
        self._systems: ExternalSystems | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> "Environment":
        self.start()
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self._keep_files_cited_by(exc)
        self.stop()

    def start(self) -> "Environment":
        if self._started:
            return self
        began = time.monotonic()
        self.provider = select_provider(self.config.provider)
        if self.config.brokers != 1:
            self.config.cluster.check(self.config.brokers)
            if self.provider != "local":
                raise ConfigurationError(f"A cluster of {self.config.brokers} Kafka brokers is started by the local "
                                         f"provider only, not {self.provider}.",
                                         hint="Use --provider local, or give your own cluster's bootstrap to "
                                              "--provider external (STREAMCERT_KAFKA_BOOTSTRAP).")
        self._started = True
        try:
            if self._spark is not None:
                self._spark.preflight()  # a master that cannot answer fails before any server starts
            self._reap_orphans()
            self._make_workdir()
            if self._spark is not None and self.workdir is not None:
                self._spark.workdir = self.workdir / "spark-cluster"
            self._register()
            if self.provider == "local":
                self._start_local()
            elif self.provider == "testcontainers":
                self._start_containers()
            else:
                self._start_external()
            self._check_through_proxy()
            if self._spark is not None:
                self._spark.start()
        except BaseException as exc:
            self._keep_files_cited_by(exc)
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop everything in reverse order; idempotent, safe before ``start``."""
        errors = []
        for action in (self._stop_systems, self._stop_spark, self._stop_postgres, self._stop_kafka,
                       self._stop_toxiproxy, self._stop_network):
            try:
                action()
            except Exception as exc:  # keep stopping the rest; report after
                errors.append(exc)
        reap(self.run_token)
        if self.workdir is not None and self._own_workdir and not (self.config.keep_workdir or self._keep_files):
            for folder in [self.workdir, *self._extra_folders]:
                shutil.rmtree(folder, ignore_errors=True)
        unregister_run(self.run_token)
        self._started = False
        if errors:
            raise errors[0]

    # -- facts ---------------------------------------------------------------

    @property
    def spark(self):
        """The SparkSession (started with the environment when ``config.spark`` is set)."""
        if self._spark is None:
            raise ConfigurationError("This environment was configured without Spark.",
                                     hint="Pass EnvironmentConfig(spark=SparkConfig(...)).")
        return self._spark.start()

    @property
    def endpoints(self) -> Endpoints:
        kafka_direct = self.kafka.direct_bootstrap if self.kafka is not None else None
        pg_direct = self.postgres.dsn if self.postgres is not None else None
        if self._external is not None:
            kafka_direct = kafka_direct or self._external.bootstrap_servers
            pg_direct = pg_direct or self._external.postgres_dsn
        return Endpoints(
            bootstrap_servers=self.kafka_link.listen if self.kafka_link else kafka_direct,
            kafka_direct_bootstrap=kafka_direct,
            toxiproxy_api=self.toxiproxy_api.url if self.toxiproxy_api else None,
            postgres_dsn=_dsn_via(pg_direct, self.postgres_link) if pg_direct else None,
            postgres_direct_dsn=pg_direct,
        )

    @property
    def systems(self) -> ExternalSystems:
        """The connectors' own external systems (:mod:`streamcert.spi.external`), started on first use and stopped
        with the stack; their links are made on this stack's Toxiproxy when it runs on this machine (a container's
        cannot reach a process on the host's loopback: there, connectors get the systems' own addresses)."""
        if self._systems is None:
            if self.workdir is None:
                raise ConfigurationError("The stack has not started: it has no external systems yet.",
                                         hint="Start the Environment first (with Environment(...) as env: ...).")
            api = self.toxiproxy_api if self.provider != "testcontainers" else None
            self._systems = ExternalSystems(self.workdir, api, self.run_token)
        return self._systems

    def link(self, name: str) -> Link | LinkGroup | None:
        """The Toxiproxy link called ``name``: ``kafka``, ``postgres``, or an endpoint of a connector's external
        system started for this stack; None when there is none."""
        if name == "kafka":
            return self.kafka_link
        if name == "postgres":
            return self.postgres_link
        return self._systems.link(name) if self._systems is not None else None

    def _stop_systems(self) -> None:
        systems, self._systems = self._systems, None
        if systems is not None:
            systems.stop()

    @property
    def toxiproxy_api(self) -> ToxiproxyApi | None:
        if self.toxiproxy is not None:
            return self.toxiproxy.api
        if self._external is not None and self._external.toxiproxy_api:
            return ToxiproxyApi(*toxiproxy_address("STREAMCERT_TOXIPROXY_API", self._external.toxiproxy_api))
        return None

    @property
    def spark_cluster(self):
        """The standalone cluster streamcert started (master ``standalone``), else None."""
        return self._spark.cluster if self._spark is not None else None

    def server_pids(self) -> dict[str, int | None]:
        return {name: part.pid if part is not None else None for name, part in
                (("kafka", self.kafka), ("toxiproxy", self.toxiproxy), ("postgres", self.postgres))}

    def leftover_processes(self) -> int:
        """Processes of this run still alive (0 after ``stop``)."""
        return len(processes_with_token(self.run_token))

    # -- providers -------------------------------------------------------------

    def _keep_files_cited_by(self, exc: BaseException | None) -> None:
        """An error that sends the user to a log of this run must not have it deleted by the teardown that follows:
        keep the run's folders, and say so in the error."""
        if not isinstance(exc, StreamcertError) or not self._own_workdir or self.workdir is None:
            return
        folders = [str(folder) for folder in (self.workdir, *self._extra_folders)]
        if self._keep_files or not any(folder in str(exc) for folder in folders):
            return
        self._keep_files = True
        exc.hint = (f"{exc.hint.rstrip()} " if exc.hint else "") + (
            f"This run's files, logs included, are kept for you in {' and '.join(folders)}; remove them when done.")

    def _reap_orphans(self) -> None:
        """Servers of runs whose owner was killed hold ports and memory this run needs: reap them first."""
        self.reaped = reap_orphans()
        if self.reaped.runs:
            note(self.reaped.summary())

    def _make_workdir(self) -> None:
        if self.config.workdir is not None:
            self.workdir = Path(self.config.workdir)
            self.workdir.mkdir(parents=True, exist_ok=True)
            return
        self.workdir = Path(tempfile.mkdtemp(prefix="streamcert-"))  # owner only (0700)
        self._own_workdir = True

    def _postgres_folder(self) -> Path:
        """PostgreSQL's folder. When we run as root the server runs as `postgres` (it refuses root) and must reach
        its folder: a folder of its own beside the work folder, so the work folder stays closed to other users."""
        assert self.workdir is not None
        if not self._own_workdir:
            return self.workdir / "postgres"
        folder = Path(tempfile.mkdtemp(prefix="streamcert-pg-"))
        self._extra_folders.append(folder)
        self._register()
        return folder

    def _register(self) -> None:
        register_run(RunRecord.for_this_process(self.run_token, self.workdir, self._own_workdir,
                                                tuple(self._extra_folders)))

    def _start_local(self) -> None:
        assert self.workdir is not None
        self._install_local()
        toxiproxy = LocalToxiproxy(self.workdir / "toxiproxy", run_token=self.run_token)
        self.toxiproxy = toxiproxy
        toxiproxy.start()
        api = toxiproxy.api
        if self.config.kafka and self.config.brokers > 1:
            cluster = LocalKafkaCluster(self.workdir / "kafka", api, nodes=self.config.brokers,
                                        settings=self.config.cluster, heap_mb=self.config.kafka_heap_mb,
                                        run_token=self.run_token, start_timeout=max(90.0, self.config.start_timeout))
            self.kafka = cluster
            cluster.start()
            self.kafka_link = LinkGroup(cluster.client_links)
        elif self.config.kafka:
            ports = KafkaPorts.allocate()
            self.kafka_link = api.create_link("kafka", f"{LOOPBACK}:{ports.external}", free_port())
            self.kafka = LocalKafka(self.workdir / "kafka", (LOOPBACK, self.kafka_link.listen_port), ports,
                                    heap_mb=self.config.kafka_heap_mb, run_token=self.run_token,
                                    start_timeout=self.config.start_timeout)
            self.kafka.start()
        if self.config.postgres:
            postgres = LocalPostgres(self._postgres_folder(), run_token=self.run_token,
                                     start_timeout=self.config.start_timeout)
            self.postgres = postgres
            postgres.start()
            self.postgres_link = api.create_link("postgres", f"{LOOPBACK}:{postgres.port}", free_port())

    def _install_local(self) -> None:
        """Every server's binaries found (or installed) before any starts: a bad STREAMCERT_PG_BIN is refused
        in a second, not after Kafka took its ten to start."""
        ensure_toxiproxy()
        if self.config.kafka:
            ensure_kafka()
        if self.config.postgres:
            ensure_postgres()

    def _start_containers(self) -> None:
        from streamcert.harness.stack.containers import start_container_stack

        stack = start_container_stack(self.config, self.run_token)
        self._network, self.toxiproxy, self.kafka, self.postgres = (
            stack.network, stack.toxiproxy, stack.kafka, stack.postgres)
        self.kafka_link, self.postgres_link = stack.kafka_link, stack.postgres_link

    def _start_external(self) -> None:
        self._external = external_endpoints()
        refuse_unreachable(self._external)
        api = self.toxiproxy_api
        if api is None:
            return
        # Clients can only be routed through a user's Toxiproxy for PostgreSQL; Kafka's advertised
        # listeners are the user's to set, so the Kafka link is created only when asked for.
        if self.config.postgres and self._external.postgres_dsn:
            host, port = _dsn_host_port(self._external.postgres_dsn)
            # A run-specific name: the user's Toxiproxy may serve other runs at the same time.
            self.postgres_link = api.create_link(f"postgres-{self.run_token[:8]}", f"{host}:{port}", free_port())

    def _check_through_proxy(self) -> None:
        """Clients' own path answers: the same readiness the servers passed, through the links."""
        bootstrap = self.endpoints.bootstrap_servers
        if self.config.kafka and bootstrap:
            kafka = kafka_readiness(bootstrap, server=f"Kafka through {bootstrap}",
                                    hint="Check that the broker's advertised EXTERNAL listener is the proxy address.")
            kafka.wait(self.config.start_timeout, evidence=self.kafka.tail if self.kafka is not None else None)
        dsn = self.endpoints.postgres_dsn
        if self.config.postgres and dsn:
            postgres = postgres_readiness(
                dsn, server="PostgreSQL through the proxy",
                hint="Check the PostgreSQL DSN and that the server accepts loopback connections.")
            postgres.wait(self.config.start_timeout,
                          evidence=self.postgres.tail if self.postgres is not None else None)

    # -- teardown steps ---------------------------------------------------------

    def _stop_spark(self) -> None:
        if self._spark is not None:
            self._spark.stop()

    def _stop_postgres(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()

    def _stop_kafka(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()

    def _stop_toxiproxy(self) -> None:
        if self.toxiproxy is not None:
            self.toxiproxy.stop()
        elif self._external is not None and self.postgres_link is not None:
            try:
                self.postgres_link.api.destroy(self.postgres_link.name)
            except Exception:  # the user's Toxiproxy may be gone; nothing of ours is left there then
                pass

    def _stop_network(self) -> None:
        if self._network is not None:
            network, self._network = self._network, None
            network.remove()


def _dsn_host_port(dsn: str) -> tuple[str, int]:
    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    return str(params.get("host") or LOOPBACK), int(params.get("port") or 5432)


def _dsn_via(dsn: str, link: Link | None) -> str:
    """``dsn`` rewritten to connect through ``link`` (unchanged when there is no link)."""
    if link is None:
        return dsn
    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.update(host=link.listen_host, port=str(link.listen_port))
    return psycopg.conninfo.make_conninfo(**params)


