"""Certify connectors: plan their scenarios, run them on one stack, judge every requirement, write ``results.json``.

:func:`prepare` checks what the user asked for before anything starts (connectors found and declared correctly,
requirement IDs known): a :class:`~streamcert.harness.errors.ConfigurationError` within seconds otherwise.
:func:`certify` then starts the stack once, runs each planned scenario (:mod:`streamcert.conformance.plans`) with
:func:`~streamcert.harness.scenario.run_scenario` into ``out/runs/<connector>/<scenario>/``, probes the sink's
participant for leftovers, and judges each requirement (:mod:`streamcert.conformance.verdicts`). ``results.json``
is rewritten after every run, marked incomplete until the end, so an interrupted certification keeps what it had.
Runs in the harness's process; the queries run in driver processes of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import re
import shlex
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamcert.conformance.catalogue import (CATALOGUE, CLUSTER_SUBJECT, Requirement, capabilities, ids_for,
                                              requirement)
from streamcert.conformance.evidence import RunEvidence
from streamcert.conformance.participants import probe_system_leftovers
from streamcert.conformance.plans import PlannedRun, cluster_runs, plan
from streamcert.conformance.shards import Shard, assign
from streamcert.conformance.sharing import host_of, hosted_runs, share_runs
from streamcert.conformance.results import CertificationResult, RunSummary
from streamcert.conformance.verdicts import JudgedRun, Verdict, capability_verdicts, judge, skipped
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.results import ConnectorSummary, RunResult
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.run.driver_pool import DriverPool
from streamcert.harness.stack.cpu_use import CpuWindow
from streamcert.harness.stack.jvm_start import CERTIFICATION_JIT, default_jit
from streamcert.harness.stack.python_forks import CERTIFICATION_FORK_SERVER, default_fork_server
from streamcert.harness.stack.spark_checkpoints import CERTIFICATION_CHECKPOINT_MANAGER, default_checkpoint_manager
from streamcert.harness.stack.spark import runs_in_driver
from streamcert.harness.systems import addresses, output_system_of
from streamcert.harness.systems.resolve import stack_addresses
from streamcert.harness.verify.checkers import CheckResult
from streamcert.harness.verify.coverage import MOMENT_KILL, coverage_grid, strike_grid
from streamcert.spi.connector import Connector

__all__ = ["REFERENCE_CONNECTORS", "Certification", "prepare", "on_master", "certify", "replay_command", "evidence_of",
           "verdicts_of", "default_jobs"]

_log = logging.getLogger(__name__)

#: What ``streamcert certify`` certifies when no connector is named.
REFERENCE_CONNECTORS = ("streamcert-kafka", "streamcert-kafka-2pc", "streamcert-pg-2pc",
                        "streamcert-batch-aggregator")


@dataclass
class Certification:
    """What a certification will do, checked before the stack starts."""

    connectors: dict[str, Connector]
    wanted: set[str] | None
    seed: int
    quick: bool
    strict: bool
    runs: list[PlannedRun] = field(default_factory=list)
    #: False: the connectors' own fault points were left out of the plan (``--no-cooperative``)
    cooperative: bool = True
    #: True: each query run's schedule ends at its first finding (``--fail-fast``)
    fail_fast: bool = False
    #: reference -> requirements the full plan judges (what --quick leaves out is said so in its verdict)
    full_plan: dict[str, set[str]] = field(default_factory=dict)
    #: (connector reference, run name) -> why the run could not happen on this stack (an external cluster)
    skipped_runs: dict[tuple[str, str], str] = field(default_factory=dict)
    #: this certification's part of the plan (``--shard I/N``; None: all of it)
    shard: Shard | None = None
    #: (connector reference, run name) -> the shard that runs it, for the runs of other shards
    elsewhere: dict[tuple[str, str], str] = field(default_factory=dict)

    def requirements_of(self, connector: Connector) -> list[Requirement]:
        return [req for req in CATALOGUE if req.id in ids_for(connector.kind)
                and (self.wanted is None or req.id in self.wanted)]

    def cluster_requirements(self) -> list[str]:
        """The BRK requirements the plan's cluster runs judge (the precondition of the failover runs among them)."""
        return [req for run in self.runs if run.connector == CLUSTER_SUBJECT for req in run.judges]


