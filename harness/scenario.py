"""The scenario runner: workload -> stack -> query -> output -> checkers -> ``results.json``, for any connector.

A :class:`Scenario` is data: the connectors (a source, an optional aggregator, a sink, each a declaration found
by entry point name or ``module:attr``), the workload, the fault schedule and the settings. :func:`run_scenario`
creates the input topic and the sink's output (a Kafka topic, a PostgreSQL table name, or a folder), starts the
observer of that output kind, starts the composed query (:mod:`streamcert.harness.run.pipeline`) in a
:class:`~streamcert.harness.run.driver.DriverProcess`, loads the workload, carries out the schedule (each fault
started and stopped at its time, recorded in the history), waits until every acknowledged record is visible
(or the pipeline settled: :mod:`~streamcert.harness.run.settle`; or nothing new arrives for ``quiet_timeout_s``),
asks the query to stop and records how it stopped (``driver-stop``), then runs the checkers and the metrics.
``results.json`` is written even when the run is interrupted or fails, marked incomplete.

Schedule semantics (:mod:`~streamcert.harness.faults.timeline`): a fault starts ``at_s`` seconds after the fault
timeline began (at once, or when the output first shows ``faults_after_output`` records); an entry with ``after``
set starts ``at_s`` seconds after that earlier entry stopped, so faults can be chained (kill at one protocol step,
then at the next).

A scenario's ``procedure`` says when a run is something else than that query, through the same runner (the same
``results.json``, every fault through the registry and the timeline): the Kafka cluster's acknowledged writes
(:mod:`~streamcert.harness.acked_writes`) or GEN-2's option probe (:mod:`~streamcert.harness.options_probe`).
"""

from __future__ import annotations

import re
import time
import traceback
import uuid
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
from confluent_kafka import KafkaException
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streamcert.harness.acked_writes import AckedWrites, run_acked_writes
from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.faults.base import Fault, FaultContext
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.timeline import FaultTimeline
from streamcert.harness.faults.registry import kind as fault_kind
from streamcert.harness.faults.schedule import PROFILES, FaultSpec, parse
from streamcert.harness.options_probe import OptionsProbe, run_options_probe
from streamcert.harness.results import ConnectorSummary, RunResult
from streamcert.harness.schema_files import SCHEMAS_DIR, render, schema_command
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.run.feed import FeedGate
from streamcert.harness.run.history import History
from streamcert.harness.run.input_writer import load_workload
from streamcert.harness.run.first_finding import FirstFindingWatch
from streamcert.harness.run.observers import Observer
from streamcert.harness.run.observers.reader import reader_observer
from streamcert.harness.run.pipeline import BUILDER, query_params
from streamcert.harness.run.settle import Settling, wait_until_seen
from streamcert.harness.run.topic_growth import TopicGrowth
from streamcert.harness.run.workload import WorkloadSpec
from streamcert.harness.stack.cpu_use import CpuWindow
from streamcert.harness.stack.install import ensure_jars
from streamcert.harness.stack.kafka_clients import TopicSettings, broker_ids
from streamcert.harness.stack.spark import DEFAULT_MASTER, STANDALONE, pyspark_version, validate_master
from streamcert.harness.verify.checkers import (UNKNOWN, AggregatorBatchChecker, combined_valid,
                                                exactly_once_checkers, run_checks)
from streamcert.harness.verify.event_time import EventTimeDriftChecker
from streamcert.harness.run.arrival import arrival_times
from streamcert.harness.verify.downtime import driver_downtime
from streamcert.harness.verify.evidence import fault_reached, query_failures
from streamcert.harness.verify.metrics import summarize
from streamcert.harness.systems import StackSystem, addresses, input_system_of, output_system_of
from streamcert.harness.systems.resolve import declared_input_system, declared_output_system, stack_addresses
from streamcert.spi.connector import DRIFT_OPTION, Connector, QueryContext
from streamcert.spi.external import ExternalSystem, InputRecord, InputWriter

__all__ = ["Scenario", "RunResult", "run_scenario", "prepare_query", "driver_session", "SCHEMA_FILE", "json_schema",
           "UNRECORDED_ID_BASE", "WARM_UP_ID_BASE"]

SCHEMA_FILE = SCHEMAS_DIR / "scenario.schema.json"

#: How long the fault timeline waits for ``faults_after_output`` records before it starts anyway.
_OUTPUT_GATE_S = 300.0


