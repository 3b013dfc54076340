"""The scenarios a certification runs for one connector, and the requirements each run's evidence decides.

A connector is certified on a small set of runs per kind, Jepsen style: each run carries several faults and its
history judges many requirements at once. A source under test is read into Spark's file sink (exactly-once, no
cooperation needed); a sink under test is fed by the reference Kafka source; an aggregator sits between the
reference source and the reference Kafka 2PC sink.

The faults never rely on the connector's cooperation: a kill run kills the driver at every moment of the batch
lifecycle the query is observed in (planning, reading, read done, writing, commit in flight, just committed: see
:mod:`~streamcert.harness.faults.moments`), in the first batch after a start, in steady batches and in a replay of a
replay, with the connector's own link slowed by a seeded latency toxic so that a multi-step commit's steps are wide
apart; Python workers are killed while they run a task. The connector's own fault points (``kill_points``,
``fail_points``) come on top in the full plan, unless it is made without them (``cooperative`` false); the quick plan
leaves them out. Every choice is drawn from
``random.Random(f"{seed}:{connector}:{scenario}")``: the same seed gives the same schedules, byte for byte.

Called in the harness's process by :func:`streamcert.conformance.certify.certify` before any run starts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from streamcert.conformance.catalogue import ids_for, requirements
from streamcert.harness.faults.at_moment import CUTS
from streamcert.harness.faults.moments import TASK_MOMENTS
from streamcert.harness.stack.spark import runs_in_driver
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.faults.zombie import ZOMBIE_SPARK_CONF
from streamcert.harness.run.query_status import MOMENTS, WRITING_MOMENTS
from streamcert.harness.run.workload import WorkloadSpec
from streamcert.harness.acked_writes import AckedWrites
from streamcert.harness.options_probe import OptionsProbe
from streamcert.harness.scenario import Scenario
from streamcert.spi.connector import DRIFT_OPTION
from streamcert.harness.stack.kafka_clients import TopicSettings
from streamcert.harness.systems import KafkaTopics, StackSystem, declared_input_system, declared_output_system
from streamcert.spi.connector import Connector

__all__ = ["PlannedRun", "SOURCE_PARTNER", "SINK_PARTNER", "ACKED_WRITES", "SAFE_TOPICS", "plan",
           "cluster_runs", "judged_by"]

#: The exactly-once sink a source under test writes into.
SINK_PARTNER = "spark-files"
#: The source that feeds a sink or an aggregator under test.
SOURCE_PARTNER = "streamcert-kafka"
#: The exactly-once sink behind an aggregator under test.
AGGREGATOR_SINK = "streamcert-kafka-2pc"

#: Seconds of silence after which a run stops waiting for missing records and judges what arrived: a restarted
#: driver on a loaded machine may show nothing for a minute; a run without restarts needs less.
_QUIET_S = 90.0
_QUIET_NO_RESTART_S = 45.0


@dataclass(frozen=True)
class PlannedRun:
    """One scenario of a certification: what it runs and which requirements its evidence decides (those whose
    catalogue entry names the run: :attr:`~streamcert.conformance.catalogue.Requirement.runs`)."""

    connector: str
    name: str
    judges: tuple[str, ...]
    #: what it runs, through the one scenario runner: the query, or (its ``procedure``) GEN-2's option probe on the
    #: query, or seed 003's producer on the cluster itself (:data:`ACKED_WRITES` gives its settings)
    scenario: Scenario
    #: Kafka brokers of the stack it runs on: 1, or 3 for the leader-failover runs (replication factor 3, min ISR 2)
    brokers: int = 1
    #: other connectors' requirements its evidence decides too, as (connector reference, requirement IDs): a sink's
    #: run that reads through a source under test (:mod:`~streamcert.conformance.sharing`)
    also_judges: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the connector whose run of the same name judges this run's requirements first: this one runs only when that
    #: one did not pass them all (None: it always runs)
    hosted_by: str | None = None

    @property
    def procedure(self) -> str:
        """``query``, ``options_probe`` or ``acked_writes``."""
        return self.scenario.procedure.kind if self.scenario.procedure is not None else "query"


#: Records per second of a failover run's input: 2,400 records arrive over 80 s, through all three failover faults
#: (about 30 s with their gaps); as fast as possible, a source read everything before the second one struck.
_FAILOVER_RATE = 30.0


#: Seed 003's safe settings, spelled out in the failover scenarios (they are also the 3-broker cluster's defaults)
SAFE_TOPICS = TopicSettings(replication_factor=3, min_insync_replicas=2, unclean_leader_election=False)


def _failover(rng: random.Random) -> list[FaultSpec]:
    """Seed 003's faults on a 3-broker cluster: the input's partition leader killed while a steady batch's tasks run
    with one of the query's requests in flight (a source's fetches; a sink's writes, in the same stage), then the
    new leader cut off from its peers, then the active controller killed; each picked when it strikes and proven by
    metadata (else the verdict is unknown). The same faults for a source and a sink: a sink's failover run reading
    through the source judges the source too."""
    return _chain([("node_moment", "kafka", {"moment": "reading", "action": "node_kill", "slow_link": "kafka",
                                             "slow_streams": "downstream", "latency_ms": rng.randrange(*_CUT_SLOW_MS),
                                             "fraction": round(rng.uniform(0.2, 0.8), 3)},
                    round(rng.uniform(4.0, 6.0), 3)),
                   ("node_isolate", "kafka", {"node": "leader"}, round(rng.uniform(8.0, 10.0), 3)),
                   ("node_kill", "kafka", {"node": "controller"}, round(rng.uniform(3.0, 5.0), 3))], gap_s=3.0)


def _judges(kind: str, run: str) -> tuple[str, ...]:
    """The requirements (of ``kind`` and the general ones) whose catalogue entry names ``run`` among its runs."""
    return tuple(req.id for req in requirements(kind) if run in req.runs)


def _planned(reference: str, connector: Connector, name: str, scenario: Scenario, **settings) -> PlannedRun:
    """The run ``name`` of ``connector``'s plan, judging what the catalogue says it judges."""
    return PlannedRun(reference, name, _judges(connector.kind, name), _with_standby(scenario), **settings)