def prepare(references: list[str] | None, requirement_ids: list[str] | None = None, *, seed: int = 1,
            quick: bool = False, strict: bool = True, spark_master: str | None = None,
            cooperative: bool = True, shard: Shard | None = None, fail_fast: bool = False) -> Certification:
    """Find and check the connectors and requirements; plan the runs. A ConfigurationError on any bad input.

    ``spark_master``: run every query there instead of the plan's local masters (:func:`on_master`).
    ``cooperative`` false: the connectors' own fault points are not used (only faults that need no cooperation).
    ``shard``: run only that part of the plan (:mod:`~streamcert.conformance.shards`); the rest is said to be
    elsewhere. ``fail_fast``: each query run's schedule ends at its first finding (:func:`failing_fast`)."""
    if spark_master is not None:
        from streamcert.harness.stack.spark import refuse_unreachable_master, validate_master

        refuse_unreachable_master(validate_master(spark_master))
    references = list(dict.fromkeys(references or REFERENCE_CONNECTORS))
    connectors = {}
    for reference in references:
        connector = load_connector(reference)
        connector.check_declaration(ids_for(connector.kind), strict=strict,
                                    capabilities=capabilities(connector.kind))
        connectors[reference] = connector
    names = [connector.name for connector in connectors.values()]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"Two connectors share a name: {', '.join(names)}.",
                                 hint="Give each connector a name of its own (the class attribute name).")
    wanted = {requirement(req_id).id for req_id in requirement_ids} if requirement_ids else None
    if wanted is not None:
        kinds = {c.kind for c in connectors.values()} | {"broker"}
        applicable = {req for kind in kinds for req in ids_for(kind)}
        if not wanted & applicable:
            raise ConfigurationError(
                f"None of the requirements {', '.join(sorted(wanted))} applies to the connectors given "
                f"({', '.join(f'{r}: {c.kind}' for r, c in connectors.items())}).",
                hint="A source is judged on SRC and GEN, a sink on SNK and GEN, an aggregator on AGG and GEN.")
    certification = Certification(connectors, wanted, seed, quick, strict, cooperative=cooperative,
                                  fail_fast=fail_fast)
    for reference, connector in connectors.items():
        certification.runs += [failing_fast(run) if fail_fast else run
                               for run in plan(reference, connector, seed, quick, wanted, cooperative)]
        certification.full_plan[reference] = {req for run in plan(reference, connector, seed) for req in run.judges}
    certification.runs = share_runs(certification.runs, connectors)
    for run in certification.runs:
        why = _wrong_spark(certification.connectors[run.connector]) if run.connector in connectors else None
        if why is not None:
            certification.skipped_runs[(run.connector, run.name)] = why
    failover = any(run.brokers > 1 for run in certification.runs)
    certification.runs[:0] = cluster_runs(seed, wanted, failover)
    if spark_master is not None:
        runs, certification.runs = certification.runs, []
        for run in runs:
            moved = on_master(run, spark_master)
            if isinstance(moved, str):
                certification.skipped_runs[(run.connector, run.name)] = moved
            certification.runs.append(run if isinstance(moved, str) else moved)
    if shard is not None:
        certification.shard = shard
        for key, index in assign(certification.runs, shard.count).items():
            if index != shard.index:
                certification.elsewhere[key] = str(Shard(index, shard.count))
    return certification


def _wrong_spark(connector: Connector) -> str | None:
    """Why ``connector`` cannot run on this interpreter's Spark (None: it can)."""
    import pyspark

    version = pyspark.__version__
    if not connector.spark_versions or ".".join(version.split(".")[:2]) in connector.spark_versions:
        return None
    return (f"{connector.name} runs on Spark {', '.join(connector.spark_versions)} (its jars are built for it) and "
            f"this certification runs Spark {version}: certify it where pyspark matches (tox -e spark41)")


def on_master(run: PlannedRun, master: str) -> PlannedRun | str:
    """``run`` with its query on ``master``, or why it cannot go there.

    A ``local[N,F]`` run's task retries become ``spark.task.maxFailures``; a run that freezes executors of Spark's
    local cluster (the zombies) cannot move: it needs executor JVMs of its own on this machine."""
    scenario = run.scenario
    if run.procedure == "acked_writes":  # no query
        return run
    if scenario.master.startswith("local-cluster"):
        return (f"freezes executor JVMs of {scenario.master} on this machine, with Spark's heartbeat settings of "
                f"its own; not on {master}")
    conf = dict(scenario.spark_conf)
    retries = re.fullmatch(r"local\[\d+,(\d+)\]", scenario.master)
    if retries:
        conf.setdefault("spark.task.maxFailures", retries.group(1))
    return dataclasses.replace(run, scenario=scenario.model_copy(update={"master": master, "spark_conf": conf}))


def _coverage(run_result: RunResult) -> dict[str, Any] | None:
    """The run's kill grid (:mod:`streamcert.harness.verify.coverage`), when its schedule has moment kills."""
    schedule = (run_result.scenario or {}).get("schedule") or []
    if not any(entry.get("fault") == MOMENT_KILL for entry in schedule):
        return None
    return coverage_grid(schedule, run_result.history).as_dict()