class Scenario(BaseModel):
    """What to run, checked when it is made: a ConfigurationError naming the field and the value otherwise (the
    master and the workload by their own checks, with their hints).

    ``options`` reach the connectors as :attr:`QueryContext.options`; ``parallelism`` is the reader/writer
    parallelism of the first attempt (a ``rescale`` fault changes it). ``results.json`` records the scenario
    (:meth:`as_dict`), and :meth:`from_dict` reads it back to run it again. Its JSON Schema is committed as
    ``harness/schemas/scenario.schema.json`` (``python -m streamcert.harness.scenario --write-schema``).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)

    name: str = Field(min_length=1)
    source: str = Field("streamcert-kafka", min_length=1, description="entry point name or module:attr")
    sink: str = Field("streamcert-kafka-2pc", min_length=1, description="entry point name or module:attr")
    aggregator: str | None = Field(None, min_length=1, description="entry point name or module:attr, or none")
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    schedule: list[FaultSpec] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict, description="settings the connectors read")
    parallelism: int = Field(2, ge=1)
    master: str = Field("local[2,3]", description="the query's Spark master; standalone: a standalone cluster of "
                                                 "spark_workers workers started for the run")
    spark_workers: int = Field(2, ge=1, description="workers of the standalone cluster (master standalone)")
    spark_conf: dict[str, str] = Field(default_factory=dict)
    trigger: str = Field("200 milliseconds", min_length=1, description="an interval, or available_now")
    kafka_path: Literal["proxy", "direct"] = Field("proxy", description="how the query and the harness reach Kafka: "
                                                   "through Toxiproxy (network faults reach them) or straight to "
                                                   "the broker (the proxy's own cost, measured)")
    brokers: int | None = Field(None, ge=1, description="Kafka brokers the run needs (3: a cluster, for leader "
                                                        "failover), checked against the stack when the run starts; "
                                                        "none: any")
    topics: TopicSettings = Field(default_factory=TopicSettings,
                                  description="replication factor, min.insync.replicas and unclean leader election "
                                              "of the run's input and output topics; unset: the cluster's defaults")
    output_partitions: int | None = Field(None, ge=1, description="partitions of the output (a Kafka topic's); "
                                                                  "none: what the sink declares")
    quiet_timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False,
                                   description="stop waiting once nothing new arrived for this long")
    settle_s: float = Field(10.0, ge=0, allow_inf_nan=False,
                            description="stop waiting sooner once the pipeline settled for this long: the query "
                                        "idle (no batch pending or committed) or, with an aggregator, drained "
                                        "(no output for this long plus its longest wait while batches ran); "
                                        "0: wait for every record or the quiet bound")
    load: Literal["bulk", "open_loop"] = Field("bulk", description="bulk: as fast as the broker takes it; "
                                                                   "open_loop: locust at workload.rate")
    load_duration_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    load_users: int = Field(2, ge=1)
    load_after_first_batch: bool = Field(False, description="load once the query committed its first batch")
    warm_standby: bool = Field(False, description="keep the next driver attempt warm while one runs (its "
                                                  "SparkSession up, waiting): a restart costs the query's start only")
    load_before_start: bool = Field(False, description="load the whole workload before the query starts (a bounded "
                                                       "run reads what is there when it starts)")
    records_after_start: int = Field(0, ge=0, description="records produced into the input once the query "
                                                          "committed its first batch, outside the ledger: a "
                                                          "bounded run must not read them (they show as "
                                                          "unexpected)")
    warm_up_records: int = Field(0, ge=0, description="records produced outside the ledger before the query "
                                                      "starts: the load waits until the query committed its first "
                                                      "batch, and the checks and metrics leave them out (a "
                                                      "benchmark measures the pipeline warm, not Spark's start-up)")
    faults_after_output: int = Field(0, ge=0, description="start the fault timeline once the output shows this "
                                                          "many records (0: when the driver starts)")
    stop_timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False,
                                  description="seconds the query has to stop once asked, at the end of the run")
    flush_slack_s: float = Field(20.0, ge=0, allow_inf_nan=False,
                                 description="seconds an aggregator's batch may be emitted past its declared wait "
                                             "after its oldest record was read, besides the time the query "
                                             "was down")

    feed_batches_ahead: int = Field(0, ge=0, le=100, description=(
        "0: the whole workload is written at once; N: it is written while the faults run, kept N batches "
        "(options.max_records_per_batch records each) ahead of what the query read, then two batches more once the "
        "schedule is over, and no further: a fault run's input ends with its faults, not with a workload sized for "
        "the worst case"))
    stop_at_first_finding: bool = Field(False, description=(
        "fail fast (the mutation benchmark, certify --fail-fast): once the output shows a record delivered twice, no "
        "further fault of the schedule starts (those under way finish; the run then settles and is judged as any run "
        "is; what the cancelled faults would have reached is unknown)"))
    procedure: Annotated[AckedWrites | OptionsProbe, Field(discriminator="kind")] | None = Field(
        None, description="none: the query through the workload and the schedule; acked_writes: a producer on the "
                          "stack's Kafka cluster through the schedule, no query (the BRK runs); options_probe: the "
                          "query built and started with each bad option of one of its connectors (GEN-2)")

    def __init__(self, name: str | None = None, **fields: Any) -> None:
        if name is not None:
            fields["name"] = name
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise _configuration_error(exc) from None

    @field_validator("master")
    @classmethod
    def _valid_master(cls, master: str) -> str:
        return validate_master(master)

    @field_validator("workload")
    @classmethod
    def _valid_workload(cls, workload: WorkloadSpec) -> WorkloadSpec:
        return workload.validate()

    @model_validator(mode="after")
    def _feed_has_a_batch_size(self) -> "Scenario":
        if self.feed_batches_ahead and not isinstance(self.options.get("max_records_per_batch"), int):
            raise ValueError("feed_batches_ahead counts batches of options.max_records_per_batch records, and the "
                             "scenario's options set no such integer")
        if self.feed_batches_ahead and (self.load != "bulk" or self.load_before_start):
            raise ValueError("feed_batches_ahead feeds a bulk load while the query runs: load must be bulk and "
                             "load_before_start false")
        if self.workload.added_partitions and (self.load != "bulk" or self.load_before_start):
            raise ValueError("workload.added_partitions writes into partitions the run's faults add while the query "
                             "runs: load must be bulk and load_before_start false")
        return self

    @model_validator(mode="after")
    def _schedule_in_order(self) -> "Scenario":
        for index, spec in enumerate(self.schedule):
            if spec.after is not None and not 0 <= spec.after < index:
                raise ValueError(f"schedule entry {index}: after={spec.after} does not name an earlier entry")
            if self.kafka_path == "direct" and spec.target == "kafka" and spec.fault in PROFILES["network"]:
                raise ValueError(f"schedule entry {index}: the network fault {spec.fault} on kafka acts on the proxy, "
                                 "which kafka_path='direct' bypasses")
        return self

    def as_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["schedule"] = [spec.as_dict() for spec in self.schedule]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Scenario":
        """The scenario a ``results.json`` recorded (its ``scenario`` field): run it again to reproduce the run."""
        return cls(**{**data, "workload": WorkloadSpec(**data.get("workload", {})),
                      "schedule": parse(data.get("schedule", []))})


def _configuration_error(exc: ValidationError) -> ConfigurationError:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "scenario"
        value = f" (got {error['input']!r})" if where != "scenario" and "input" in error else ""
        problems.append(f"{where}: {error['msg']}{value}")
    return ConfigurationError("The scenario is not valid: " + "; ".join(problems) + ".",
                              hint="See harness/schemas/scenario.schema.json for every field and its bounds.")


def json_schema() -> str:
    """The JSON Schema of a scenario, as committed in :data:`SCHEMA_FILE`."""
    return render(Scenario.model_json_schema(), SCHEMA_FILE.name)


@dataclass
class _Run:
    """What one run set up; torn down in :func:`run_scenario`'s ``finally``."""

    history: History = field(default_factory=History)
    driver: DriverProcess | None = None
    observer: Observer | None = None
    writer: Any = None
    faults: list[Fault] = field(default_factory=list)
    spark_cluster: Any = None
    watch: FirstFindingWatch | None = None
    timeline: FaultTimeline | None = None