def _with_standby(scenario: Scenario) -> Scenario:
    """A run whose faults restart the driver on a local master keeps its next attempt warm (measured on the source's
    kill run: 135 s -> 118 s, a restart's query built in 0.5-1 s rather than 2.5-3.5 s, its first batch's addBatch
    1.3-1.6 s rather than 2.6-3.9 s); the others have nothing to gain from a second JVM."""
    if scenario.procedure is not None or not any(spec.target == "driver" for spec in scenario.schedule):
        return scenario
    return scenario.model_copy(update={"warm_standby": True}) if runs_in_driver(scenario.master) else scenario


def _rng(seed: int, connector: Connector, scenario: str) -> random.Random:
    return random.Random(f"{seed}:{connector.name}:{scenario}")


def _chain(entries: list[tuple[str, str, dict, float]], first_at: float = 0.0, gap_s: float = 2.0) -> list[FaultSpec]:
    """Faults one after the other: each starts ``gap_s`` after the previous one stopped (the driver restarted)."""
    specs = []
    for index, (fault, target, params, duration) in enumerate(entries):
        after = index - 1 if index else None
        specs.append(FaultSpec(fault, target, first_at if index == 0 else gap_s, duration, params, after=after))
    return specs


def _workload(rng: random.Random, total: int, **changes) -> WorkloadSpec:
    return WorkloadSpec(**{"total": total, "keys": 24, "partitions": 3, "aborted_fraction": 0.1,
                           "transaction_records": 50, "seed": rng.randrange(1 << 30), **changes})


#: Moments after which the batch is still pending: a kill there makes the next attempt replay it.
_BEFORE_COMMIT = MOMENTS[:-1]
#: The moments a kill run plans when the sink's commit cannot be slowed (no link of its own: Spark's file sink, into
#: which a source under test writes): its commit takes a few milliseconds inside the driver, after the job ended and
#: before Spark's status shows it ended, so no look can land in it (nor between its output and ``commits/N``). A
#: source's own step there is its ``commit(end)``, after ``commits/N``: ``just_committed`` covers it.
_FAST_COMMIT_MOMENTS = tuple(m for m in MOMENTS if m not in ("commit_in_flight", "output_visible"))


def _moments_for(link: str | None) -> tuple[str, ...]:
    """The moments a kill run of a pipeline whose sink commits over ``link`` (None: no link to slow) plans."""
    return MOMENTS if link is not None else _FAST_COMMIT_MOMENTS


def _moment_kills(rng: random.Random, quick: bool, moments: tuple[str, ...] = MOMENTS) -> list:
    """Driver kills timed by observed moments, so that every cell of the run's grid is planned: every moment in a
    ``steady`` batch and in an attempt's ``first`` batch (the quick plan: every moment once, the class drawn), and
    replays of a replay (two; one in the quick plan). Each strikes a seeded fraction into its moment.

    Order makes the replays cheap: a steady kill before the commit leaves its batch pending, the next attempt's
    first batch replays it and is killed before its commit too, and the attempt after that starts with a replay of a
    replay."""
    steady = rng.sample(moments, len(moments))
    first = rng.sample(moments, len(moments))
    if quick:
        classes = [rng.choice(("first", "steady")) for _ in moments]
        pairs = [(moment, batch_class) for moment, batch_class in zip(steady, classes, strict=True)]
        replays = 1
    else:
        pairs = [cell for both in zip([(m, "steady") for m in steady], [(m, "first") for m in first], strict=True)
                 for cell in both]
        replays = 2
    cells = list(pairs)
    for _ in range(replays):  # after a (pending, then replayed and killed pending) pair, or else at the end
        at = next((i + 2 for i in range(len(cells) - 1) if cells[i][0] in _BEFORE_COMMIT and cells[i][1] == "steady"
                   and cells[i + 1][0] in _BEFORE_COMMIT and cells[i + 1][1] == "first"
                   and (i + 2 >= len(cells) or cells[i + 2][1] != "replay_of_replay")), len(cells))
        cells.insert(at, (rng.choice(moments), "replay_of_replay"))
    # a driver-side commit is several steps, and a bug lives between two of them: steady kills inside it strike
    # early, in the middle and late (one band each; two in the quick plan), not wherever one draw falls
    bands = _QUICK_COMMIT_BANDS if quick else _COMMIT_BANDS
    if _COMMIT_MOMENT in moments:
        cells += [(_COMMIT_MOMENT, "steady")] * (len(bands) - sum(1 for cell in cells
                                                                  if cell == (_COMMIT_MOMENT, "steady")))
    in_commit = iter(bands)
    # each steady kill strikes a seeded fraction into its moment (one that missed tries the next batch); a first
    # batch is one chance per attempt (a miss costs a restart): it strikes as soon as the moment shows (a fraction
    # of a length learnt on steady batches missed a restarted query's short planning moment six attempts running)
    kills = []
    for moment, batch_class in cells:
        band = next(in_commit) if (moment, batch_class) == (_COMMIT_MOMENT, "steady") else _FRACTIONS[batch_class]
        params = {"moment": moment, "batch_class": batch_class, "fraction": round(rng.uniform(*band), 3)}
        if band == bands[-1]:
            params["round_trips_before_end"] = _before_end(params["fraction"], band)
        kills.append(("driver_kill_moment", "driver", params, 0.0))
    return kills


