"""The certification's plans: the same seed gives the same schedules byte for byte, another seed others; kills
reach a connector without fault points; only claimed requirements are planned."""

from __future__ import annotations

import random

import pytest

from streamcert.conformance.catalogue import ids_for
from streamcert.conformance.plans import SAFE_TOPICS, _moment_kills, plan
from streamcert.harness.faults.schedule import dumps
from streamcert.harness.run.connectors import load_connector
from streamcert.spi.connector import SinkConnector


def _schedules(runs):
    return {run.name: dumps(run.scenario.schedule) for run in runs}


def test_the_same_seed_gives_the_same_schedules_and_workloads_and_another_seed_others():
    for reference in ("streamcert-kafka", "streamcert-pg-2pc", "streamcert-batch-aggregator"):
        connector = load_connector(reference)
        first, again, other = (plan(reference, connector, seed) for seed in (7, 7, 8))
        assert _schedules(first) == _schedules(again)
        assert [r.scenario.workload for r in first] == [r.scenario.workload for r in again]
        assert _schedules(first) != _schedules(other)


class _PlainSink(SinkConnector):
    """A third-party sink: no fault points of its own."""

    name = "plain-sink"
    claims = frozenset({f"SNK-{n}" for n in range(1, 9)} | {"GEN-1", "GEN-2", "GEN-3"})

    def write(self, frame, context):
        raise NotImplementedError


def _cells(run):
    return [(spec.params["moment"], spec.params["batch_class"]) for spec in run.scenario.schedule
            if spec.fault == "driver_kill_moment"]


def test_a_sink_without_fault_points_is_killed_at_every_moment_of_first_and_steady_batches_and_replays():
    runs = {run.name: run for run in plan("x:PLAIN", _PlainSink(), seed=1)}
    cells = _cells(runs["driver-kills"])
    moments = ("planning", "reading", "read_done", "writing", "commit_in_flight", "output_visible", "just_committed")
    assert {(m, c) for m in moments for c in ("first", "steady")} <= set(cells)
    assert [c for _m, c in cells].count("replay_of_replay") == 2
    assert "driver_kill_at" not in [spec.fault for spec in runs["driver-kills"].scenario.schedule]
    task_kills = [spec for spec in runs["task-failures"].scenario.schedule if spec.fault == "python_worker_kill_moment"]
    # output shown by tasks, a drawn task moment, three late in the writing moment (a task's last step)
    moments = [spec.params["moment"] for spec in task_kills]
    assert len(task_kills) == 5 and moments[0] == "output_visible" and moments[2:] == ["writing"] * 3
    assert all(0.6 <= spec.params["fraction"] <= 0.97 for spec in task_kills[2:])
    fractions = {spec.params["fraction"] for spec in runs["driver-kills"].scenario.schedule
                 if spec.fault == "driver_kill_moment"}
    assert len(fractions) >= 5  # spread inside the moments, not one instant


def test_the_quick_plan_strikes_every_moment_once_and_one_replay_of_a_replay():
    runs = {run.name: run for run in plan("x:PLAIN", _PlainSink(), seed=3, quick=True)}
    cells = _cells(runs["driver-kills"])
    assert sorted({m for m, c in cells if c != "replay_of_replay"}) == sorted(
        ("planning", "reading", "read_done", "writing", "commit_in_flight", "output_visible", "just_committed"))
    assert [c for _m, c in cells].count("replay_of_replay") == 1


def _held(run):
    return [(spec.params["log"], spec.params["batch_class"]) for spec in run.scenario.schedule
            if spec.fault == "driver_kill_log_held"]


@pytest.mark.parametrize("reference, full, quick", [
    ("streamcert-kafka", [("offsets", "steady")], []),
    ("streamcert-kafka-2pc", [("commits", "steady"), ("commits", "first"), ("offsets", "steady")],
     [("commits", "steady")]),
    ("streamcert-batch-aggregator", [("commits", "steady"), ("commits", "first")], [("commits", "steady")])])
def test_every_kill_run_holds_a_checkpoint_log_open_for_its_kills(reference, full, quick):
    connector = load_connector(reference)
    runs = {run.name: run for run in plan(reference, connector, seed=2)}
    assert _held(runs["driver-kills"]) == full
    assert _held({run.name: run for run in plan(reference, connector, seed=2, quick=True)}["driver-kills"]) == quick
    first = [spec for spec in runs["driver-kills"].scenario.schedule if spec.params.get("batch_class") == "first"
             and spec.fault == "driver_kill_log_held"]
    assert all(spec.at_s == 0.0 and spec.after is not None for spec in first)  # watches once the kill before restarted
    assert {name for name, run in runs.items() if _held(run)} == {"driver-kills"}



