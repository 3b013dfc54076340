"""The requirement catalogue: every conformance requirement as data (SPEC §5), the one list the suite, the CLI
(``streamcert requirements``) and connector declarations are checked against.

A requirement has an ID (``SRC-1``...), the kind of connector it applies to (``general`` ones apply to every
kind), a one-line statement, the procedure that exercises it, the condition it passes on, the plan's runs that
judge it, the fault families they carry for it (:data:`FAULT_FAMILIES`, of the fault registry's kinds), the moments
its kills must reach, and the checks that decide it: the one place a requirement changes. Checks are the harness's
output checkers (:mod:`streamcert.harness.verify.checkers`: ``lost``, ``duplicate``...) or evidence checks the
suite reads from the run itself (the assignment in Spark's event log, the end offsets of a bounded run...);
:data:`EVIDENCE_CHECKS` names the latter and says what each reads. Extend the catalogue; never weaken an entry.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, computed_field, field_validator

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.query_status import MOMENTS

__all__ = ["KINDS", "CLUSTER_SUBJECT", "FAULT_FAMILIES", "CAPABILITIES", "Requirement", "CATALOGUE", "EVIDENCE_CHECKS",
           "WITNESSES",
           "requirements", "requirement", "ids_for", "capabilities"]

#: The kinds a requirement applies to: a connector's kind, every connector (``general``), or the Kafka cluster the
#: connectors run on (``broker``: seed 003's preconditions of the failover runs, certified as ``kafka-cluster``).
KINDS = ("source", "sink", "aggregator", "general", "broker")
_CONNECTOR_KINDS = KINDS[:3]
_PREFIX = {"source": "SRC", "sink": "SNK", "aggregator": "AGG", "general": "GEN", "broker": "BRK"}
#: The subject of the ``broker`` requirements in a certification's verdicts.
CLUSTER_SUBJECT = "kafka-cluster"

#: Checks that read the run's own evidence rather than its output, and what each reads.
EVIDENCE_CHECKS = {
    "fault_reached": "the fault history: each fault the requirement needs struck where it was aimed (a kill inside "
                     "the window it targets); otherwise the verdict is unknown, never pass",
    "assignment": "Spark's event log and the source's plan: each partition read by one task, tasks balanced within "
                  "one partition, the same assignment for the same partitions and parallelism",
    "end_offsets": "a bounded (AvailableNow) run's last committed offsets equal the end offsets taken at its start",
    "admission": "the offsets of each micro-batch: no batch reads more records than the claimed limit",
    "progress": "the query's progress events: batches keep committing (no stall) and report input rows and rates",
    "query_failures": "the driver's events: no attempt's query terminated with an exception of its own (a query "
                      "that crashes when it resumes from its checkpoint has not resumed)",
    "leftovers": "the sink's participant after the run: no prepared transaction or staged data of a failed attempt "
                 "is left, and none is visible",
    "fencing": "a zombie task attempt's late write after a newer attempt committed is refused and invisible",
    "option_errors": "each bad option gets a ConfigurationError naming it, with a hint, before the query runs",
    "clean_stop": "a stop request ends the query within its bound with its last batch committed and nothing of "
                  "the connector left running",
    "loss_seen": "the acknowledged-writes run under unsafe settings: the lost check found acknowledged records "
                 "missing (the harness can see the anomaly those settings allow)",
}

#: Witnesses: events a requirement's procedure must produce, read from its runs' evidence
#: (:mod:`streamcert.conformance.witnesses`). A requirement whose witness none of its runs shows is unknown, naming
#: it: its checks passed on a run in which what it tests did not happen.
WITNESSES = {
    "added_partition_read": "records were written into a partition the input gained while the query ran, some of "
                            "them before the query could find it (its driver held until they were committed), and "
                            "the query read them back",
    "rescaled_restart": "the query restarted with another parallelism than its attempt before, and each such new "
                        "attempt committed a batch that read input",
    "replay_after_commit_returned": "the driver was killed with Spark's write of commits/N held (the sink's commit of "
                                    "batch N had returned, the batch was not logged), and a later attempt ran batch N "
                                    "again",
    "idle_reader_tasks_read": "an attempt that ran with more reader tasks than the input had partitions committed "
                              "a batch that read input",
    "cut_in_flight": "each network cut, server kill and leader failover aimed at a moment of the query struck in it, "
                     "at least one with something in flight on the link (a statement the server ran, a request "
                     "awaiting its answer)",
}

_OUTPUT = ("lost", "duplicate", "unexpected", "aborted_read", "per_key_order")

#: Fault families: the fault kinds (names of :mod:`streamcert.harness.faults.registry`) that exercise one kind of
#: failure. A requirement names families; its runs may use any kind of them (the plans use the first ones: driver kills
#: timed by the query's observed moment, Python workers killed at a task's moment; a connector's own points on top;
#: the others serve hand-written schedules).
FAULT_FAMILIES: dict[str, tuple[str, ...]] = {
    "driver-kill": ("driver_kill_moment", "driver_kill_at", "driver_kill", "driver_kill_random",
                    "driver_kill_on_output", "driver_kill_log_held"),
    "task-kill": ("python_worker_kill_moment", "executor_kill_moment", "task_fail_at", "python_worker_kill",
                  "task_exception", "executor_kill"),
    "network": ("latency", "bandwidth", "timeout", "reset_peer", "slow_close", "slicer", "limit_data", "down",
                "network_moment"),
    "broker": ("broker_kill", "broker_restart", "broker_pause", "server_kill_moment"),
    "database": ("database_kill", "server_kill_moment"),
    "system": ("system_kill", "system_pause"),
    "failover": ("node_kill", "node_isolate", "node_isolate_kill", "node_moment"),
    "rescale": ("rescale",),
    "new-partitions": ("add_partitions",),
    "zombie": ("task_zombie",),
}


class Requirement(BaseModel):
    """One requirement of the catalogue: the one place that says what it is, how it is exercised and decided.

    ``runs`` names the runs of its kind's plan (:mod:`streamcert.conformance.plans`) whose evidence decides it: a
    plan builds each run once and every requirement naming it is judged on it (compatible requirements share a run).
    ``fault_families`` says which faults those runs must carry for it (:data:`FAULT_FAMILIES`); ``moments`` which
    cells of a kill run's grid (:mod:`streamcert.harness.verify.coverage`) must be reached, ``aim`` where a kill
    not timed by an observed moment must land, before its ``fault_reached`` check is valid.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^(SRC|SNK|AGG|GEN|BRK)-[1-9][0-9]*$")
    kind: Literal["source", "sink", "aggregator", "general", "broker"]
    statement: str = Field(min_length=10, description="what a connector of the kind guarantees, in one line")
    procedure: str = Field(min_length=10, description="how the suite exercises it")
    pass_condition: str = Field(min_length=10, description="when the verdict is pass")
    runs: tuple[str, ...] = Field((), description="the runs of its kind's plan whose evidence decides it (none: no "
                                                  "scenario of this version exercises it yet)")
    fault_families: tuple[str, ...] = Field((), description="families of faults its runs carry (FAULT_FAMILIES)")
    moments: tuple[str, ...] = Field((), description="observed moments whose planned kill cells must all be reached "
                                                     "(query_status.MOMENTS)")
    aim: Literal["window", "committing"] | None = Field(None, description="where a kill not timed by an observed "
                                                                         "moment must land (a connector's point, a "
                                                                         "hand-written schedule)")
    checks: tuple[str, ...] = Field(min_length=1, description="output checkers and evidence checks that decide it")
    witnesses: tuple[str, ...] = Field((), description="events its procedure must produce in its runs (WITNESSES); "
                                                       "one none of them shows leaves the verdict unknown")
    optional: bool = Field(False, description="a connector may leave it unclaimed without a reason of its own")
    origin: str = Field("SPEC §5", description="where it comes from (the spec, a seed article)")

    @field_validator("fault_families", "moments", "witnesses")
    @classmethod
    def _known(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        allowed = {"fault_families": FAULT_FAMILIES, "moments": MOMENTS, "witnesses": WITNESSES}[info.field_name]
        unknown = [value for value in values if value not in allowed]
        if unknown:
            what = info.field_name.replace("_", " ")
            raise ValueError(f"unknown {what} {unknown}: use {', '.join(allowed)}")
        return values

    @computed_field(description="the fault kinds of its families")  # type: ignore[prop-decorator]
    @property
    def faults(self) -> tuple[str, ...]:
        return tuple(kind for family in self.fault_families for kind in FAULT_FAMILIES[family])


def _req(id: str, statement: str, procedure: str, pass_condition: str, runs: tuple[str, ...] = (),
         families: tuple[str, ...] = (), checks: tuple[str, ...] = _OUTPUT, moments: tuple[str, ...] = (),
         aim: str | None = None, optional: bool = False, origin: str = "SPEC §5",
         witnesses: tuple[str, ...] = ()) -> Requirement:
    kind = {prefix: kind for kind, prefix in _PREFIX.items()}[id.split("-")[0]]
    return Requirement(id=id, kind=kind, statement=statement, procedure=procedure, pass_condition=pass_condition,
                       runs=runs, fault_families=families, moments=moments, aim=aim, checks=checks,
                       optional=optional, origin=origin, witnesses=witnesses)


#: Where a kill must land for a replayed commit to be exercised: inside the commit, right after it.
_COMMIT_MOMENTS = ("commit_in_flight", "just_committed")


_NO_LOSS_NO_DUPLICATE = "every acknowledged record delivered exactly once, none aborted or unknown, key order kept"

CATALOGUE: tuple[Requirement, ...] = (
    # -- sources (paired with an exactly-once sink) ------------------------------------------------------
    _req("SRC-1", "After a driver kill the query resumes from its checkpoint with no record lost or repeated.",
         "Kill the driver inside the offsets/commits window and at seeded random moments of the batch lifecycle "
         "(reading, after reading, writing), several times per run; restart from the checkpoint.",
         _NO_LOSS_NO_DUPLICATE + "; each kill struck in the moment it aimed at; no restarted query failed by itself.",
         runs=("driver-kills",), families=("driver-kill",), moments=MOMENTS, aim="window",
         checks=_OUTPUT + ("fault_reached", "query_failures"), origin="SPEC §5; seed 000, seed 001"),
    _req("SRC-2", "Records of one partition reach the query in offset order.",
         "Produce keyed records (each key in one partition) and read them through an order-keeping sink.",
         "No record of a key after a later one of the same key (per_key_order: no regression, no gap).",
         runs=("baseline", "driver-kills"), checks=("per_key_order",)),
    _req("SRC-3", "Partitions are assigned to reader tasks in a balanced and deterministic way.",
         "Read a topic with more partitions than tasks, twice with the same parallelism, and once after a "
         "restart.",
         "Every partition read by exactly one task per batch; task loads differ by at most one partition; the same "
         "assignment for the same input.", runs=("baseline", "driver-kills"),
         checks=("assignment",), origin="SPEC §5; seed 000"),
    _req("SRC-4", "Rescaling (restart with more or fewer reader tasks) loses and repeats nothing.",
         "Restart the query from its checkpoint with the parallelism raised, then lowered.",
         _NO_LOSS_NO_DUPLICATE + "; the new task count shows in the event log; no restarted query failed by itself.",
         runs=("rescale",), families=("rescale",), checks=_OUTPUT + ("assignment", "query_failures"),
         witnesses=("rescaled_restart",), origin="SPEC §5; seed 001"),
    _req("SRC-5", "Partitions added while the query runs are discovered and read from their earliest offset.",
         "Add partitions to the input topic mid-run with the driver frozen until records are committed into them, "
         "and go on producing into them.",
         _NO_LOSS_NO_DUPLICATE + " (records of the new partitions included).", runs=("rescale",),
         families=("new-partitions",), witnesses=("added_partition_read",)),
    _req("SRC-6", "The source reads with read_committed: no record of an aborted transaction is ever emitted.",
         "Produce a workload in which a fraction of the transactions is aborted.",
         "No aborted record in the output (aborted_read), and every committed one delivered once.",
         runs=("baseline",), checks=("aborted_read", "lost", "duplicate")),
    _req("SRC-7", "A bounded run (Trigger.AvailableNow) ends exactly at the end offsets taken when it started.",
         "Start an AvailableNow query on a loaded topic while more records are produced.",
         "The query stops by itself; its output is the records up to the start's end offsets, each once.",
         runs=("bounded",), checks=("lost", "duplicate", "end_offsets")),
    _req("SRC-8", "The source survives every network toxic on the link to what it reads, that server's kill, restart "
         "and pause, and (reading Kafka) leader failover on a 3-broker cluster, without loss or duplicate.",
         "Slow the input's link with seeded toxics; cut it (reset, timeout, data limit or down, seeded) while a "
         "steady batch reads and while the next one's end is asked for, its answers slowed so that a request waits "
         "for one; restart and "
         "pause its server and kill it while a batch reads (the broker, or the source's own external system as far "
         "as it takes them); a Kafka source also runs on a 3-broker cluster (replication factor 3, min ISR 2): kill "
         "the input's partition leader while a batch reads, cut the new leader off from its peers, kill the active "
         "controller.",
         _NO_LOSS_NO_DUPLICATE + "; the query makes progress again after each fault; each failover fault is seen "
         "in metadata (leader moved, ISR shrank, a new controller), or the verdict is unknown.",
         runs=("network", "failover"), families=("network", "broker", "system", "failover"),
         checks=_OUTPUT + ("progress",), witnesses=("cut_in_flight",)),
    _req("SRC-9", "Admission control is respected: no micro-batch reads more than the configured limit.",
         "Read a backlog larger than several batches with the source's per-batch limit set.",
         "Every batch's offset range holds at most the limit, and the backlog is drained.",
         runs=("baseline", "bounded"), checks=("admission", "lost", "duplicate")),
    _req("SRC-10", "Idle reader tasks (more tasks than partitions) do not stall the query.",
         "Restart the query with more reader tasks (5) than the input has partitions (3) and let it read before "
         "the topic grows.",
         "Batches keep committing and every record is delivered.", runs=("rescale",), checks=("progress", "lost"),
         witnesses=("idle_reader_tasks_read",)),
    _req("SRC-11", "Event-time drift between partitions stays within the claimed bound.",
         "Produce a skewed backlog (the last partition's records hours ahead in event time of the others', records "
         "arriving while the query runs) and read it with the source's alignment bound set (the run's option "
         "max_event_time_drift_ms); kill the driver once while the leading partition is held back.",
         "Per batch, the spread of the partitions' event-time watermarks (the latest event time each delivered, "
         "over the partitions under way) stays within the bound plus one record's event-time gap; every record "
         "delivered exactly once.", runs=("skew",), families=("driver-kill",),
         checks=("event_time_drift", "lost", "duplicate"), optional=True, origin="seed 001 (FLIP-182)"),
    # -- sinks (fed by a source) --------------------------------------------------------------------------
    _req("SNK-1", "Exactly once across a driver kill in the pre-commit / commit window.",
         "Kill the driver after tasks wrote and before Spark's commit, inside the sink's commit, between two of "
         "its commits, and at seeded random moments; restart from the checkpoint.",
         _NO_LOSS_NO_DUPLICATE + " (read as a user reads the output); each kill struck where it aimed; no restarted "
         "query failed by itself.", runs=("driver-kills",), families=("driver-kill",), moments=MOMENTS, aim="window",
         checks=_OUTPUT + ("fault_reached", "query_failures"), origin="SPEC §5; seed 002"),
    _req("SNK-2", "The writes of a failed task attempt are rolled back: nothing of them is ever visible.",
         "Kill the Python workers of a steady batch's tasks at a task moment, then several times late in their "
         "write, with the sink's answers slowed so a task's last step (prepare, stage) is done before it hears "
         "of it; Spark retries each task. On a local cluster, kill an executor JVM late in a task's write too.",
         "No record repeated or unexpected in the output, and nothing of the failed attempt left prepared.",
         runs=("task-failures", "zombies"), families=("task-kill",),
         checks=("duplicate", "unexpected", "lost", "leftovers")),
    _req("SNK-3", "A batch whose commit decision was recorded is committed at recovery.",
         "Kill the driver after the decision was recorded and before the participants committed.",
         _NO_LOSS_NO_DUPLICATE + "; nothing left prepared.", runs=("driver-kills",), families=("driver-kill",),
         moments=_COMMIT_MOMENTS, aim="committing",
         checks=_OUTPUT + ("leftovers", "fault_reached"), origin="SPEC §5; seed 002"),
    _req("SNK-4", "A replayed commit of an already committed batch is a no-op.",
         "Kill the driver after the sink's commit returned and before Spark wrote commits/N (that write held open), "
         "so Spark replays the batch; and inside the commit.",
         "No record of the replayed batch written twice.", runs=("driver-kills",), families=("driver-kill",),
         moments=_COMMIT_MOMENTS, aim="committing",
         checks=("duplicate", "lost", "fault_reached"), witnesses=("replay_after_commit_returned",)),
    _req("SNK-5", "Readers never see uncommitted data.",
         "Read the output continuously (read_committed / committed rows / committed files) during a run with "
         "driver kills and failed tasks.",
         "Nothing seen that is later rolled back: no unexpected or duplicated record at any time.",
         runs=("driver-kills", "task-failures"), families=("driver-kill", "task-kill"),
         checks=("unexpected", "duplicate", "aborted_read")),
    _req("SNK-6", "Zombie task attempts are fenced.",
         "Freeze an executor (local-cluster) while it runs a task, past its heartbeat timeout: Spark reruns the task "
         "elsewhere and commits the batch; then thaw the frozen executor so its attempt goes on writing.",
         "The zombie's write is refused or never visible: no lost, duplicated or unexpected record, and nothing "
         "left in the participant after the run.", runs=("zombies",), families=("zombie",),
         checks=("fencing", "lost", "duplicate", "unexpected", "leftovers")),
    _req("SNK-7", "The sink survives network toxics, participant (broker / database / its own system) restarts "
         "and, for a Kafka sink, leader failover on a 3-broker cluster.",
         "Slow the participant's link with seeded toxics; cut it (reset, timeout, data limit or down, seeded) while "
         "a steady batch's tasks write and while its commit runs, its answers slowed so that a statement waits for "
         "one; restart the broker or the database and kill it while a batch commits (or the sink's own external "
         "system, when it takes a kill); a Kafka sink also runs on a 3-broker cluster (replication factor 3, min "
         "ISR 2) through a partition leader's kill while a batch commits, its isolation and the active "
         "controller's kill.",
         _NO_LOSS_NO_DUPLICATE + "; progress after each fault; each failover fault is seen in metadata, or the "
         "verdict is unknown.",
         runs=("network", "failover"), families=("network", "broker", "database", "system", "failover"),
         checks=_OUTPUT + ("progress",), witnesses=("cut_in_flight",)),
    _req("SNK-8", "Rescale: a different task count after a restart keeps exactly once.",
         "Restart the query with more, then fewer writer tasks, with a batch pending at the restart.",
         _NO_LOSS_NO_DUPLICATE + "; no restarted query failed by itself.", runs=("rescale",), families=("rescale",),
         checks=_OUTPUT + ("query_failures",), witnesses=("rescaled_restart",)),
    # -- aggregators (between a source and an exactly-once sink) -------------------------------------------
    _req("AGG-1", "Per-key order is kept inside each batch and across batches.",
         "Aggregate keyed records into batches and read them back.",
         "Inside a batch each key's records are contiguous and in order; later batches continue each key's order.",
         runs=("baseline", "driver-kills"), checks=("aggregator_batch.order", "per_key_order"),
         origin="SPEC §5; seed 004"),
    _req("AGG-2", "A batch is flushed when it reaches the size limit, and never holds more.",
         "Produce more records per key group than the size limit.",
         "Size-flushed batches hold exactly the limit; no batch holds more.", runs=("baseline",),
         checks=("aggregator_batch.size",)),
    _req("AGG-3", "A batch is flushed by time: no record waits longer than the limit plus a bounded slack.",
         "Produce fewer records than the size limit, then nothing.",
         "Every record is emitted, each batch within max_wait plus the slack after its oldest record arrived.",
         runs=("baseline",), checks=("aggregator_batch.latency", "lost")),
    _req("AGG-4", "Nothing is lost or duplicated when the driver dies at the checkpoint boundary.",
         "Kill the driver after the sink committed a batch's output and before Spark committed the batch (the "
         "barrier trap; Spark's write of commits/N held open), and at seeded random moments while records are "
         "buffered.",
         _NO_LOSS_NO_DUPLICATE + "; batches keep their contract; no restarted query failed by itself.",
         runs=("driver-kills",), families=("driver-kill",), moments=MOMENTS, aim="committing",
         checks=_OUTPUT + ("aggregator_batch", "fault_reached", "query_failures"),
         witnesses=("replay_after_commit_returned",), origin="SPEC §5; seed 004"),
    _req("AGG-5", "Per-key order is kept across a rescale of the stateful query.",
         "Stop between batches, repartition the state offline, restart with other parallelism.",
         _NO_LOSS_NO_DUPLICATE + "; batches keep their contract; no restarted query failed by itself.",
         runs=("rescale-under-load",), families=("rescale",),
         checks=_OUTPUT + ("aggregator_batch", "query_failures"), witnesses=("rescaled_restart",),
         origin="SPEC §5; seed 004"),
    _req("AGG-6", "Records buffered before a restart are emitted after it without waiting for new input.",
         "Restart the query while groups hold buffered records, and produce nothing afterwards.",
         "Every buffered record is emitted within the time limit plus the restart, with no new input.",
         runs=("rescale",), families=("rescale",), checks=("lost", "aggregator_batch")),
    # -- every connector ---------------------------------------------------------------------------------
    _req("GEN-1", "Metrics and progress are reported.",
         "Run a happy-path scenario and read Spark's progress events.",
         "Every batch reports its input rows and rates; the query's progress is visible while it runs.",
         runs=("baseline",), checks=("progress",)),
    _req("GEN-2", "A bad option gets a clear error, before the query runs.",
         "Build the connector's query with each documented option set to a bad value, and with an unknown one.",
         "Each attempt fails fast with a ConfigurationError naming the option and giving a hint.",
         runs=("options",), checks=("option_errors",)),
    _req("GEN-3", "The query stops cleanly.",
         "Ask a running query to stop.",
         "It stops within its bound with its last batch committed; nothing of the connector keeps running.",
         runs=("baseline",), checks=("clean_stop",)),
    # -- the Kafka cluster under the failover runs (seed 003) ------------------------------------------------
    _req("BRK-1", "With acks=all, replication factor 3 and min.insync.replicas 2, no record the cluster "
         "acknowledged is lost when a partition's leader is cut off from its peers and then killed.",
         "A producer writes numbered records with acks=all at a steady pace to a topic led by a node that does not "
         "lead the KRaft quorum; the leader is cut off from its peers (its clients still reach it) until the others "
         "elect a new one, stays cut off a few seconds, is SIGKILLed, and rejoins; the topic is read back once its "
         "ISR is whole again.",
         "Every acknowledged record is read back; the new leader and the ISR are seen in metadata, or the verdict "
         "is unknown. A failover run's failure of a connector counts only when this holds.",
         runs=("acked-writes-safe",), families=("failover",), checks=("lost", "fault_reached"), origin="seed 003"),
    _req("BRK-2", "The harness sees seed 003's anomaly: with acks=1, min.insync.replicas 1 and unclean leader "
         "election, acknowledged records are lost across the same failover, and the checkers find them.",
         "As BRK-1, with the unsafe settings: the cut-off leader goes on acknowledging writes no other replica "
         "has, and throws them away when it rejoins as a follower.",
         "The lost check names acknowledged records that are missing (Jepsen's Kafka result, reproduced); the "
         "failover is seen in metadata, or the verdict is unknown.",
         runs=("acked-writes-unsafe",), families=("failover",),
         checks=("loss_seen", "fault_reached"), origin="seed 003"),
)


#: Capabilities a declaration may claim besides requirement IDs, and, per connector kind, the requirements that back
#: each: a declaration claiming one must claim all of them, and the certification says the capability holds only when
#: every one of them passed.
CAPABILITIES: dict[str, dict[str, tuple[str, ...]]] = {
    "exactly-once": {"source": ("SRC-1", "SRC-4", "SRC-5", "SRC-6"),
                     "sink": ("SNK-1", "SNK-2", "SNK-3", "SNK-4", "SNK-5", "SNK-6"),
                     "aggregator": ("AGG-4", "AGG-5")},
    "read_committed": {"source": ("SRC-6",), "sink": ("SNK-5",)},
    "rescale": {"source": ("SRC-4",), "sink": ("SNK-8",), "aggregator": ("AGG-5", "AGG-6")},
    "admission-control": {"source": ("SRC-9",)},
    "event-time-alignment": {"source": ("SRC-11",)},
}


def capabilities(kind: str) -> dict[str, tuple[str, ...]]:
    """The capabilities a connector of ``kind`` may claim, each with the requirements that back it."""
    return {name: by_kind[kind] for name, by_kind in CAPABILITIES.items() if kind in by_kind}


def requirements(kind: str | None = None) -> list[Requirement]:
    """The catalogue, or what applies to a connector of ``kind`` (its own requirements and the general ones), or
    the Kafka cluster's (``broker``)."""
    if kind is None:
        return list(CATALOGUE)
    if kind == "broker":
        return [req for req in CATALOGUE if req.kind == "broker"]
    if kind not in _CONNECTOR_KINDS:
        raise ConfigurationError(f"There is no connector kind {kind!r}.",
                                 hint="Use source, sink, aggregator or broker.")
    return [req for req in CATALOGUE if req.kind in (kind, "general")]


def ids_for(kind: str) -> list[str]:
    """The IDs a connector of ``kind`` must claim or waive with a reason."""
    return [req.id for req in requirements(kind)]


def requirement(requirement_id: str) -> Requirement:
    """The requirement ``requirement_id`` (case-insensitive); a ConfigurationError listing the IDs otherwise."""
    wanted = requirement_id.strip().upper()
    for req in CATALOGUE:
        if req.id == wanted:
            return req
    prefix = re.sub(r"-.*", "", wanted)
    near = [req.id for req in CATALOGUE if req.id.startswith(prefix)] or [req.id for req in CATALOGUE]
    raise ConfigurationError(f"There is no requirement {requirement_id!r}.", hint=f"Known: {', '.join(near)}.")