def _before_end(fraction: float, band: tuple[float, float]) -> float:
    """How many round trips of the slowed link before the commit's end its late kill strikes: the band's draw read
    as a place in :data:`_ROUND_TRIPS_BEFORE_END` (no draw of its own, so the seed's later draws stay as they were)."""
    low, high = _ROUND_TRIPS_BEFORE_END
    return round(high - (fraction - band[0]) / (band[1] - band[0]) * (high - low), 2)


#: How deep into its moment a kill of each class of batch strikes, as a fraction of the moment's learnt length.
_FRACTIONS = {"steady": (0.0, 0.9), "first": (0.0, 0.0), "replay_of_replay": (0.0, 0.0)}
#: The moment a driver-side commit runs in, and the bands its steady kills strike in (early, middle, late).
_COMMIT_MOMENT = "commit_in_flight"
_COMMIT_BANDS = ((0.05, 0.35), (0.35, 0.65), (0.65, 0.95))
_QUICK_COMMIT_BANDS = ((0.05, 0.5), (0.5, 0.95))
#: Where the late commit kill strikes with the link slowed, in round trips before the commit's end: a decision
#: recorded in a step of its own (one round trip) just before the step that commits the rows (one more) is a bug
#: from the record's request until the commit's request leaves, one to two round trips before the end plus the
#: little Spark does after the sink's commit returns; a request sent before the kill still arrives (the proxy
#: holds it). The commit's length varied 2.5-3.1 s from batch to batch on a 69-ms link (an idempotent
#: producer's first connection): a late fraction of the median length struck past the last step of the short ones.
_ROUND_TRIPS_BEFORE_END = (1.25, 2.25)


def _point_kills(rng: random.Random, kill_points: dict[str, str]) -> list:
    """The connector's (or its partner sink's) own kill points, a bonus on top of the observed moments: every one."""
    window = sorted(point for point, moment in kill_points.items() if moment == "window")
    points = sorted(point for point, moment in kill_points.items() if moment == "committing")
    if window:
        rng.choice(window)  # drawn as when the quick plan struck one: the draws after it stay those of earlier plans
    return [("driver_kill_at", "driver", {"point": point}, 0.0) for point in points + window]


def _kills(rng: random.Random, quick: bool, kill_points: dict[str, str], cooperative: bool,
           moments: tuple[str, ...] = MOMENTS, held: tuple[str, ...] = ()) -> list:
    """A kill run's chain: the moment grid, the kills with a checkpoint log held (``held``: ``offsets`` in a source's
    run, ``commits`` in an aggregator's, both in a sink's, which hosts a source's run: :mod:`.sharing`),
    then (``cooperative``, the full plan) the connector's kill points. The
    quick plan, a gate, leaves them out: a verdict never rests on them (SPEC §8), and each cost a restart (five of
    the quick plan's 48 driver attempts, ~40 s)."""
    kills = _moment_kills(rng, quick, moments) + _held_kills(quick, held)
    points = _point_kills(rng, kill_points) if cooperative else []
    return kills + ([] if quick else points)


def _held_kills(quick: bool, logs: tuple[str, ...]) -> list:
    """Kills with Spark's write of a log's N held open (:mod:`~streamcert.harness.faults.held_kill`), for each of
    ``logs``: ``commits`` (the sink's commit returned, the batch not logged) in a steady batch and (the full plan) an
    attempt's first; ``offsets`` (the batch planned, not logged) in a steady batch of the full plan (the quick plan's
    planning kills cover that moment; a restart costs a gate). No draw of the seed: the rest of the plan stays as it
    was."""
    classes = {"commits": ("steady",) if quick else ("steady", "first"), "offsets": () if quick else ("steady",)}
    return [("driver_kill_log_held", "driver", {"log": log, "batch_class": batch_class}, 0.0)
            for log in logs for batch_class in classes[log]]


#: Milliseconds of latency (each way) a kill aimed inside a write or a commit puts on the connector's own link while
#: it watches its batch: the steps of a multi-step commit become a round trip (100-200 ms) or more apart, wide enough
#: for a look at the query to land between them, and the output shows a commit before the driver hears of it.
_SLOW_LINK_MS = (50, 100)
#: The moments whose kills strike with the link slowed: a task's write steps, a driver-side commit's steps.
_SLOWED_MOMENTS = (*WRITING_MOMENTS, "output_visible")


def _slowed(rng: random.Random, link: str | None, kills: list) -> list[FaultSpec]:
    """The kill chain; each kill aimed inside a write or a commit (:data:`_SLOWED_MOMENTS`) slows ``link`` while it
    watches its batch, by one seeded latency for the whole run: a moment's length learnt under it by one kill aims
    the next ones."""
    if link is None:
        return _at_once(_chain(kills))
    slow = {"slow_link": link, "latency_ms": rng.randrange(*_SLOW_LINK_MS)}
    slowed = []
    for fault, target, params, duration in kills:
        if fault == "driver_kill_moment" and params["moment"] in _SLOWED_MOMENTS:
            params = {**params, **slow}
        slowed.append((fault, target, params, duration))
    return _at_once(_chain(slowed))


def _at_once(chain: list[FaultSpec]) -> list[FaultSpec]:
    """The chain, with each kill aimed at an attempt's first batch (or a replay of a replay) watching as soon as the
    kill before it restarted the driver: a restart from a warm standby plans and commits its first batch within the
    two seconds the chain leaves between faults, and a first batch passed unstruck costs a positioning kill (four in
    PostgreSQL 2PC's full kill run, when measured)."""
    return [spec.model_copy(update={"at_s": 0.0})
            if spec.after is not None and spec.fault in ("driver_kill_moment", "driver_kill_log_held")
            and spec.params.get("batch_class") in ("first", "replay_of_replay") else spec
            for spec in chain]