def test_a_run_whose_sink_commits_in_milliseconds_plans_no_moment_inside_the_commit():
    """Spark's file sink (a source's partner, or certified itself) commits in the driver within milliseconds of its
    job's end, before the status API shows the end: no look can land there, so no such cell is planned."""
    for reference in ("streamcert-kafka", "spark-files"):
        connector = load_connector(reference)
        for quick in (True, False):
            [run] = [r for r in plan(reference, connector, seed=1, quick=quick) if r.name == "driver-kills"]
            moments = {m for m, _c in _cells(run)}
            assert not moments & {"output_visible", "commit_in_flight"}
            assert {"planning", "reading", "read_done", "writing", "just_committed"} <= moments


def test_a_replay_of_a_replay_follows_a_steady_and_a_first_batch_kill_that_leave_their_batch_pending():
    """Two attempts in a row must start with the same batch pending: a steady kill before the commit, then the
    replaying first batch killed before its commit too."""
    for seed in range(1, 6):
        cells = _cells({r.name: r for r in plan("x:PLAIN", _PlainSink(), seed=seed)}["driver-kills"])
        for index, (_moment, batch_class) in enumerate(cells):
            if batch_class == "replay_of_replay" and index >= 2 and cells[index - 1][1] == "first":
                assert cells[index - 1][0] != "just_committed" and cells[index - 2][0] != "just_committed"


def test_a_kill_aimed_at_a_first_batch_watches_as_soon_as_the_kill_before_it_restarted_the_driver():
    """A warm restart plans and commits its first batch within the chain's usual gap: a first batch's or a replay's
    kill starts at once after the restart before it (else it costs a positioning kill); a steady kill keeps the gap
    (its batch comes after three commits anyway)."""
    for reference in ("streamcert-pg-2pc", "streamcert-kafka", "streamcert-batch-aggregator"):
        for quick in (True, False):
            [run] = [r for r in plan(reference, load_connector(reference), seed=2, quick=quick)
                     if r.name == "driver-kills"]
            chained = [spec for spec in run.scenario.schedule if spec.after is not None]
            gaps: dict[str, set[float]] = {}
            for spec in chained:
                if spec.fault == "driver_kill_moment":
                    gaps.setdefault(spec.params["batch_class"], set()).add(spec.at_s)
            assert gaps == {"first": {0.0}, "replay_of_replay": {0.0}, "steady": {2.0}}


def test_a_kill_aimed_inside_a_write_or_a_commit_slows_the_connectors_own_link_while_it_watches():
    for reference, link in (("streamcert-pg-2pc", "postgres"), ("streamcert-kafka-2pc", "kafka"),
                            ("streamcert-kafka", "kafka"), ("streamcert-batch-aggregator", "kafka")):
        [run] = [r for r in plan(reference, load_connector(reference), seed=1) if r.name == "driver-kills"]
        kills = [spec for spec in run.scenario.schedule if spec.fault == "driver_kill_moment"]
        slowed = [spec for spec in kills if spec.params.get("slow_link")]
        assert {spec.params["moment"] for spec in slowed} == {spec.params["moment"] for spec in kills} & {
            "read_done", "writing", "commit_in_flight", "output_visible"}
        assert {spec.params["slow_link"] for spec in slowed} == {link}
        assert all(50 <= spec.params["latency_ms"] < 100 for spec in slowed)
        assert not any(spec.fault == "latency" for spec in run.scenario.schedule)


def test_without_cooperation_the_plan_uses_no_fault_point_of_the_connector():
    sink = load_connector("streamcert-kafka-2pc")
    for quick in (True, False):
        faults = {spec.fault for run in plan("streamcert-kafka-2pc", sink, seed=1, quick=quick, cooperative=False)
                  for spec in run.scenario.schedule}
        assert not faults & {"driver_kill_at", "task_fail_at"}


