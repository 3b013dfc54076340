"""Runs shared by two connectors of one certification: a sink's run that reads through a source under test judges
the source too, and the source's own run of that name waits as a fallback.

A sink's plan reads its input through the reference source (:data:`~streamcert.conformance.plans.SOURCE_PARTNER`).
When that source is certified alongside, the sink's kill run already kills the source's driver at every moment the
source's own kill run plans (and more: a sink's commit has moments of its own), on a topic of the same layout read
by as many tasks; its output is judged by the same checks. So the source's requirements of that run are judged on
the sink's run first, and the source's own run (into Spark's file sink, the partner that cannot be to blame) runs
only when the shared run did not pass every one of them: a finding there cannot tell the source's bug from the
sink's, and an undecided check gets the source its own chance. A certified pair of correct connectors then makes
one run where it made two: the reference pair's failover run (~80 s of the full plan; its baseline and kill run
judge SRC-3, which a Kafka topic cannot decide: below).

A run is shared only where it judges the source as strictly as the source's own run would:

- the same run name (:data:`SHARED_RUNS`: the baseline, the kill run, the failover run) and no procedure, on as
  many brokers with the same topic settings;
- the host's sink writes to a system whose read-back shows every record written, a repeated one twice (Kafka topics,
  Spark's file sink): a table that upserts would hide the source's duplicates;
- the same parallelism, options (they reach every connector of the query), trigger and workload shape (partitions,
  keys, aborted transactions, rate: SRC-3's assignment, SRC-6's aborted reads), and the host's faults cover the
  source's run's: its moment kills plan every moment and batch class the source's own do, and each other fault
  (a failover's leader kill, isolation, controller kill) is there with the same target and parameters;
- the host's output can decide every check of the source's claimed requirements of that run: SRC-3's task
  assignment is read from the layout of Spark's file sink (a data file per task and batch), which a Kafka topic
  does not have, so the reference source's baseline and kill run (both judge SRC-3) stay its own, and a source that
  waives SRC-3 shares them;
- the source has no kill points of its own (those are a bonus its own run adds to its chain).

Among several hosts the sink that claims exactly-once is preferred (a host whose own findings are expected, an
at-least-once sink, would only send the source to its fallback), then the plan's order. Called by
:func:`~streamcert.conformance.certify.prepare` once every connector's runs are planned, in the harness's process.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

from streamcert.conformance.catalogue import requirement
from streamcert.conformance.plans import PlannedRun
from streamcert.harness.faults.moments import MomentKillParams
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.verify.coverage import AIMED_FAULTS
from streamcert.harness.systems import declared_output_system
from streamcert.harness.systems.file_sink import SparkFileSink
from streamcert.harness.systems.kafka_topics import KafkaTopics
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.run.workload import WorkloadSpec
from streamcert.spi.connector import Connector

__all__ = ["SHARED_RUNS", "share_runs", "hosted_runs", "host_of"]

#: The runs of a source that a sink's run of the same name may stand in for.
SHARED_RUNS = ("baseline", "driver-kills", "failover")
#: Systems whose read-back shows each record as often as it was written.
_APPEND_ONLY = (KafkaTopics, SparkFileSink)
#: Checks that read the layout the writing tasks gave the output, and the systems whose read-back shows it: SRC-3's
#: ``assignment`` needs Spark's file sink (one data file per task and batch, rows with their source partition).
_LAYOUT_CHECKS = {"assignment": (SparkFileSink,)}
_MOMENT_KILL = "driver_kill_moment"


#: The parameters of a fault aimed at a moment that say what it does (the others say how it aims).
_WHAT_IS_STRUCK = ("moment", "batch_class", "cut", "cut_params", "action", "partition", "answering_s")


def share_runs(runs: list[PlannedRun], connectors: Mapping[str, Connector]) -> list[PlannedRun]:
    """``runs`` (every connector's plan, ``connectors`` by reference) with each source run that a sink's run can
    judge marked ``hosted_by`` that sink, and the host's run ``also_judges`` the source's requirements of it."""
    runs = list(runs)
    for index, hosted in enumerate(runs):
        if not _shareable(hosted, connectors):
            continue
        hosts = [(position, run) for position, run in enumerate(runs) if _can_host(run, hosted, connectors)]
        if not hosts:
            continue
        position, host = min(hosts, key=lambda pair: ("exactly-once" not in connectors[pair[1].connector].claims,
                                                      pair[0]))
        runs[position] = dataclasses.replace(host, also_judges=(*host.also_judges,
                                                                (hosted.connector, hosted.judges)))
        runs[index] = dataclasses.replace(hosted, hosted_by=host.connector)
    return runs


def hosted_runs(runs: list[PlannedRun], host: PlannedRun) -> list[PlannedRun]:
    """The planned runs that ``host`` stands in for (their fallbacks)."""
    return [run for run in runs if run.hosted_by == host.connector and run.name == host.name]


def host_of(runs: list[PlannedRun], hosted: PlannedRun) -> PlannedRun | None:
    """The planned run that judges ``hosted``'s requirements first, None when it is not shared."""
    if hosted.hosted_by is None:
        return None
    return next((run for run in runs if run.connector == hosted.hosted_by and run.name == hosted.name), None)


def _shareable(run: PlannedRun, connectors: Mapping[str, Connector]) -> bool:
    connector = connectors.get(run.connector)
    return (connector is not None and connector.kind == "source" and run.name in SHARED_RUNS
            and run.procedure == "query" and run.hosted_by is None and not connector.kill_points)


def _can_host(run: PlannedRun, hosted: PlannedRun, connectors: Mapping[str, Connector]) -> bool:
    """Whether ``run`` (a sink's) judges ``hosted`` (a source's) as strictly as ``hosted`` itself would."""
    connector = connectors.get(run.connector)
    if connector is None or connector.kind != "sink" or run.name != hosted.name or run.procedure != "query":
        return False
    mine, theirs = run.scenario, hosted.scenario
    if mine.source != hosted.connector or not _append_only(mine.sink):
        return False
    if mine.parallelism != theirs.parallelism or mine.options != theirs.options or mine.trigger != theirs.trigger:
        return False
    if _shape(mine.workload) != _shape(theirs.workload):
        return False
    if (run.brokers, mine.topics) != (hosted.brokers, theirs.topics):
        return False
    return _covers(mine.schedule, theirs.schedule) and _decides(run, hosted, connectors[hosted.connector])


def _decides(host: PlannedRun, hosted: PlannedRun, connector: Connector) -> bool:
    """Whether ``host``'s output can decide every check of the requirements ``hosted`` judges that ``connector``
    claims: a check that reads how the output was laid out by the tasks that wrote it needs that sink's output."""
    checks = {check for req_id in hosted.judges if req_id in connector.claims for check in requirement(req_id).checks}
    system = type(_output_system(host.scenario.sink))
    return all(system in _LAYOUT_CHECKS[check] for check in checks & set(_LAYOUT_CHECKS))


def _covers(mine: list[FaultSpec], theirs: list[FaultSpec]) -> bool:
    """Whether schedule ``mine`` carries every fault of ``theirs``: its moment kills aim at every moment and batch
    class those of ``theirs`` do, and each other fault of ``theirs`` (a failover's leader kill, say) is in ``mine``
    with the same target and parameters, whenever it strikes."""
    if _aimed(theirs, "moment") - _aimed(mine, "moment") or _aimed(theirs, "batch_class") - _aimed(mine, "batch_class"):
        return False
    return not Counter(map(_fault_kind, _others(theirs))) - Counter(map(_fault_kind, _others(mine)))


def _others(schedule: list[FaultSpec]) -> list[FaultSpec]:
    return [spec for spec in schedule if spec.fault != _MOMENT_KILL]


def _fault_kind(spec: FaultSpec) -> tuple:
    """A fault as sharing compares it: its kind, target and parameters; for one aimed at a moment, what it strikes
    and at which moment (how it aims inside the moment, the link's slowing while it watches, is tuning)."""
    params = spec.params
    if spec.fault in AIMED_FAULTS:
        params = {key: value for key, value in params.items() if key in _WHAT_IS_STRUCK}
    return spec.fault, spec.target, tuple(sorted((key, repr(value)) for key, value in params.items()))


def _shape(workload: WorkloadSpec) -> WorkloadSpec:
    """What a workload is made of, whatever its seed and size (a kill run's size follows its own schedule)."""
    return dataclasses.replace(workload, seed=0, total=1)


def _append_only(sink_reference: str) -> bool:
    return isinstance(_output_system(sink_reference), _APPEND_ONLY)


def _output_system(sink_reference: str) -> object | None:
    try:
        return declared_output_system(load_connector(sink_reference, "sink"))
    except Exception:  # noqa: BLE001 - a sink that cannot be loaded hosts nothing; its own run says why
        return None


def _aimed(schedule: list[FaultSpec], field: str) -> set[str]:
    """The moments (``field`` ``moment``) or batch classes (``batch_class``) a schedule's moment kills aim at."""
    return {getattr(MomentKillParams(**spec.params), field) for spec in schedule if spec.fault == _MOMENT_KILL}