#: Milliseconds of latency a task kill puts on the answers of the sink's link (its requests go at once): a task's
#: last step (its prepare, its staged records' acks) is done on the server this long before the task hears of it.
_TASK_SLOW_MS = (150, 250)
#: How far into a steady batch's ``writing`` moment a task kill aimed at its last step strikes.
_TASK_END = (0.6, 0.97)


def _task_kills(rng: random.Random, quick: bool, link: str | None) -> list:
    """Python workers killed in steady batches: one when the output grows while the batch's tasks run (a sink whose
    tasks make rows visible; a correct one never shows that moment, and the kill says it was absent), one at a task
    moment drawn by the seed (the rows read, or being written), then several late in the ``writing`` moment, aimed at
    the task's last step: a failed attempt leaves behind only what a step that finished on the server did (two in the
    quick plan, three in the full one). Each slows the sink's link's answers (:data:`_TASK_SLOW_MS`), which widens
    that step to a whole latency."""
    slow = ({"slow_link": link, "slow_streams": "downstream", "latency_ms": rng.randrange(*_TASK_SLOW_MS)}
            if link else {})
    early = [{"moment": "output_visible", "fraction": 0.0, "tries": 4},
             {"moment": rng.choice([m for m in TASK_MOMENTS if m != "output_visible"]), "fraction": 0.0}]
    late = [{"moment": "writing", "fraction": round(rng.uniform(*_TASK_END), 3)} for _ in range(2 if quick else 3)]
    return [("python_worker_kill_moment", "executor", {**params, **slow}, 0.0) for params in early + late]


#: Batches of input a fault run's feed keeps ahead of what its query read (:attr:`Scenario.feed_batches_ahead`): a
#: steady kill lets a restarted attempt commit four batches before it strikes, and none of them may be empty. The
#: workload sizes below are then upper bounds: the input ends two batches after the last fault, not with them.
_FEED_AHEAD = 6


def _kill_records(batch: int, kills: list) -> int:
    """Enough input for every kill to strike its batch and a few batches after the last one: a steady kill lets its
    attempt commit its first batch and three more before it strikes (a few more when a moment was missed), a first
    batch kill at most one."""
    steady = sum(1 for kill in kills if (kill[2] or {}).get("batch_class") == "steady")
    return batch * (6 * steady + 2 * (len(kills) - steady) + 6)


def _task_kill_records(batch: int, fails: list) -> int:
    """Three batches before a batch is steady, then per task kill the batches it watches (``tries`` + 1 for one
    whose moment may be absent; else the batch it learns its moment on, the one it strikes and three spares), and a
    few batches after the last one."""
    watched = sum((params.get("tries", 4) + 1) for _fault, _target, params, _duration in fails)
    return batch * (3 + watched + 4)


#: Batches an executor kill spends: the one it learns its moment on, the one it strikes, spares for a late aim that
#: missed, the replacement executor's start-up.
_EXECUTOR_KILL_BATCHES = 8
#: Batches a zombie run commits before its first freeze: by then every executor has started its Python workers
#: (the first batches on a cold executor take seconds; a freeze then caught start-up, not a task's write).
_ZOMBIE_WARM_BATCHES = 3


def _zombie_records(batch: int, zombies: list) -> int:
    """A zombie spends about four batches (a missed try, the freeze until Spark gives up on the executor, the
    rerun); six per zombie, the warm-up batches and a few after the last one leave room for an unlucky run, and
    no long tail."""
    return batch * (6 * len(zombies) + _ZOMBIE_WARM_BATCHES + 6)


# -- sources -------------------------------------------------------------------------------------

#: Seconds the driver may stay frozen while the input gains a partition and the load writes into it (it writes within
#: a second of the growth here): the query finds the partition with records in it, whatever its discovery interval.
_GROWTH_FREEZE_S = 15.0
#: Seconds a growth or a rescale waits for the attempt it ends (one a rescale gave more tasks) to read input.
_READ_BEFORE_GROWTH_S = 60.0