def run_scenario(env: Any, scenario: Scenario, workdir: Path, driver_pool: Any = None) -> RunResult:
    """Run ``scenario`` on the started environment ``env``; always writes ``workdir/results.json``. A
    :class:`~streamcert.harness.run.driver_pool.DriverPool` of ``env``'s gives a run with warm standbys a warm
    first attempt."""
    workdir = Path(workdir)
    if (workdir / "checkpoint").exists() or (workdir / "results.json").exists():
        raise ConfigurationError(f"The run folder {workdir} holds an earlier run (its checkpoint or results.json).",
                                 hint="Give each run a folder of its own: a query would resume from the old "
                                 "checkpoint and the old output would be judged.")
    brokers = _check_brokers(scenario, _bootstrap(env, scenario))  # refused before anything starts
    result = RunResult(scenario=scenario.as_dict(), seed=scenario.workload.seed, started_at=time.time())
    cpu = CpuWindow().start()
    run = _Run()
    try:
        if scenario.procedure is None:
            _run_query(env, scenario, workdir, result, run, brokers, driver_pool)
        else:
            _run_procedure(env, scenario, workdir, result, run.history)
        result.complete = True
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        if not isinstance(exc, Exception):
            raise
    finally:
        _tear_down(run)
        result.driver_attempts = run.driver.attempt if run.driver is not None else 0
        result.history = run.history.events()
        result.duration_s = round(time.time() - result.started_at, 3)
        result.cpu = cpu.figures()
        result.save(workdir / "results.json")
    return result