def _strike_coverage(run_result: RunResult) -> dict[str, Any] | None:
    """The grid of the run's faults aimed at moments (:func:`~streamcert.harness.verify.coverage.strike_grid`)."""
    grid = strike_grid((run_result.scenario or {}).get("schedule") or [], run_result.history)
    return grid.as_dict() if grid is not None else None


def failing_fast(run: PlannedRun) -> PlannedRun:
    """``run`` with its schedule ending at its first finding (:mod:`~streamcert.harness.run.first_finding`): once the
    output shows a record delivered twice, nothing later undoes that ``fail``, so no further fault starts; the run
    settles and is judged as any run, and what its cancelled faults would have reached stays unknown. A run that
    loses records without duplicating any goes through its whole schedule; a procedure's run is left as it is."""
    if run.scenario.procedure is not None:
        return run
    return dataclasses.replace(run, scenario=run.scenario.model_copy(update={"stop_at_first_finding": True}))


def replay_command(reference: str, requirement_id: str, seed: int, quick: bool, cooperative: bool = True,
                   fail_fast: bool = False, alongside: tuple[str, str] | None = None) -> str:
    """The command that replays one verdict: the same connector, requirement and seed give the same schedule.
    ``alongside`` (a connector reference, one of its requirements): the verdict was judged on that connector's run
    (a shared run), which the replay certifies too."""
    connectors, requirements = [reference], requirement_id
    if alongside is not None:
        connectors.append(alongside[0])
        requirements += f",{alongside[1]}"
    words = ["streamcert", "certify", "--connector", *connectors, "--requirements", requirements, "--seed", str(seed)]
    return shlex.join(words + (["--quick"] if quick else []) + ([] if cooperative else ["--no-cooperative"])
                      + (["--fail-fast"] if fail_fast else []))


def certify(certification: Certification, out: Path, *, provider: str = "auto", command: str = "",
            on_run: Callable[[str, PlannedRun, RunResult | None], None] | None = None,
            environment: Any = None, jobs: int = 1,
            render: Callable[[Path], None] | None = None) -> CertificationResult:
    """Run ``certification`` and write ``out/results.json``; return the result. ``render(out)`` writes its reports
    (:func:`streamcert.reports.render.render_reports`: report.html, junit.xml, summary.md) after every save that
    ends the certification, also an interrupted one; reports are a layer above this one, so the caller hands it.

    ``on_run(phase, planned, result)`` is called with ``"start"`` before each run and ``"done"`` after it (the
    progress display; from several threads when ``jobs`` > 1, one call at a time). ``environment``: an already
    started stack (tests); otherwise one is started here with ``provider`` and stopped at the end. ``jobs``: runs at
    once, each job on a stack of its own (:func:`default_jobs`); a given ``environment`` serves one job only.
    Spark's JVMs run the quick JIT unless ``STREAMCERT_JIT`` says otherwise
    (:data:`~streamcert.harness.stack.jvm_start.CERTIFICATION_JIT`), and the driver's Python processes are forked
    from a fork server unless ``STREAMCERT_FORK_SERVER`` says otherwise
    (:data:`~streamcert.harness.stack.python_forks.CERTIFICATION_FORK_SERVER`), and checkpoint logs are written
    without forked processes unless ``STREAMCERT_CHECKPOINT_MANAGER`` says otherwise
    (:mod:`~streamcert.harness.stack.spark_checkpoints`); all three are in the results' ``versions``.
    """
    if jobs < 1:
        raise ConfigurationError(f"--jobs {jobs} runs nothing.", hint="Give --jobs 1 or more.")
    with default_jit(CERTIFICATION_JIT) as jit, default_fork_server(CERTIFICATION_FORK_SERVER) as forks, \
            default_checkpoint_manager(CERTIFICATION_CHECKPOINT_MANAGER) as checkpoints:
        return _certify(certification, Path(out), provider=provider, command=command, on_run=on_run,
                        environment=environment, jobs=jobs, render=render, jit=jit, forks=forks,
                        checkpoints=checkpoints)