def _source_runs(ref: str, connector: Connector, seed: int, quick: bool, cooperative: bool) -> list[PlannedRun]:
    runs = []
    rng = _rng(seed, connector, "baseline")
    runs.append(_planned(ref, connector, "baseline", Scenario(
        name=f"{connector.name}-baseline", source=ref, sink=SINK_PARTNER, parallelism=2,
        options={"max_records_per_batch": 250}, workload=_workload(rng, 2000, aborted_fraction=0.2),
        quiet_timeout_s=_QUIET_NO_RESTART_S)))
    rng = _rng(seed, connector, "bounded")
    runs.append(_planned(ref, connector, "bounded", Scenario(
        name=f"{connector.name}-bounded", source=ref, sink=SINK_PARTNER, parallelism=2, trigger="available_now",
        options={"max_records_per_batch": 300}, workload=_workload(rng, 2000), load_before_start=True,
        records_after_start=300, quiet_timeout_s=_QUIET_NO_RESTART_S)))
    rng = _rng(seed, connector, "driver-kills")
    kills = _kills(rng, quick, dict(connector.kill_points), cooperative, _moments_for(None), held=("offsets",))
    runs.append(_planned(ref, connector, "driver-kills", Scenario(
        name=f"{connector.name}-kills", source=ref, sink=SINK_PARTNER, parallelism=2,
        options={"max_records_per_batch": 60}, workload=_workload(rng, _kill_records(60, kills)),
        feed_batches_ahead=_FEED_AHEAD,
        schedule=_slowed(rng, _source_link(connector), kills), faults_after_output=1, quiet_timeout_s=_QUIET_S)))
    if quick:
        return runs
    kafka_input = isinstance(declared_input_system(connector), KafkaTopics)
    if kafka_input:
        runs.append(_skew_run(ref, connector, seed))
    rng = _rng(seed, connector, "rescale")
    # a topic gains a partition between the rescales, and the workload's tail is written into it once it exists
    # (SRC-5's witness: records of a partition added mid-run read back); another system's input keeps its layout
    workload = _workload(rng, 2400, added_partitions=1 if kafka_input else 0)
    # the attempt raised to 5 reader tasks over 3 partitions reads before the growth (SRC-10's idle reader tasks)
    grow = [("add_partitions", "kafka", {"count": workload.final_partitions, "freeze_driver_s": _GROWTH_FREEZE_S,
                                         "after_input_read_s": _READ_BEFORE_GROWTH_S}, 0.0)] if kafka_input else []
    runs.append(_planned(ref, connector, "rescale", Scenario(
        name=f"{connector.name}-rescale", source=ref, sink=SINK_PARTNER, parallelism=2,
        options={"max_records_per_batch": 60}, workload=workload,
        schedule=_chain([("rescale", "driver", {"parallelism": 5}, 0.0), *grow,
                         ("rescale", "driver", {"parallelism": 1}, 0.0)], gap_s=4.0),
        faults_after_output=1, quiet_timeout_s=_QUIET_S)))
    runs += _network_runs(ref, connector, seed, "source", _workload, _source_link(connector),
                          _input_server_faults(connector), failover=kafka_input)
    return runs


#: SRC-11's skewed backlog: three partitions of records 20 s apart in event time, the last one two hours ahead of
#: the others (seed 001's "one partition far ahead"), fed while the query reads; the drift bound the source is asked
#: for, an eighth of the lead: the leading partition is held back for the others' first 315 records each, more than
#: the kill's batches read.
SKEW_STEP_MS = 20_000
SKEW_LEAD_MS = 2 * 3600 * 1000
SKEW_DRIFT_MS = 15 * 60 * 1000


def _skew_run(ref: str, connector: Connector, seed: int) -> PlannedRun:
    """SRC-11: the skewed backlog read with the alignment bound set (:data:`DRIFT_OPTION`), the driver killed once
    in a steady batch while the leading partition is still held back: the bound must hold across the restart. The
    input is fed as the query reads (a source that reads fast must still have batches for the kill to strike)."""
    rng = _rng(seed, connector, "skew")
    kill = ("driver_kill_moment", "driver", {"moment": "just_committed", "batch_class": "steady",
                                             "fraction": round(rng.uniform(0.1, 0.9), 3)}, 0.0)
    return _planned(ref, connector, "skew", Scenario(
        name=f"{connector.name}-skew", source=ref, sink=SINK_PARTNER, parallelism=2,
        options={"max_records_per_batch": 60, DRIFT_OPTION: SKEW_DRIFT_MS},
        workload=_workload(rng, 1500, partitions=3, event_time_step_ms=SKEW_STEP_MS, event_time_lead_ms=SKEW_LEAD_MS),
        feed_batches_ahead=_FEED_AHEAD, schedule=_chain([kill]), faults_after_output=1, quiet_timeout_s=_QUIET_S))


#: The moments a network run's cuts aim at, by the connector's side of the pipeline: a source's requests go out while
#: its tasks read and, between batches, while its driver asks for the next batch's end (``latestOffset`` runs after
#: ``commits/N`` and before ``offsets/N+1``: the ``just_committed`` moment; a simple reader reads there too); a sink's
#: while its tasks write and its driver commits.
_CUT_MOMENTS = {"source": ("reading", "just_committed"), "sink": ("writing", "commit_in_flight")}
#: The moment a server kill of the network run aims at, by side: a source's fetches, a sink's commit.
_SERVER_KILL_MOMENT = {"source": "reading", "sink": "commit_in_flight"}
#: The network toxics that slow a link rather than cut it: on the run's clock (they span many moments).
_SLOWDOWNS = ("latency", "bandwidth", "slow_close", "slicer")
#: Milliseconds of latency on a cut link's answers while its fault watches the batch it strikes: a request then waits
#: that long for its answer, so the cut finds one in flight (the server has done the work, the client not heard).
_CUT_SLOW_MS = (150, 400)


def _network_runs(ref: str, connector: Connector, seed: int, side: str, workload: Callable,
                  link: str | None, server_faults: list, failover: bool) -> list[PlannedRun]:
    """The network run (two seeded slowdowns on ``link``, then a cut of each kind drawn at each moment of
    :data:`_CUT_MOMENTS`, then ``server_faults``; none without a link) and, when ``failover`` (the connector's side
    of the pipeline is Kafka), the failover run on a 3-broker cluster. ``side`` places the connector (``source`` /
    ``sink``), ``workload`` makes each run's input."""
    pipeline = {"source": ref, "sink": SINK_PARTNER} if side == "source" else {"source": SOURCE_PARTNER, "sink": ref}
    runs = []
    if link is not None:
        rng = _rng(seed, connector, "network")
        faults = _slowdowns(rng, link, 2) + _cuts_at_moments(rng, link, _CUT_MOMENTS[side]) + server_faults
        runs.append(_planned(ref, connector, "network", Scenario(
            name=f"{connector.name}-network", **pipeline, parallelism=2,
            options={"max_records_per_batch": 100}, workload=workload(rng, _network_records(100, faults)),
            feed_batches_ahead=_FEED_AHEAD, schedule=_chain(faults, gap_s=2.0),
            faults_after_output=1, quiet_timeout_s=_QUIET_S)))
    if failover:
        rng = _rng(seed, connector, "failover")
        runs.append(_planned(ref, connector, "failover", Scenario(
            name=f"{connector.name}-failover", **pipeline, parallelism=2,
            options={"max_records_per_batch": 100}, workload=workload(rng, 2400, rate=_FAILOVER_RATE),
            schedule=_failover(rng), brokers=3, topics=SAFE_TOPICS,
            faults_after_output=1, quiet_timeout_s=_QUIET_S), brokers=3))
    return runs