def test_a_sink_with_points_is_killed_and_failed_at_each_in_the_full_plan_and_at_none_in_the_quick_one():
    """Points are a bonus no verdict rests on (SPEC §8): the full plan strikes every one, the quick gate none, and
    its moment kills are those it planned with them."""
    sink = load_connector("streamcert-kafka-2pc")
    full = {run.name: run for run in plan("streamcert-kafka-2pc", sink, seed=1)}
    points = [spec.params["point"] for spec in full["driver-kills"].scenario.schedule if spec.fault == "driver_kill_at"]
    assert sorted(points) == sorted(sink.kill_points)
    failing = [spec.params["point"] for spec in full["task-failures"].scenario.schedule if spec.fault == "task_fail_at"]
    assert failing == list(sink.fail_points)
    quick = {run.name: run for run in plan("streamcert-kafka-2pc", sink, seed=1, quick=True)}
    assert not {spec.fault for run in quick.values() for spec in run.scenario.schedule} & {"driver_kill_at",
                                                                                           "task_fail_at"}
    without = {run.name: run for run in plan("streamcert-kafka-2pc", sink, seed=1, quick=True, cooperative=False)}
    assert _cells(quick["driver-kills"]) == _cells(without["driver-kills"])


def test_spark_allows_a_task_more_attempts_than_the_task_faults_of_its_run():
    """All of a run's task faults may strike one task: with no attempt left, Spark would fail the query itself."""
    for quick in (True, False):
        [run] = [r for r in plan("streamcert-pg-2pc", load_connector("streamcert-pg-2pc"), seed=1, quick=quick)
                 if r.name == "task-failures"]
        attempts = int(run.scenario.master.rstrip("]").split(",")[1])
        assert attempts > len(run.scenario.schedule), (run.scenario.master, len(run.scenario.schedule))


def test_each_run_judges_only_claimed_requirements_of_the_kind_and_faults_chain_one_after_another():
    for reference in ("streamcert-kafka", "streamcert-kafka-2pc", "streamcert-batch-aggregator"):
        connector = load_connector(reference)
        for run in plan(reference, connector, seed=1):
            assert set(run.judges) <= set(ids_for(connector.kind))
            assert [spec.after for spec in run.scenario.schedule][1:] == list(range(len(run.scenario.schedule) - 1))


def test_wanted_requirements_keep_only_the_runs_that_judge_them():
    connector = load_connector("streamcert-kafka")
    runs = plan("streamcert-kafka", connector, seed=1, wanted={"SRC-8"})
    assert [run.name for run in runs] == ["network", "failover"]
    assert plan("streamcert-kafka", connector, seed=1, quick=True, wanted={"SRC-8"}) == []


@pytest.mark.parametrize("reference, moments, server", [
    ("streamcert-kafka", ["reading", "just_committed", "reading"], "kafka"),
    ("streamcert-kafka-2pc", ["writing", "commit_in_flight", "commit_in_flight"], "kafka"),
    ("streamcert-pg-2pc", ["writing", "commit_in_flight", "commit_in_flight"], "postgres"),
])
def test_network_runs_aim_their_cuts_and_a_server_kill_at_the_moments_the_connector_talks(reference, moments, server):
    [run] = [r for r in plan(reference, load_connector(reference), seed=1) if r.name == "network"]
    schedule = run.scenario.schedule
    aimed = [spec for spec in schedule if spec.fault in ("network_moment", "server_kill_moment")]
    assert [spec.typed_params().moment for spec in aimed] == moments
    assert all(spec.target == server and spec.typed_params().slow_link == server for spec in aimed)
    cuts = [spec.typed_params().cut for spec in aimed if spec.fault == "network_moment"]
    assert len(set(cuts)) == 2 and set(cuts) <= {"reset_peer", "timeout", "limit_data", "down"}
    # the slowdowns stay on the clock; the input is fed while the faults run
    assert {spec.fault for spec in schedule[:2]} <= {"latency", "bandwidth", "slow_close", "slicer"}
    assert run.scenario.feed_batches_ahead > 0
    # seeded: another seed draws other cuts or aims
    [other] = [r for r in plan(reference, load_connector(reference), seed=2) if r.name == "network"]
    assert other.scenario.schedule != schedule