def _certify(certification: Certification, out: Path, *, provider: str, command: str,
             on_run: Callable[[str, PlannedRun, RunResult | None], None] | None, environment: Any, jobs: int,
             render: Callable[[Path], None] | None, jit: str, forks: str, checkpoints: str) -> CertificationResult:
    _check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    result = CertificationResult(
        seed=certification.seed, quick=certification.quick, strict=certification.strict, provider=provider,
        cooperative=certification.cooperative, fail_fast=certification.fail_fast,
        shard=str(certification.shard) if certification.shard else None,
        requirements=sorted(certification.wanted) if certification.wanted else None, command=command,
        connectors=[c.name for c in certification.connectors.values()], started_at=time.time(),
        declarations={c.name: ConnectorSummary.of(c, ref) for ref, c in certification.connectors.items()})
    result.versions["spark_jit"] = jit
    result.versions["spark_python_forks"] = forks
    result.versions["spark_checkpoint_manager"] = checkpoints
    if certification.cluster_requirements():
        result.connectors = [*result.connectors, CLUSTER_SUBJECT]
        result.declarations = {**result.declarations, CLUSTER_SUBJECT: ConnectorSummary(
            reference=CLUSTER_SUBJECT, name=CLUSTER_SUBJECT, kind="broker",
            claims=sorted(certification.cluster_requirements()))}
    if not standby_fits(jobs):
        certification.runs = [_without_standby(run) for run in certification.runs]
    judged: list[JudgedRun] = []
    cpu = CpuWindow().start()
    shutil.rmtree(out / "runs", ignore_errors=True)  # a run folder of an earlier certification must not be resumed
    try:
        result.save(out / "results.json")
        if jobs == 1 or environment is not None:
            with _Stacks(provider, environment, pooled=pool_fits(jobs)) as stacks:
                _run_all(certification, stacks, out, judged, result, on_run)
        else:
            _run_jobs(certification, provider, jobs, out, judged, result, on_run)
        result.complete = True
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, Exception) and not isinstance(exc, ConfigurationError):
            result.error += "\n" + traceback.format_exc(limit=5)
        raise
    finally:
        result.skipped_runs = _skipped_list(certification)
        result.verdicts = _verdicts(certification, judged)
        result.capabilities = _capabilities(certification, result.verdicts)
        result.duration_s = round(time.time() - result.started_at, 3)
        result.cpu = cpu.figures()
        result.save(out / "results.json")
        if render is not None:
            render(out)
    return result


def _check_out(out: Path) -> None:
    """``out`` is a new folder or an earlier certification's (whose ``runs/`` is replaced): never someone else's."""
    if not (out / "runs").exists():
        return
    try:
        earlier = CertificationResult.load(out / "results.json")
    except Exception:  # noqa: BLE001 - whatever it is, it is not a certification's
        earlier = None
    if earlier is None or earlier.kind != "certification":
        raise ConfigurationError(f"The output folder {out} holds a runs/ folder that no certification wrote (no "
                                 "certification results.json beside it).",
                                 hint="Give --out an empty folder, or the folder of an earlier certification.")


class _Stacks:
    """The certification's stacks by broker count: one broker for most runs, a 3-broker cluster for the failover
    runs; each started when a run first needs it (the one before is stopped: runs go in broker order), all stopped
    at the end. A stack given by the caller (tests) serves its broker count and is never stopped here."""

    def __init__(self, provider: str, given: Any = None, pooled: bool = False) -> None:
        self.provider = provider
        #: whether runs get warm drivers from a pool of the stack's (:meth:`pool`)
        self.pooled = pooled
        self.given = given
        self.given_brokers = getattr(getattr(given, "config", None), "brokers", 1) if given is not None else None
        self.current: tuple[int, Any] | None = None
        #: the warm driver children of the stack in use (see :meth:`pool`)
        self._pool: tuple[Any, DriverPool] | None = None

    def __enter__(self) -> "_Stacks":
        return self

    def __exit__(self, *exc) -> None:
        self._stop_own()  # the pool first, then the stack

    def pool(self, env: Any) -> DriverPool | None:
        """The pool of warm driver children for ``env``'s runs (None unless ``pooled``): a run asks it for a child of
        its Spark session once its faults are over, and the next run with that session takes it; stopped with the
        stack."""
        if not self.pooled:
            return None
        if self._pool is None or self._pool[0] is not env:
            self._stop_pool()
            folder = env.workdir / "driver-pool" if getattr(env, "workdir", None) is not None else None
            self._pool = (env, DriverPool(folder, run_token=getattr(env, "run_token", "")))
        return self._pool[1]

    def _stop_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool[1].stop()

    def cannot_start(self, brokers: int) -> str | None:
        """Why a stack of ``brokers`` cannot be had here, or None."""
        if brokers == 1 or brokers == self.given_brokers:
            return None
        from streamcert.harness.stack.providers import select_provider

        provider = select_provider(self.provider)
        if provider != "local":
            return (f"needs a local {brokers}-broker cluster whose nodes the harness kills and cuts off; the "
                    f"{provider} provider gives it no control of the brokers")
        return None

    def __call__(self, brokers: int) -> Any:
        if brokers == self.given_brokers:
            return self.given
        if self.current is not None and self.current[0] == brokers:
            return self.current[1]
        self._stop_own()
        from streamcert.harness.stack.environment import Environment, EnvironmentConfig

        env = Environment(EnvironmentConfig(provider=self.provider, brokers=brokers))
        self.current = (brokers, env)
        env.start()
        return env

    def _stop_own(self) -> None:
        self._stop_pool()
        current, self.current = self.current, None
        if current is not None:
            current[1].stop()