def _network_records(batch: int, faults: list) -> int:
    """Input for the network run, more than its faults can use: it is fed while they run and stops with them
    (``feed_batches_ahead``), and a fault aimed at a moment that outlived the input would find no batch to strike.
    A query reads a batch in well under a second between faults, and a fault lasts seconds."""
    return batch * (10 + 15 * len(faults))


def _slowdowns(rng: random.Random, link: str, count: int) -> list:
    from streamcert.harness.faults.registry import kind

    return [(name, link, kind(name).random_params(rng), round(rng.uniform(2.0, 4.0), 2))
            for name in rng.sample(_SLOWDOWNS, count)]


def _cuts_at_moments(rng: random.Random, link: str, moments: tuple[str, ...]) -> list:
    """A cut of a seeded kind at each of ``moments`` of a steady batch, seeded how far into it, with the link's answers
    slowed while it watches (a request waits for its answer when the cut strikes)."""
    slow = {"slow_link": link, "slow_streams": "downstream", "latency_ms": rng.randrange(*_CUT_SLOW_MS)}
    cuts = rng.sample(CUTS, len(moments))
    return [("network_moment", link, {"moment": moment, "cut": cut, "cut_params": _cut_params(rng, cut),
                                      "fraction": round(rng.uniform(0.2, 0.8), 3), **slow},
             round(rng.uniform(1.0, 3.0), 2)) for moment, cut in zip(moments, cuts, strict=True)]


def _cut_params(rng: random.Random, cut: str) -> dict[str, int]:
    """A cut's Toxiproxy attributes: a reset at once or after a wait, data stopped (the connection left open or closed
    after a wait), a connection closed after a few bytes more."""
    if cut == "reset_peer":
        return {"timeout": rng.choice([0, 200])}
    if cut == "timeout":
        return {"timeout": rng.choice([0, 1000])}
    if cut == "limit_data":
        return {"bytes": rng.choice([64, 1024])}
    return {}


def _server_kill_params(server: str, side: str) -> dict:
    """A server kill at the moment of :data:`_SERVER_KILL_MOMENT`, the server's answers slowed while it watches."""
    return {"moment": _SERVER_KILL_MOMENT[side], "slow_link": server, "slow_streams": "downstream",
            "latency_ms": _CUT_SLOW_MS[0], "fraction": 0.5}


def _input_server_faults(connector: Connector) -> list:
    """What the source's network run does to the server it reads, after the toxics: the stack's broker restarted,
    paused, and killed while a batch reads; or the source's own system killed (restarted with it) and paused, as far
    as it takes them."""
    system = declared_input_system(connector)
    if isinstance(system, KafkaTopics):
        return [("broker_restart", "kafka", {}, 1.0), ("broker_pause", "kafka", {}, 3.0),
                ("server_kill_moment", "kafka", _server_kill_params("kafka", "source"), 2.0)]
    takes = system.faults()
    return ([("system_kill", system.name, {}, 2.0)] if "kill" in takes else []) + \
        ([("system_pause", system.name, {}, 3.0)] if "pause" in takes else [])


# -- sinks ---------------------------------------------------------------------------------------

def _source_link(connector: Connector) -> str | None:
    """The link the source reads over: its system's first endpoint (None: a folder, no link)."""
    names = declared_input_system(connector).endpoint_names
    return names[0] if names else None


def _sink_link(connector: Connector) -> str | None:
    """The link the sink commits over: its system's first endpoint (None: no link, a folder on the local
    filesystem)."""
    names = declared_output_system(connector).endpoint_names
    return names[0] if names else None


def _participant_restart(connector: Connector) -> list:
    """The restart of the system behind a sink's link (the stack's broker or database, then its kill while a batch
    commits; or the sink's own system when it takes a kill); none otherwise: the network run is then toxics only."""
    system = declared_output_system(connector)
    if isinstance(system, StackSystem):
        restart = [system.restart_fault] if system.restart_fault else []
        server = restart[0][1] if restart else None
        return restart + ([("server_kill_moment", server, _server_kill_params(server, "sink"), 2.0)]
                          if server in ("kafka", "postgres") else [])
    return [("system_kill", system.name, {}, 2.0)] if "kill" in system.faults() else []


def _sink_moments(connector: Connector) -> tuple[str, ...]:
    """The moments a sink's kills aim at: every one when it commits through a system of its own (a table's log, a
    server may take its time), else those its link's slowing makes reachable."""
    if isinstance(declared_output_system(connector), StackSystem):
        return _moments_for(_sink_link(connector))
    return MOMENTS