def _run_query(env: Any, scenario: Scenario, workdir: Path, result: RunResult, run: _Run,
               brokers: dict[str, Any] | None, driver_pool: Any = None) -> None:
    """The query's run: everything :func:`run_scenario` says, set up into ``run`` (torn down by the caller)."""
    source = load_connector(scenario.source, "source")
    sink = load_connector(scenario.sink, "sink")
    aggregator = load_connector(scenario.aggregator, "aggregator") if scenario.aggregator else None
    result.connectors = {c.kind: ConnectorSummary.of(c, ref) for c, ref in (
        (source, scenario.source), (sink, scenario.sink), (aggregator, scenario.aggregator)) if c is not None}
    systems = _systems(env, scenario, source, sink, since=result.started_at)
    context = _context(env, scenario, systems, workdir)
    result.context = context.to_dict()
    result.output = {"kind": systems.output.name, "name": context.output}
    if brokers is not None:
        result.context["brokers"] = brokers
    run.writer = _make_input(env, scenario, systems.input, context)
    run.observer = _observer(env, systems.output, context, (aggregator or sink).unpack_output)
    run.observer.prepare(scenario.output_partitions or sink.output_partitions)
    run.observer.start()
    if scenario.master == STANDALONE:
        run.spark_cluster = _standalone_cluster(env, scenario, workdir)
        result.context["spark_master"] = run.spark_cluster.url
    run.driver = _driver(env, scenario, context, [source, sink, aggregator], systems, workdir,
                         master=run.spark_cluster.url if run.spark_cluster is not None else scenario.master,
                         pool=driver_pool)
    jars = run.driver.spec.spark_conf.get("spark.jars", "")
    result.context["spark"] = {"version": pyspark_version(),
                               "jars": [Path(jar).name for jar in jars.split(",") if jar]}
    if scenario.load_before_start:
        ledger = _load(scenario, context, workdir, result, run.writer)
        run.history.record("load-done", before_start=True, **ledger.counts())
    faults = FaultContext(environment=env, driver=run.driver, history=run.history,
                          input_topic=context.input_topic, workdir=workdir / "faults", observer=run.observer,
                          spark_cluster=run.spark_cluster)
    run.faults = [build_fault(spec, faults) for spec in scenario.schedule]
    if scenario.warm_up_records:
        run.history.record("warm-up", **_produce_unrecorded(
            run.writer, scenario.warm_up_records, scenario.workload, first_id=WARM_UP_ID_BASE))
    run.driver.start()
    run.history.record("driver-start", attempt=run.driver.attempt)
    timeline = run.timeline = _start_timeline(scenario, run)
    if scenario.stop_at_first_finding:
        run.watch = FirstFindingWatch(run.observer, timeline, run.history,
                                      exclude=lambda frame: _without_warm_up(frame, scenario.warm_up_records)).start()
    if scenario.load_after_first_batch or scenario.records_after_start or scenario.warm_up_records:
        run.driver.wait_for(lambda d: d.checkpoint().latest_commit is not None, "the first batch", timeout=300)
    if scenario.records_after_start:
        run.history.record("load-after-start", **_produce_unrecorded(
            run.writer, scenario.records_after_start, scenario.workload))
    if not scenario.load_before_start:
        feed = _feed(scenario, run, timeline)
        grown = (TopicGrowth(_bootstrap(env, scenario), context.input_topic, give_up=timeline.done)
                 if scenario.workload.added_partitions else None)
        ledger = _load(scenario, context, workdir, result, run.writer, feed, grown)
        if grown is not None and grown.grown_at is not None:
            run.history.record("input-grown", partitions=scenario.workload.final_partitions, at=grown.grown_at)
        run.history.record("load-done", **ledger.counts(), **({"fed": feed.stopped_at} if feed else {}))
    result.ledger_counts = ledger.counts()
    timeline.join()
    if driver_pool is not None:  # the next run's first attempt warms while this one drains (whether or not this
        driver_pool.prepare(run.driver.spec)  # run's own driver could take a pooled child)
    if run.watch is not None:
        run.watch.stop()
    expected = set(ledger.frame.loc[ledger.frame["status"] == "acked", "id"])
    bounds = aggregator.batch_bounds(context) if aggregator is not None else None
    settling = Settling(scenario.settle_s, None if aggregator is None else bounds[1] if bounds else 0.0)
    waited = wait_until_seen(run.observer, run.driver, expected, scenario.quiet_timeout_s, settling)
    if scenario.trigger == "available_now":
        run.history.record("driver-ended", **_wait_for_exit(run.driver, scenario.quiet_timeout_s))
    run.history.record("quiesced", **waited, seen=run.observer.count(),
                       observer_transient_errors=run.observer.transient_errors)
    stopped = run.driver.stop_gracefully(scenario.stop_timeout_s)
    run.history.record("driver-stop", **stopped)
    if not stopped.get("running", True) and stopped.get("query_error"):
        result.error = f"the query failed: {stopped['query_error']}"
    output = _without_warm_up(_with_keys(run.observer.frame(), run.observer, ledger.frame),
                              scenario.warm_up_records)
    result.evidence = _save_evidence(ledger, output, workdir)
    judged = _judged_ledger(ledger, Path(context.checkpoint), context.input_topic, bounds)
    downtime = driver_downtime(run.history.events(), run.driver.events(), run_end=time.time())
    results = run_checks(_checkers(scenario, bounds, downtime), judged, output)
    if scenario.schedule:  # a fault that missed its target leaves the verdict unknown
        results.append(fault_reached(run.history.events()))
    results.append(query_failures(run.driver.events()))
    if run.observer.error:
        result.error = f"observer: {run.observer.error}"
        _unread_is_not_lost(results, run.observer.error)
    result.checks = [check.to_dict() for check in results]
    result.valid = combined_valid(results)
    result.metrics.update(summarize(output, ledger.frame, run.history.events(), _origin(run.history)))
    lag = run.observer.read_lag()
    result.metrics["observer_read_lag"] = lag.as_dict() if lag is not None else None