def standby_fits(jobs: int) -> bool:
    """Whether the plans' warm standby drivers are kept for ``jobs`` runs at once: each restart's standby costs a
    JVM's start and a warm-up (~8 CPU-seconds, at a lowered priority), which pays for itself only on a core the runs
    leave idle: two cores per job (measured: one job's kill run 135 s -> 118 s with it; the project's test suite,
    two certifications at once on two cores, 24.4 -> 27.2 min). The same rule keeps a stack's pool of warm drivers for
    the next run's first attempt (:mod:`~streamcert.harness.run.driver_pool`). ``STREAMCERT_STANDBY=off`` turns
    both off."""
    if _turned_off("STREAMCERT_STANDBY"):
        return False
    return (os.cpu_count() or 1) >= 2 * jobs


def pool_fits(jobs: int) -> bool:
    """Whether a stack keeps a pool of warm drivers: where standbys fit (:func:`standby_fits`), unless
    ``STREAMCERT_DRIVER_POOL=off``."""
    return standby_fits(jobs) and not _turned_off("STREAMCERT_DRIVER_POOL")


def _turned_off(variable: str) -> bool:
    return os.environ.get(variable, "").strip().lower() in ("off", "0", "false", "no")


def _without_standby(run: PlannedRun) -> PlannedRun:
    if not run.scenario.warm_standby:
        return run
    return dataclasses.replace(run, scenario=run.scenario.model_copy(update={"warm_standby": False}))