def _sink_runs(ref: str, connector: Connector, seed: int, quick: bool, cooperative: bool) -> list[PlannedRun]:
    runs = []
    rng = _rng(seed, connector, "baseline")
    runs.append(_planned(ref, connector, "baseline", Scenario(
        name=f"{connector.name}-baseline", source=SOURCE_PARTNER, sink=ref, parallelism=2,
        options={"max_records_per_batch": 250}, workload=_workload(rng, 2000, aborted_fraction=0.2),
        quiet_timeout_s=_QUIET_NO_RESTART_S)))
    rng = _rng(seed, connector, "driver-kills")
    kills = _kills(rng, quick, dict(connector.kill_points), cooperative, _sink_moments(connector),
                   held=("commits", "offsets"))
    runs.append(_planned(ref, connector, "driver-kills", Scenario(
        name=f"{connector.name}-kills", source=SOURCE_PARTNER, sink=ref, parallelism=2,
        options={"max_records_per_batch": 60}, workload=_workload(rng, _kill_records(60, kills)),
        feed_batches_ahead=_FEED_AHEAD,
        schedule=_slowed(rng, _sink_link(connector), kills), faults_after_output=1, quiet_timeout_s=_QUIET_S)))
    rng = _rng(seed, connector, "task-failures")
    fails = _task_kills(rng, quick, _sink_link(connector))
    fails += [("task_fail_at", "executor", {"point": point}, 1.0) for point in connector.fail_points
              if cooperative and not quick]  # a bonus the quick plan leaves out, as its kill points
    # Every fault may strike the same task: Spark must allow more attempts than there are faults, or the query
    # itself gives up (that would be the plan's doing, not the sink's).
    runs.append(_planned(ref, connector, "task-failures", Scenario(
        name=f"{connector.name}-tasks", source=SOURCE_PARTNER, sink=ref, parallelism=2,
        master=f"local[2,{len(fails) + 2}]",
        options={"max_records_per_batch": 100}, workload=_workload(rng, _task_kill_records(100, fails)),
        feed_batches_ahead=_FEED_AHEAD, schedule=_chain(fails, gap_s=1.0), faults_after_output=1,
        quiet_timeout_s=_QUIET_S)))
    rng = _rng(seed, connector, "zombies")
    zombies = [("task_zombie", "executor", {}, 0.0) for _ in range(2 if quick else 3)]
    # and an executor JVM killed late in a task's write: its attempt dies with its process (the run has executors)
    executor_kill = ("executor_kill_moment", "executor", {
        "moment": "writing", "fraction": round(rng.uniform(*_TASK_END), 3),
        **({"slow_link": _sink_link(connector), "slow_streams": "downstream",
            "latency_ms": rng.randrange(*_TASK_SLOW_MS)} if _sink_link(connector) else {})}, 0.0)
    runs.append(_planned(ref, connector, "zombies", Scenario(
        name=f"{connector.name}-zombies", source=SOURCE_PARTNER, sink=ref, parallelism=2,
        master="local-cluster[3,1,1024]", spark_conf=ZOMBIE_SPARK_CONF,
        options={"max_records_per_batch": 60},
        workload=_workload(rng, _zombie_records(60, zombies) + 60 * _EXECUTOR_KILL_BATCHES),
        feed_batches_ahead=_FEED_AHEAD, schedule=_chain([*zombies, executor_kill], gap_s=1.0),
        faults_after_output=60 * _ZOMBIE_WARM_BATCHES, quiet_timeout_s=_QUIET_S)))
    if quick:
        return runs
    link = _sink_link(connector)
    runs += _network_runs(ref, connector, seed, "sink", _workload, link, _participant_restart(connector),
                          failover=link == "kafka")
    rng = _rng(seed, connector, "rescale")
    runs.append(_planned(ref, connector, "rescale", Scenario(
        name=f"{connector.name}-rescale", source=SOURCE_PARTNER, sink=ref, parallelism=2,
        options={"max_records_per_batch": 60}, workload=_workload(rng, 2400),
        schedule=_chain([("rescale", "driver", {"parallelism": 3}, 0.0),
                         ("rescale", "driver", {"parallelism": 1, "after_input_read_s": _READ_BEFORE_GROWTH_S}, 0.0)],
                        gap_s=4.0),
        faults_after_output=1, quiet_timeout_s=_QUIET_S)))
    return runs


# -- aggregators ---------------------------------------------------------------------------------

def _aggregator_scenario(ref: str, connector: Connector, name: str, rng: random.Random, **settings) -> Scenario:
    """The query runs before any input (a stateful query's first batch is slow): load once it committed one."""
    options = {"max_records_per_batch": 5000, "max_batch_size": 40, "max_wait_ms": 2000, "key_groups": 8,
               **settings.pop("options", {})}
    settings = {"trigger": "500 milliseconds", "quiet_timeout_s": _QUIET_S, **settings}
    return Scenario(name=f"{connector.name}-{name}", source=SOURCE_PARTNER, aggregator=ref, sink=AGGREGATOR_SINK,
                    parallelism=2, master="local[2,2]", options=options, load_after_first_batch=True,
                    spark_conf={"spark.sql.shuffle.partitions": "4"},
                    workload=_workload(rng, settings.pop("total", 1200), keys=30, transaction_records=40,
                                       rate=settings.pop("workload_rate", None)),
                    **settings)


#: An aggregator's flush allowance past its declared wait in runs that restart the query. The downtime itself (fault
#: to the restarted query's first batch) and a backlog the query works through are measured and not counted
#: (:mod:`streamcert.harness.verify.downtime`, :mod:`streamcert.harness.run.arrival`); what is left is the first
#: trigger after a deadline and the batches that run while a restarted query warms up: at most 18 s in nine such
#: runs of three full certifications, one of them with a second job on the machine.
_RESTART_FLUSH_SLACK_S = 60.0