def test_failover_runs_go_on_a_three_broker_cluster_and_aim_at_the_leader_and_the_controller():
    for reference, requirement in (("streamcert-kafka", "SRC-8"), ("streamcert-kafka-2pc", "SNK-7")):
        [run] = [r for r in plan(reference, load_connector(reference), seed=1) if r.name == "failover"]
        assert run.brokers == 3 and run.judges == (requirement,)
        # the scenario itself says so: results.json records the cluster size and seed 003's safe topic settings
        assert run.scenario.brokers == 3 and run.scenario.topics == SAFE_TOPICS
        assert SAFE_TOPICS.config() == {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
        # paced: input keeps arriving through all three faults (~30 s of faults and gaps, 80 s of input)
        assert run.scenario.workload.total / run.scenario.workload.rate >= 60
        # the first leader kill is aimed at the moment the connector's requests go to the leader
        kill, isolate, controller = run.scenario.schedule
        assert (kill.fault, kill.typed_params().action) == ("node_moment", "node_kill")
        assert kill.typed_params().moment == "reading"  # the tasks run: a source's fetches, a sink's writes
        assert [(spec.fault, spec.typed_params().node) for spec in (isolate, controller)] == [
            ("node_isolate", "leader"), ("node_kill", "controller")]
    # a sink whose output is not Kafka has no Kafka participant to fail over
    assert not [r for r in plan("streamcert-pg-2pc", load_connector("streamcert-pg-2pc"), seed=1)
                if r.brokers != 1]


def test_the_cluster_runs_seed_003_before_any_failover_run_and_when_its_requirements_are_asked_for():
    from streamcert.conformance.plans import cluster_runs

    both = cluster_runs(1, None, failover_planned=True)
    assert [(run.connector, run.name, run.judges, run.brokers, run.procedure) for run in both] == [
        ("kafka-cluster", "acked-writes-safe", ("BRK-1",), 3, "acked_writes"),
        ("kafka-cluster", "acked-writes-unsafe", ("BRK-2",), 3, "acked_writes")]
    safe, unsafe = (run.scenario for run in both)
    assert safe.procedure.acks == "all" and unsafe.procedure.acks == "1"
    assert safe.topics.config() == {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
    assert unsafe.topics.config() == {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    # seed 003's failover goes through the registry and the timeline like any run's faults
    assert [(spec.fault, spec.target, spec.params["node"]) for spec in safe.schedule] == [
        ("node_isolate_kill", "kafka", "leader")]
    assert 5.0 <= safe.schedule[0].params["answering_s"] <= 7.0 and safe.brokers == 3
    assert cluster_runs(1, None, failover_planned=True) == both and cluster_runs(2, None, True) != both
    assert cluster_runs(1, None, failover_planned=False) == []  # the quick plan has no failover run
    # a failover run alone still gets its precondition; the cluster's requirements alone get their runs
    assert [run.judges for run in cluster_runs(1, {"SNK-7"}, failover_planned=True)] == [("BRK-1",)]
    assert [run.judges for run in cluster_runs(1, {"BRK-2"}, failover_planned=False)] == [("BRK-2",)]
    assert cluster_runs(1, {"SNK-1"}, failover_planned=False) == []


def test_a_certification_of_the_cluster_requirements_alone_plans_only_the_cluster_runs():
    from streamcert.conformance.certify import prepare

    certification = prepare(None, ["BRK-1", "brk-2"])
    assert [run.name for run in certification.runs] == ["acked-writes-safe", "acked-writes-unsafe"]
    assert certification.cluster_requirements() == ["BRK-1", "BRK-2"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_steady_kills_inside_a_driver_side_commit_strike_early_in_the_middle_and_late(seed):
    for quick, bands in ((False, 3), (True, 2)):
        kills = _moment_kills(random.Random(seed), quick)
        fractions = sorted(params["fraction"] for _fault, _target, params, _duration in kills
                           if params["moment"] == "commit_in_flight" and params["batch_class"] == "steady")
        assert len(fractions) == bands
        assert fractions[0] < 0.5 and fractions[-1] > 0.5  # a bug between two steps is struck wherever it lies
        # the late one measures back from the commit's end in round trips of the slowed link (its last step)
        from_end = [params for _fault, _target, params, _duration in kills if "round_trips_before_end" in params]
        assert [(p["moment"], p["batch_class"], p["fraction"]) for p in from_end] == [
            ("commit_in_flight", "steady", fractions[-1])]
        assert 1.25 <= from_end[0]["round_trips_before_end"] <= 2.25


def test_runs_that_restart_the_driver_on_a_local_master_keep_a_warm_standby_and_no_other_does():
    for reference in ("streamcert-kafka", "streamcert-pg-2pc", "streamcert-batch-aggregator"):
        for run in plan(reference, load_connector(reference), 1):
            restarts = any(spec.target == "driver" for spec in run.scenario.schedule)
            local = run.scenario.master.startswith("local[")
            assert run.scenario.warm_standby is (restarts and local), (reference, run.name)
    kills = {run.name: run for run in plan("streamcert-pg-2pc", load_connector("streamcert-pg-2pc"), 1)}
    assert kills["driver-kills"].scenario.warm_standby and not kills["zombies"].scenario.warm_standby