def _run_procedure(env: Any, scenario: Scenario, workdir: Path, result: RunResult, history: History) -> None:
    """A run whose procedure is not the query through a workload: the cluster's acknowledged writes, or the option
    probe on the scenario's query."""
    procedure = scenario.procedure
    if isinstance(procedure, AckedWrites):
        run_acked_writes(env, scenario, workdir, history, result)
        return
    connector = load_connector(getattr(scenario, procedure.options_of), procedure.options_of)
    result.connectors = {connector.kind: ConnectorSummary.of(connector, getattr(scenario, procedure.options_of))}
    _, spec = prepare_query(env, scenario, workdir)
    run_options_probe(env, spec, procedure, connector, workdir, result)


def _connectors(scenario: Scenario) -> list[Connector | None]:
    """The scenario's source, sink and aggregator (None without one), loaded."""
    return [load_connector(scenario.source, "source"), load_connector(scenario.sink, "sink"),
            load_connector(scenario.aggregator, "aggregator") if scenario.aggregator else None]


def prepare_query(env: Any, scenario: Scenario, workdir: Path) -> tuple[QueryContext, QuerySpec]:
    """The query of ``scenario`` ready to start elsewhere (the GEN-2 option probe): its input topic and output made,
    its context and its driver spec (jars resolved). Nothing is loaded and nothing starts."""
    connectors = _connectors(scenario)
    source, sink = connectors[0], connectors[1]
    systems = _systems(env, scenario, source, sink)
    context = _context(env, scenario, systems, workdir)
    _check_brokers(scenario, context.bootstrap_servers)
    _make_input(env, scenario, systems.input, context).close()
    _observer(env, systems.output, context).prepare(scenario.output_partitions or sink.output_partitions)
    # The probe's queries never run a batch: a standalone run's options are probed on a local master.
    master = DEFAULT_MASTER if scenario.master == STANDALONE else None
    return context, _driver(env, scenario, context, connectors, systems, workdir, master=master).spec