def _aggregator_runs(ref: str, connector: Connector, seed: int, quick: bool, cooperative: bool) -> list[PlannedRun]:
    from streamcert.harness.run.connectors import load_connector

    runs = []
    rng = _rng(seed, connector, "baseline")
    runs.append(_planned(ref, connector, "baseline",
                         _aggregator_scenario(ref, connector, "baseline", rng, quiet_timeout_s=_QUIET_NO_RESTART_S)))
    rng = _rng(seed, connector, "driver-kills")
    points = {**load_connector(AGGREGATOR_SINK, "sink").kill_points, **connector.kill_points}
    points = {point: moment for point, moment in points.items() if moment == "committing"}
    kills = _kills(rng, quick, points, cooperative, held=("commits",))
    runs.append(_planned(ref, connector, "driver-kills", _aggregator_scenario(
        ref, connector, "kills", rng, total=_kill_records(100, kills), options={"max_records_per_batch": 100},
        feed_batches_ahead=_FEED_AHEAD, schedule=_slowed(rng, "kafka", kills), faults_after_output=1,
        flush_slack_s=_RESTART_FLUSH_SLACK_S)))
    if quick:
        return runs
    rng = _rng(seed, connector, "rescale-under-load")
    # Records keep arriving across the rescale: a key whose group changed must not overtake its buffered records.
    # Groups flush by size within seconds under this load, input goes on for half a minute after the query is
    # back (the stop, the state repartition and the restart take about a minute here), and a buffer's deadline
    # outlasts all that: a buffer the rescale left behind still waits when newer records of its keys flush.
    runs.append(_planned(ref, connector, "rescale-under-load", _aggregator_scenario(
        ref, connector, "rescale-load", rng, total=1350, workload_rate=15.0,
        options={"max_batch_size": 25, "max_wait_ms": 90_000}, trigger="1 second",
        schedule=[FaultSpec("rescale", "driver", 0.0, 0.0, {"parallelism": 1, "state_partitions": 2})],
        faults_after_output=1, flush_slack_s=_RESTART_FLUSH_SLACK_S, quiet_timeout_s=240.0)))
    rng = _rng(seed, connector, "rescale")
    # groups still buffer records while the query is stopped; a stateful restart may show nothing for minutes
    runs.append(_planned(ref, connector, "rescale", _aggregator_scenario(
        ref, connector, "rescale", rng, options={"max_wait_ms": 15_000}, trigger="2 seconds",
        schedule=[FaultSpec("rescale", "driver", 0.0, 0.0, {"parallelism": 1, "state_partitions": 2})],
        faults_after_output=1, flush_slack_s=_RESTART_FLUSH_SLACK_S, quiet_timeout_s=240.0)))
    return runs


_PLANNERS: dict[str, Callable[[str, Connector, int, bool, bool], list[PlannedRun]]] = {
    "source": _source_runs, "sink": _sink_runs, "aggregator": _aggregator_runs}


def _options_run(reference: str, connector: Connector, runs: list[PlannedRun]) -> PlannedRun:
    """GEN-2: the option probe, on the query of the connector's baseline scenario."""
    return _planned(reference, connector, "options", runs[0].scenario.model_copy(
        update={"name": f"{connector.name}-options", "procedure": OptionsProbe(options_of=connector.kind)}))


def plan(reference: str, connector: Connector, seed: int, quick: bool = False,
         wanted: set[str] | None = None, cooperative: bool = True) -> list[PlannedRun]:
    """The runs that certify ``connector`` (named ``reference``): only those that judge a requirement of
    ``wanted`` that the connector claims, when given. ``cooperative`` false leaves the connector's own fault points
    (``kill_points``, ``fail_points``) out: only the faults that need no cooperation (the mutation score)."""
    runs = _PLANNERS[connector.kind](reference, connector, seed, quick, cooperative)
    runs.insert(0, _options_run(reference, connector, runs))
    claimed = {req for req in ids_for(connector.kind) if req in connector.claims}
    if wanted is not None:
        claimed &= wanted
    return [run for run in runs if claimed & set(run.judges)]


#: The Kafka cluster's own runs (BRK): requirement -> (run name, acks, topic settings beyond the cluster's defaults).
ACKED_WRITES = {
    "BRK-1": ("acked-writes-safe", "all", SAFE_TOPICS),
    "BRK-2": ("acked-writes-unsafe", "1", TopicSettings(replication_factor=3, min_insync_replicas=1,
                                                        unclean_leader_election=True)),
}


def cluster_runs(seed: int, wanted: set[str] | None, failover_planned: bool) -> list[PlannedRun]:
    """The cluster's acknowledged-writes runs on 3 brokers: those of ``wanted``'s BRK requirements, and BRK-1 as
    the precondition of any failover run (a connector's loss there counts only if the cluster itself keeps what it
    acknowledged)."""
    from streamcert.conformance.catalogue import CLUSTER_SUBJECT

    runs = []
    for requirement, (name, acks, topics) in ACKED_WRITES.items():
        if not ((wanted is None and failover_planned) or (wanted and requirement in wanted)
                or (requirement == "BRK-1" and failover_planned)):
            continue
        rng = random.Random(f"{seed}:{CLUSTER_SUBJECT}:{name}")
        # the old leader answers its clients 5-7 s after the others elected a new one, then is killed; 2 s later its
        # links come back and it starts again
        isolate_kill = FaultSpec("node_isolate_kill", "kafka", 3.0, 2.0,
                                 {"node": "leader", "answering_s": round(rng.uniform(5.0, 7.0), 3)})
        scenario = Scenario(name=name, procedure=AckedWrites(acks=acks), brokers=3, topics=topics,
                            schedule=[isolate_kill], workload=_workload(rng, 1, partitions=1, aborted_fraction=0.0))
        runs.append(PlannedRun(CLUSTER_SUBJECT, name, _judges("broker", name), scenario, brokers=3))
    return runs


def judged_by(runs: list[PlannedRun], requirement: str) -> list[PlannedRun]:
    """The planned runs whose evidence decides ``requirement``."""
    return [run for run in runs if requirement in run.judges]