def default_jobs() -> int:
    """Runs at once when ``--jobs`` is not given: one per 2 cores and per 4 GiB of available memory (a job's stack
    holds a broker, a database and a Spark driver of up to 2 GiB, and a kill run's restarts keep 2 cores busy; a
    busier machine makes the moment kills' windows harder to see), at least 1."""
    import psutil

    cores = os.cpu_count() or 1
    memory_gib = psutil.virtual_memory().available / 2 ** 30
    return max(1, min(cores // 2, int(memory_gib // 4)))


def _run_jobs(certification: Certification, provider: str, jobs: int, out: Path, judged: list[JudgedRun],
              result: CertificationResult, on_run) -> None:
    """The runs on ``jobs`` threads, each with stacks of its own, taking the next run (fewest brokers first) as it
    finishes one; results.json is rewritten after every run, one thread at a time."""
    pending = queue.SimpleQueue()
    for planned in _in_order(certification):
        pending.put(planned)
    lock = threading.Lock()
    failures: list[BaseException] = []

    def work() -> None:
        try:
            with _Stacks(provider, pooled=pool_fits(jobs)) as stacks:
                while not failures:
                    try:
                        planned = pending.get_nowait()
                    except queue.Empty:
                        return
                    ran = _run_one(certification, stacks, planned, out, judged, result, on_run, lock)
                    with lock:  # before this thread looks for its next run: a fallback due is never left behind
                        due = _fallbacks_due(certification, planned, ran, on_run)
                    for fallback in due:
                        pending.put(fallback)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            failures.append(exc)

    threads = [threading.Thread(target=work, name=f"certify-job-{index + 1}", daemon=True) for index in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # joined in steps: Ctrl-C reaches the main thread while the jobs run
            thread.join(0.5)
    if failures:
        raise failures[0]


def _in_order(certification: Certification) -> list[PlannedRun]:
    """The runs this certification makes, fewest brokers first (a stack is started again only between kinds); a run
    whose host runs here waits for it (:func:`_fallbacks_due`)."""
    here = [planned for planned in sorted(certification.runs, key=lambda run: run.brokers)
            if (planned.connector, planned.name) not in certification.skipped_runs
            and (planned.connector, planned.name) not in certification.elsewhere]
    hosts = {id(planned): host_of(certification.runs, planned) for planned in here}
    return [planned for planned in here if not any(run is hosts[id(planned)] for run in here)]


def _fallbacks_due(certification: Certification, host: PlannedRun, ran: JudgedRun | None,
                   on_run) -> list[PlannedRun]:
    """The runs planned ``host`` stood in for that must run after all: every one when it could not run on this
    stack (``ran`` None: they get their own chance, or their own reason to be skipped), else those whose
    requirements it did not all pass (a finding there may be the host's own; an undecided check gets the connector
    its own run). Each spared one is said to ``on_run`` (``"spared"``)."""
    if ran is None:
        return hosted_runs(certification.runs, host)
    due = []
    for hosted in hosted_runs(certification.runs, host):
        connector = certification.connectors[hosted.connector]
        judged_here = {req.id for req in certification.requirements_of(connector) if req.id in connector.claims}
        verdicts = [judge(_Subject(connector.name), requirement(req_id), [ran]).verdict for req_id in hosted.judges
                    if req_id in judged_here]
        if all(verdict == "pass" for verdict in verdicts):
            if on_run:
                on_run("spared", hosted, None)
        else:
            due.append(hosted)
    return due


def _run_all(certification: Certification, stacks: _Stacks, out: Path, judged: list[JudgedRun],
             result: CertificationResult, on_run) -> None:
    order = _in_order(certification)
    index = 0
    while index < len(order):
        ran = _run_one(certification, stacks, order[index], out, judged, result, on_run, None,
                       _queries_after(order, index), _next_query(order, index))
        order[index + 1:index + 1] = _fallbacks_due(certification, order[index], ran, on_run)
        index += 1


def _poolable_after(order: list[PlannedRun], index: int) -> list[PlannedRun]:
    """The runs after ``order[index]`` on its stack (the same brokers) that a warm driver of the stack's pool can
    serve: query runs whose master runs tasks in the driver (an options probe or an acknowledged-writes run starts
    no driver, a zombie run's cluster or a standalone run's executors are JVMs of their own: a child asked for them
    would wait unused)."""
    return [later for later in order[index + 1:] if later.brokers == order[index].brokers
            and later.procedure == "query" and runs_in_driver(later.scenario.master)]


def _queries_after(order: list[PlannedRun], index: int) -> int:
    """How many runs after ``order[index]`` a warm driver of its stack's pool can serve (:func:`_poolable_after`)."""
    return len(_poolable_after(order, index))


def _next_query(order: list[PlannedRun], index: int) -> PlannedRun | None:
    """The first run after ``order[index]`` that a warm driver can serve: the run whose driver the pool readies."""
    return next(iter(_poolable_after(order, index)), None)


def _run_one(certification: Certification, stacks: _Stacks, planned: PlannedRun, out: Path, judged: list[JudgedRun],
             result: CertificationResult, on_run, lock: threading.Lock | None, following: int | None = None,
             upcoming: PlannedRun | None = None) -> JudgedRun | None:
    """One planned run on ``stacks``, judged into ``result`` (under ``lock`` when jobs share it); ``following``:
    the runs after it on the same stack (None: not known), ``upcoming`` the next of them that starts a driver (None:
    not known), for the stack's pool of warm drivers. The judged run, None when this stack cannot have it."""
    from streamcert.harness.scenario import driver_session, run_scenario

    guard = lock if lock is not None else contextlib.nullcontext()
    reason = stacks.cannot_start(planned.brokers)
    if reason is not None:
        with guard:
            certification.skipped_runs[(planned.connector, planned.name)] = reason
        return None
    env = stacks(planned.brokers)
    connector = certification.connectors.get(planned.connector)
    folder = out / "runs" / _slug(connector.name if connector else planned.connector) / planned.name
    if on_run:
        with guard:
            on_run("start", planned, None)
    pool = stacks.pool(env)
    if pool is not None:
        pool.runs_left = following
        pool.upcoming = driver_session(upcoming.scenario) if upcoming is not None else None
    run_result = run_scenario(env, planned.scenario, folder, driver_pool=pool)
    if planned.procedure == "query":
        _keep_leftovers(folder, _probe(run_result, env, load_connector(planned.scenario.sink, "sink")))
    evidence = evidence_of(planned, run_result, folder, connector)
    ran = JudgedRun(planned, run_result, evidence, folder.relative_to(out))
    with guard:
        judged.append(ran)
        result.runs.append(RunSummary(
            connector=connector.name if connector else planned.connector, scenario=planned.name,
            judges=list(planned.judges), also_judges={certification.connectors[other].name: list(ids)
                                                      for other, ids in planned.also_judges},
            folder=str(folder.relative_to(out)), seed=run_result.seed, complete=run_result.complete,
            valid=run_result.valid, duration_s=run_result.duration_s, driver_attempts=run_result.driver_attempts,
            faults=sum(1 for e in run_result.history if e["kind"] == "fault-start"),
            error=(run_result.error or "").splitlines()[0] if run_result.error else None,
            coverage=_coverage(run_result), strike_coverage=_strike_coverage(run_result)))
        result.verdicts = _verdicts(certification, judged)
        result.capabilities = _capabilities(certification, result.verdicts)
        result.save(out / "results.json")
        if on_run:
            on_run("done", planned, run_result)
    return ran


def evidence_of(planned: PlannedRun, run_result: RunResult, folder: Path, connector: Connector | None) -> RunEvidence:
    """What the verdicts read of a finished run, from its result and its folder alone (a merge of shards reads
    them back this way): a probe's outcomes, or the run's history, output, driver events and kept leftovers."""
    if planned.procedure == "acked_writes":
        return RunEvidence(run_result.history, [], {}, {}, acked_writes=run_result.metrics.get("acked_writes"))
    if planned.procedure == "options_probe":
        return RunEvidence(run_result.history, [], {}, {}, option_cases=run_result.metrics.get("option_cases"))
    sink = load_connector(planned.scenario.sink, "sink")
    kill_points = {**sink.kill_points, **(connector.kill_points if connector is not None else {})}
    return RunEvidence.of_run(run_result, folder, kill_points, _kept_leftovers(folder))


#: The leftover probe's check, kept in the run's folder (it looks at the live system: it cannot be run again).
_LEFTOVERS_FILE = "leftovers.json"


def _keep_leftovers(folder: Path, check: CheckResult | None) -> None:
    if check is not None:
        (folder / _LEFTOVERS_FILE).write_text(json.dumps(check.to_dict(), indent=2))


def _kept_leftovers(folder: Path) -> CheckResult | None:
    path = folder / _LEFTOVERS_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return CheckResult(data["name"], data["valid"], data.get("counts") or {}, data.get("violations") or [],
                       data.get("error"), data.get("data") or {})


def _skipped_list(certification: Certification) -> list[dict[str, str]]:
    names = {ref: connector.name for ref, connector in certification.connectors.items()}
    return [{"connector": names.get(ref, ref), "scenario": run, "reason": why}
            for (ref, run), why in sorted(certification.skipped_runs.items())]


def _probe(run_result: RunResult, env: Any, sink: Any):
    """The leftovers check of a run's output, asked of the sink's system (the stack's or its own)."""
    if not run_result.complete or not run_result.output:
        return None
    at = stack_addresses(env, (run_result.context or {}).get("bootstrap_servers"), since=run_result.started_at)
    system = output_system_of(sink, at)
    return probe_system_leftovers(system, run_result.output["name"], addresses(env, system)[0])


def _capabilities(certification: Certification, verdicts: list[Verdict]) -> dict[str, Any]:
    return capability_verdicts({c.name: (c.kind, c.claims) for c in certification.connectors.values()}, verdicts)


def verdicts_of(certification: Certification, judged: list[JudgedRun]) -> tuple[list[Verdict], dict[str, Any]]:
    """The verdicts of ``certification`` from its ``judged`` runs, and the capabilities they back."""
    verdicts = _verdicts(certification, judged)
    return verdicts, _capabilities(certification, verdicts)


def _verdicts(certification: Certification, judged: list[JudgedRun]) -> list[Verdict]:
    verdicts = []
    for reference, connector in certification.connectors.items():
        runs = [run for run in judged if run.planned.connector == reference]
        runs += _stand_ins(certification, reference, judged, runs)
        full = certification.full_plan.get(reference, set())
        for req in certification.requirements_of(connector):
            if req.id not in connector.claims:
                verdicts.append(skipped(connector, req))
                continue
            verdicts.append(_judged(certification, reference, connector.name, req, runs, req.id in full))
    cluster = [_judged(certification, CLUSTER_SUBJECT, CLUSTER_SUBJECT, requirement(req_id),
                       [run for run in judged if run.planned.connector == CLUSTER_SUBJECT], True)
               for req_id in certification.cluster_requirements()]
    return _failover_preconditions(verdicts, cluster, judged, certification) + cluster


def _stand_ins(certification: Certification, reference: str, judged: list[JudgedRun],
               own: list[JudgedRun]) -> list[JudgedRun]:
    """For each run of ``reference``'s plan that another connector's run hosts (:mod:`~streamcert.conformance.
    sharing`) and that did not run itself: the host's run, judged as that run (its evidence, its folder)."""
    ran = {run.planned.name for run in own}
    found = []
    for planned in certification.runs:
        if planned.connector != reference or planned.hosted_by is None or planned.name in ran:
            continue
        host = next((run for run in judged if run.planned.connector == planned.hosted_by
                     and run.planned.name == planned.name), None)
        if host is not None:
            found.append(dataclasses.replace(host, planned=planned,
                                             host=certification.connectors[planned.hosted_by].name))
    return found


def _judged(certification: Certification, reference: str, name: str, req: Requirement, runs: list[JudgedRun],
            in_full_plan: bool) -> Verdict:
    """The verdict of a claimed requirement from its runs; the runs this stack could not have are said so."""
    mine = [run for run in runs if req.id in run.planned.judges]
    planned = [run for run in certification.runs if run.connector == reference and req.id in run.judges]
    skipped_here = {run.name: certification.skipped_runs[(reference, run.name)] for run in planned
                    if (reference, run.name) in certification.skipped_runs}
    elsewhere = {run.name: certification.elsewhere[(reference, run.name)] for run in planned
                 if (reference, run.name) in certification.elsewhere}
    if planned and len(skipped_here) == len(planned):
        verdict = Verdict(connector=name, requirement=req.id, verdict="skip",
                          reason="; ".join(f"{run}: {why}" for run, why in skipped_here.items()))
    else:
        # in_full_plan only when the quick plan has no run of it: one whose runs are all in other shards is not that
        verdict = judge(_Subject(name), req, mine, len(planned) - len(skipped_here) - len(elsewhere),
                        in_full_plan=in_full_plan and not planned)
        if elsewhere and verdict.verdict != "fail":  # a finding here stands; a pass needs the other shards' runs
            where = "; ".join(f"{run} in shard {shard}" for run, shard in elsewhere.items())
            verdict.evidence["elsewhere"] = elsewhere
            verdict.evidence["here"] = verdict.verdict if mine else None
            verdict.reason = (f"its runs are in other shards too ({where}): `streamcert merge` the shards' results "
                              "for its verdict" + (f"; here: {verdict.verdict}, {verdict.reason}" if mine else ""))
            verdict.verdict = "unknown"
        if skipped_here:
            verdict.reason += " (not run here: " + "; ".join(f"{run}: {why}" for run, why in skipped_here.items()) + ")"
            verdict.evidence["skipped_runs"] = skipped_here
        _said_shared(verdict, req, [run for run in mine if run.host is not None])
    verdict.evidence["replay"] = replay_command(reference, req.id, certification.seed, certification.quick,
                                                certification.cooperative, certification.fail_fast,
                                                _host_requirement(certification, mine))
    return verdict


def _host_requirement(certification: Certification, runs: list[JudgedRun]) -> tuple[str, str] | None:
    """(host reference, a requirement its shared run judges for it) of the first stand-in among ``runs``: what a
    replay certifies beside the connector so that the same shared run is planned."""
    for run in runs:
        if run.host is None:
            continue
        host = host_of(certification.runs, run.planned)
        return host.connector, next(req for req in host.judges
                                    if req in certification.connectors[host.connector].claims)
    return None


def _said_shared(verdict: Verdict, req: Requirement, stand_ins: list[JudgedRun]) -> None:
    """Name the other connector's runs a verdict was judged on. A requirement they did not pass is ``unknown`` until
    the connector's own run judges it (that run comes right after its host, unless the certification stopped): a
    finding there may be the host's own."""
    if not stand_ins:
        return
    shared = ", ".join(f"{run.planned.name} of {run.host}" for run in stand_ins)
    verdict.evidence["shared_runs"] = {run.planned.name: run.host for run in stand_ins}
    if verdict.verdict == "pass":
        verdict.reason += f" (shared: {shared}, which reads through this connector)"
    elif judge(_Subject(verdict.connector), req, stand_ins).verdict != "pass":
        verdict.verdict = "unknown"
        verdict.reason = (f"judged on {shared} (shared), which did not pass it; this connector's own run decides, "
                          f"and it has not run: {verdict.reason}")


@dataclass(frozen=True)
class _Subject:
    name: str


def _failover_preconditions(verdicts: list[Verdict], cluster: list[Verdict], judged: list[JudgedRun],
                            certification: Certification) -> list[Verdict]:
    """A connector that failed only on the 3-broker cluster, whose own BRK-1 run did not pass, is unknown: the loss
    cannot be told apart from the cluster's."""
    precondition = next((v for v in cluster if v.requirement == "BRK-1"), None)
    if precondition is None or precondition.verdict == "pass":
        return verdicts
    by_name = {connector.name: ref for ref, connector in certification.connectors.items()}
    for verdict in verdicts:
        if verdict.verdict != "fail":
            continue
        reference = by_name.get(verdict.connector)
        runs = [run for run in judged if run.planned.connector == reference and verdict.requirement in
                run.planned.judges]
        if not any(run.planned.brokers > 1 for run in runs):
            continue
        single = [run for run in runs if run.planned.brokers == 1]
        if single and judge(_Subject(verdict.connector), requirement(verdict.requirement), single).verdict == "fail":
            continue
        verdict.verdict = "unknown"
        verdict.reason = (f"failed only on the 3-broker cluster, whose own BRK-1 run ({precondition.verdict}: "
                          f"{precondition.reason}) does not show that it keeps what it acknowledged: "
                          + verdict.reason)
    return verdicts


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name) or "connector"