def _kafka_error_text(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else exc
    return error.str() if hasattr(error, "str") else str(error)


def _check_brokers(scenario: Scenario, bootstrap: str, timeout: float = 10.0) -> int | None:
    """The stack's broker count when the scenario asks for a cluster size or a replication factor (None
    otherwise); a ConfigurationError when the stack does not fit them, StartupFailed when its Kafka does not
    answer within ``timeout`` s."""
    topics = scenario.topics
    wanted = max(topics.replication_factor or 0, topics.min_insync_replicas or 0)
    if scenario.brokers is None and not wanted:
        return None
    try:
        found = broker_ids(bootstrap, timeout=timeout)
    except KafkaException as exc:
        raise StartupFailed(
            f"Scenario {scenario.name!r} needs to count the stack's Kafka brokers, and Kafka at {bootstrap} did not "
            f"answer a metadata request within {timeout:g} s ({_kafka_error_text(exc)}).",
            hint="Check that the stack is up and Kafka listens there (`streamcert env check`), or correct "
                 "STREAMCERT_KAFKA_BOOTSTRAP for the external provider.") from None
    if scenario.brokers is not None and len(found) != scenario.brokers:
        raise ConfigurationError(
            f"Scenario {scenario.name!r} needs {scenario.brokers} Kafka broker(s); the stack's Kafka at {bootstrap} "
            f"lists {len(found)} (ids {found}).",
            hint=f"Start the stack with that many: `streamcert env up --brokers {scenario.brokers}`, "
                 f"EnvironmentConfig(brokers={scenario.brokers}) (local provider), or leave the scenario's brokers "
                 "unset to run on any.")
    if wanted > len(found):
        raise ConfigurationError(
            f"Scenario {scenario.name!r} asks for topics with replication factor {topics.replication_factor} and "
            f"min.insync.replicas {topics.min_insync_replicas}; the stack's Kafka at {bootstrap} lists "
            f"{len(found)} broker(s), so {wanted} replicas cannot exist.",
            hint=f"Start the stack with --brokers {wanted} or more, or lower the scenario's topics settings.")
    return len(found)


@dataclass(frozen=True)
class _RunSystems:
    """The systems a run's input and output are in (the stack's bound to the run's addresses)."""

    input: ExternalSystem
    output: ExternalSystem

    @property
    def distinct(self) -> list[ExternalSystem]:
        return [self.input] if self.input is self.output else [self.input, self.output]


def _systems(env: Any, scenario: Scenario, source: Connector, sink: Connector,
             since: float | None = None) -> _RunSystems:
    at = stack_addresses(env, _bootstrap(env, scenario), scenario.topics, since)
    return _RunSystems(input_system_of(source, at), output_system_of(sink, at))


def _context(env: Any, scenario: Scenario, systems: _RunSystems, workdir: Path) -> QueryContext:
    """The run's context: names of its input and output (by their systems: a Kafka topic, a table...), the stack's
    addresses and the proxied endpoints of the connectors' own systems (started here when new)."""
    run_id = uuid.uuid4().hex[:8]
    stem = re.sub(r"[^A-Za-z0-9_-]", "-", scenario.name)[:40] or "scenario"
    endpoints = env.endpoints
    proxied: dict[str, str] = {}
    for system in systems.distinct:
        if isinstance(system, StackSystem):  # the stack's own: the context's fixed fields and endpoint() name them
            continue
        found = addresses(env, system)[1]
        clash = sorted(set(proxied) & set(found))
        if clash:
            raise ConfigurationError(f"The source's and the sink's external systems both name endpoint(s) "
                                     f"{', '.join(clash)}.", hint="Give each system's endpoints names of their own "
                                     "(QueryContext.endpoint(name) must say which one it means).")
        proxied.update(found)
    input_name = systems.input.input_name(stem, run_id, str(workdir))
    output = systems.output.output_name(stem, run_id, str(workdir))
    options = dict(scenario.options)
    if not isinstance(systems.input, StackSystem):  # a table's source limits batches by writes (files), not records
        options.setdefault("input_records_per_write", scenario.workload.transaction_records)
    return QueryContext(bootstrap_servers=_bootstrap(env, scenario), input_topic=input_name, output=output,
                        checkpoint=str(workdir / "checkpoint"), run_id=run_id, postgres_dsn=endpoints.postgres_dsn,
                        parallelism=scenario.parallelism, options=options, endpoints=proxied,
                        trigger=scenario.trigger)


def _make_input(env: Any, scenario: Scenario, system: ExternalSystem, context: QueryContext) -> InputWriter:
    """Make the run's input in its system (a topic, a table) and return its writer, prepared, for the load."""
    writer = system.writer(context.input_topic, addresses(env, system)[0])
    if scenario.load == "open_loop" and not hasattr(writer, "load_open_loop"):
        writer.close()
        raise ConfigurationError(f"Scenario {scenario.name!r} asks for load='open_loop', whose locust users produce "
                                 f"into a Kafka topic; its source reads {system.name!r}.",
                                 hint="Pace the load with workload.rate instead (its system's writer keeps it).")
    writer.prepare(scenario.workload.partitions)
    return writer


def _observer(env: Any, system: ExternalSystem, context: QueryContext, unpack: Any = None) -> Observer:
    """The (not started) observer of the run's output: the stack's native one, or one over the system's reader."""
    if isinstance(system, StackSystem):
        return system.observer(context.output, unpack)
    return reader_observer(system.name, context.output, system.reader(context.output, addresses(env, system)[0]),
                           unpack)


def _bootstrap(env: Any, scenario: Scenario) -> str:
    endpoints = env.endpoints
    bootstrap = endpoints.kafka_direct_bootstrap if scenario.kafka_path == "direct" else endpoints.bootstrap_servers
    if not bootstrap:
        raise ConfigurationError(f"Scenario {scenario.name!r} asks for Kafka {scenario.kafka_path}, and this stack "
                                 "has no such address.", hint="Use kafka_path='proxy' on this provider.")
    return bootstrap


def _standalone_cluster(env: Any, scenario: Scenario, workdir: Path) -> Any:
    """The run's own standalone cluster (master ``standalone``), started; torn down with the run."""
    from streamcert.harness.stack.spark_standalone import LocalSparkCluster

    cluster = LocalSparkCluster(workdir / "spark-cluster", workers=scenario.spark_workers,
                                run_token=getattr(env, "run_token", ""))
    cluster.start()
    return cluster


def _driver(env: Any, scenario: Scenario, context: QueryContext, connectors: list[Connector | None],
            systems: _RunSystems, workdir: Path, master: str | None = None, pool: Any = None) -> DriverProcess:
    spark_conf = _spark_conf(scenario, connectors,
                             [system.spark_conf(dict(context.endpoints)) for system in systems.distinct])
    params = query_params(scenario.source, scenario.sink, scenario.aggregator, context, scenario.trigger)
    spec = QuerySpec(BUILDER, context.checkpoint, params, master or scenario.master, spark_conf=spark_conf)
    return DriverProcess(spec, workdir / "driver", run_token=getattr(env, "run_token", ""),
                         standby=scenario.warm_standby, pool=pool)


def _spark_conf(scenario: Scenario, connectors: list[Connector | None],
                system_confs: list[Any]) -> dict[str, str]:
    """The Spark settings of a run's driver: its connectors', its systems' (``system_confs``), its faults' and its
    scenario's own, and the jars of the connectors' packages (resolved here, once, not by each driver attempt)."""
    present = [c for c in connectors if c is not None]
    spark_conf = {key: value for c in present for key, value in c.spark_conf.items()}
    for conf in system_confs:
        spark_conf.update(conf)
    for fault in dict.fromkeys(spec.fault for spec in scenario.schedule):  # what the faults need of the driver
        needed = fault_kind(fault).fault_class.driver_conf()
        jars = [spark_conf.get("spark.jars", ""), needed.pop("spark.jars", "")]
        spark_conf.update(needed)
        if any(jars):
            spark_conf["spark.jars"] = ",".join(dict.fromkeys(filter(None, ",".join(jars).split(","))))
    spark_conf.update(scenario.spark_conf)
    packages = list(dict.fromkeys(p for c in present for p in c.packages_for(pyspark_version())))
    jars = [str(path) for path in ensure_jars(packages)]
    if jars:
        spark_conf["spark.jars"] = ",".join(filter(None, [spark_conf.get("spark.jars", ""), *jars]))
    return spark_conf


def driver_session(scenario: Scenario) -> tuple[str, dict[str, str]] | None:
    """The master and Spark settings a run of ``scenario`` will start its driver with, worked out before the run
    (nothing is started): a pool of warm drivers readies a child of them while the run before it drains.

    None where only the run can tell: a standalone cluster's master (its URL is the run's), a connector's own
    system (its settings may name the endpoints the stack gives it), a connector that does not load (the run
    says why). A wrong answer costs only a cold start: a pooled child serves a driver of the very same session."""
    if scenario.master == STANDALONE:
        return None
    try:
        connectors = _connectors(scenario)
        systems = [declared_input_system(connectors[0]), declared_output_system(connectors[1])]
        if not all(isinstance(system, StackSystem) for system in systems):
            return None
        return scenario.master, _spark_conf(scenario, connectors, [system.spark_conf({}) for system in systems])
    except Exception:  # noqa: BLE001 - a guess for a warm start never fails the run before; the run reports it
        return None


#: Batches written after the fault schedule is over, when the input is fed as the query reads.
_FEED_AFTER_BATCHES = 2


def _feed(scenario: Scenario, run: _Run, timeline: FaultTimeline) -> FeedGate | None:
    """The gate of a fed load (:attr:`Scenario.feed_batches_ahead`), None for a load written at once."""
    if not scenario.feed_batches_ahead:
        return None
    batch = int(scenario.options["max_records_per_batch"])
    return FeedGate(run.driver, batch, ahead=scenario.feed_batches_ahead, after=_FEED_AFTER_BATCHES,
                    faults_done=timeline.done)


def _load(scenario: Scenario, context: QueryContext, workdir: Path, result: RunResult, writer: InputWriter,
          gate: FeedGate | None = None, grown: TopicGrowth | None = None):
    """Load the workload with the input's ``writer`` (closed with the run): the writer's own bulk or open-loop load
    when it has one (a Kafka topic's), else one planned transaction per write."""
    if scenario.load == "open_loop":
        loaded = writer.load_open_loop(scenario.workload, scenario.load_duration_s, scenario.load_users,
                                       workdir / "load")
        result.metrics["load"] = loaded.to_dict()
        return loaded.ledger
    return load_workload(writer, context.input_topic, scenario.workload, gate, grown)


#: Ids of records produced outside the ledger (:attr:`Scenario.records_after_start`) start here.
UNRECORDED_ID_BASE = 1 << 40
#: Ids of the warm-up records (:attr:`Scenario.warm_up_records`) start here.
WARM_UP_ID_BASE = 1 << 41


def _without_warm_up(output: pd.DataFrame, count: int) -> pd.DataFrame:
    if not count or output.empty:
        return output
    return output.loc[~output["id"].between(WARM_UP_ID_BASE, WARM_UP_ID_BASE + count - 1)].reset_index(drop=True)


def _produce_unrecorded(writer: InputWriter, count: int, workload: WorkloadSpec,
                        first_id: int = UNRECORDED_ID_BASE) -> dict[str, Any]:
    """``count`` records with ids from ``first_id``, keys of their own, never in the ledger: written with the
    input's ``writer``, one write per ``transaction_records``."""
    from streamcert.harness.run.workload import encode_value

    now = time.time()
    records = [InputRecord(f"unrecorded-{i % 7}".encode(), encode_value(first_id + i, i, now, workload.record_bytes),
                           (i % 7) % workload.partitions)  # a key keeps its partition
               for i in range(count)]
    step = workload.transaction_records
    for start in range(0, count, step):
        writer.write(records[start:start + step])
    return {"first_id": first_id, "count": count, "acknowledged": count}


def _wait_for_exit(driver: DriverProcess, timeout: float) -> dict[str, Any]:
    """A bounded query ends by itself: wait up to ``timeout`` s for the driver to exit; say how it ended."""
    began = time.monotonic()
    while driver.is_running() and time.monotonic() - began < timeout:
        time.sleep(0.2)
    terminated = [e for e in driver.events(driver.attempt) if e.get("event") == "terminated"]
    return {"ended_by_itself": not driver.is_running(), "seconds": round(time.monotonic() - began, 3),
            "exit_code": driver.exit_code(), "terminated": bool(terminated),
            "error": terminated[-1].get("error") if terminated else None}


def _unread_is_not_lost(results: list, observer_error: str) -> None:
    """Once the observer stopped, records it never read are not known to be lost: that verdict is unknown.
    Duplicates and other findings among what it did read stand."""
    for check in results:
        if check.name == "lost" and check.valid is False:
            check.valid = UNKNOWN
            check.error = f"the output stopped being read ({observer_error}): missing records are not known lost"


def _checkers(scenario: Scenario, bounds: tuple[int, float] | None, downtime: list[tuple[float, float]]) -> list:
    """The exactly-once checkers, an aggregator's batch contract when it declares one (its flush rule does not
    count the time the query was down), and the event-time drift when the scenario asks the source for a bound."""
    checkers = exactly_once_checkers()
    if bounds is not None:
        checkers.append(AggregatorBatchChecker(bounds[0], bounds[1], scenario.flush_slack_s, pauses=downtime))
    if scenario.options.get(DRIFT_OPTION) is not None:
        checkers.append(EventTimeDriftChecker(int(scenario.options[DRIFT_OPTION])))
    return checkers


def _judged_ledger(ledger, checkpoint: Path, input_topic: str, bounds: tuple[int, float] | None) -> pd.DataFrame:
    """The ledger as the checkers take it; for an aggregator's flush rule, with when the query read each record."""
    frame = ledger.for_checkers()
    if bounds is not None:
        frame["arrived_at"] = arrival_times(ledger.frame.reset_index(drop=True), checkpoint, input_topic)
    return frame


def _save_evidence(ledger, output: pd.DataFrame, workdir: Path) -> dict[str, str]:
    """The ledger and the output the checks judge, next to ``results.json`` (names relative to it)."""
    ledger.write(workdir / "ledger.parquet")
    output.reset_index(drop=True).to_parquet(workdir / "output.parquet", index=False)
    return {"ledger": "ledger.parquet", "output": "output.parquet"}


def _origin(history: History) -> float:
    events = history.events()
    return events[0]["time"] if events else time.time()


# -- the fault timeline ----------------------------------------------------------------------

def _start_timeline(scenario: Scenario, run: _Run) -> FaultTimeline:
    """The schedule carried out in the background, gated on ``faults_after_output`` records when it is set."""
    assert run.driver is not None and run.observer is not None
    gate = (lambda: _wait_for_output(run, scenario.faults_after_output)) if scenario.faults_after_output > 0 else None
    timeline = FaultTimeline(scenario.schedule, run.faults, run.history, gate)
    # a standby costs ~15 s of CPU: none is warmed for an attempt no fault will restart into
    run.driver.restarts_may_follow = lambda: timeline.may_still_act_on("driver")
    return timeline.start()


def _wait_for_output(run: _Run, records: int) -> bool:
    """Wait until the output shows ``records`` (at most :data:`_OUTPUT_GATE_S`); False when the driver exited first
    (a query that failed to start: its faults would only restart it to fail again)."""
    deadline = time.monotonic() + _OUTPUT_GATE_S
    while run.observer.count() < records and time.monotonic() < deadline and run.driver.is_running():
        time.sleep(0.1)
    if run.observer.count() < records and not run.driver.is_running():
        run.history.record("fault-timeline-start", output_records=run.observer.count(), wanted=records,
                           driver_exited=True, query_error=run.driver.query_error())
        return False
    run.history.record("fault-timeline-start", output_records=run.observer.count(), wanted=records)
    return True


# -- reading the output back -----------------------------------------------------------------

def _with_keys(output: pd.DataFrame, observer: Observer, ledger: pd.DataFrame) -> pd.DataFrame:
    """Where the output does not store keys (a table of values), each record's key comes from the ledger."""
    if observer.carries_keys or output.empty:
        return output
    keys = pd.Series(ledger["key"].to_numpy(), index=ledger["id"].to_numpy())
    output = output.copy()
    output["key"] = output["id"].map(keys).to_numpy()
    return output


#: Seconds the teardown waits for an abandoned fault timeline's faults to stop (a moment kill gives up at its next
#: look; a struck kill's heal restarts the driver, which the teardown then stops).
_TIMELINE_STOP_S = 60.0


def _tear_down(run: _Run) -> None:
    if run.watch is not None:
        _safely(run.watch.stop)
    if run.timeline is not None and not run.timeline.done():
        # interrupted (Ctrl-C, SIGTERM) or failed mid-schedule: the timeline's thread would go on killing and
        # restarting the driver after the teardown stopped it, leaving attempts running when the process exits
        timeline = run.timeline
        _safely(lambda: timeline.abandon("the run ended before its schedule did"))
        _safely(lambda: timeline.join(_TIMELINE_STOP_S))
    for fault in run.faults:
        _safely(fault.stop)
    if run.driver is not None:
        _safely(run.driver.stop)
    if run.observer is not None:
        _safely(run.observer.stop)
    if run.writer is not None:
        _safely(run.writer.close)
    if run.spark_cluster is not None:
        _safely(run.spark_cluster.stop)


def _safely(action) -> None:
    try:
        action()
    except Exception:  # teardown continues; the error, if it matters, shows in the checks
        pass


if __name__ == "__main__":
    sys.exit(schema_command(sys.argv[1:], json_schema, SCHEMA_FILE, "streamcert.harness.scenario"))
