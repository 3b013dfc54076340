"""Every mutant (a connector broken on purpose, streamcert.conformance.mutants) is caught: its certification fails
exactly the requirements its bug breaks and passes the others certified with it. A check that cannot fail is not
worth having; these are the proof that each can."""

from __future__ import annotations

import dataclasses
import importlib
import time

import psycopg
import pytest

from streamcert.conformance.certify import certify, prepare
from streamcert.conformance.mutants import MUTANTS
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.verify.evidence import fault_reached


def _name(mutant) -> str:
    return mutant.reference.split(".")[-1].split(":")[0]


#: Mutants whose whole certification takes two to three minutes (a driver-kills run restarting a stateful query six
#: times, a zombies run on three executor JVMs): ``tox -e mutants`` and ``tox -e long`` certify them on the whole plan
#: (exactly the requirements they break fail, the others pass); the default run catches each with only the faults
#: that reach its bug, to stay within its half hour. For each: run name -> the faults (fault, target, params,
#: duration) that replace that run's schedule, one after the other; runs not named keep theirs.
CATCHING_FAULTS: dict[str, dict[str, list[tuple[str, str, dict, float]]]] = {
    # between the decision record (written first: the bug) and the copy's commit
    "kafka_ledger_outside_txn": {"driver-kills": [("driver_kill_at", "driver", {"point": "kafka-2pc.before-commit"},
                                                   0.0)]},
    # in the micro-batch after one whose flush the mutant parked in scratch space, before its sink commits
    "aggregator_emits_after_barrier": {"driver-kills": [("driver_kill_at", "driver",
                                                         {"point": "kafka-2pc.before-commit"}, 0.0)]},
    # once a batch's rows are visible and before Spark commits it: its replay must commit nothing again
    "sink_decision_overwritten": {"driver-kills": [("driver_kill_on_output", "driver", {}, 0.0)]},
    # a failed attempt after prepare (its rows already committed by write()), and one zombie attempt
    "sink_commit_in_write": {"task-failures": [("task_fail_at", "executor", {"point": "pg-2pc.after-prepare"}, 1.0)],
                             "zombies": [("task_zombie", "executor", {}, 0.0)]},
}
LONG_RUNS = frozenset(CATCHING_FAULTS)


def _certified(mutants) -> list:
    return [pytest.param(m, id=_name(m), marks=[pytest.mark.slow] if _name(m) in LONG_RUNS else [])
            for m in mutants]


@pytest.mark.parametrize("mutant", MUTANTS, ids=_name)
def test_a_mutant_is_marked_broken_names_its_bug_and_claims_what_it_breaks(mutant):
    module = importlib.import_module(mutant.reference.split(":")[0])
    assert module.__doc__.startswith("MUTANT, BROKEN ON PURPOSE")
    connector = load_connector(mutant.reference)
    assert connector.name.startswith("mutant-") and mutant.bug
    assert mutant.breaks and set(mutant.requirements) <= set(connector.claims)
    assert not mutant.breaks & mutant.keeps


def test_the_mutants_cover_sources_and_sinks_with_distinct_bugs():
    kinds = {load_connector(m.reference).kind for m in MUTANTS}
    assert {"source", "sink", "aggregator"} <= kinds
    assert len({m.reference for m in MUTANTS}) == len(MUTANTS) >= 10
    assert LONG_RUNS <= {_name(m) for m in MUTANTS}  # the default run catches every mutant, these on their faults
    in_default_run = {load_connector(m.reference).kind for m in MUTANTS if _name(m) not in LONG_RUNS}
    assert in_default_run == kinds  # a mutant of each kind on its whole plan, too


@pytest.fixture
def tidy_database(stack):
    """A mutant may leave prepared transactions behind (that is its bug): roll back what the test left, so later
    tests on the shared server start clean."""
    began = time.time()
    yield stack
    with psycopg.connect(stack.endpoints.postgres_dsn, autocommit=True) as conn:
        gids = [row[0] for row in conn.execute("select gid from pg_prepared_xacts where database = "
                                               "current_database() and prepared >= to_timestamp(%s)", (began,))]
        for gid in gids:
            conn.execute(psycopg.sql.SQL("rollback prepared {}").format(psycopg.sql.Literal(gid)))


@pytest.mark.integration
@pytest.mark.parametrize("mutant", _certified(MUTANTS))
def test_each_mutant_fails_exactly_the_requirements_its_bug_breaks(mutant, tidy_database, tmp_path):
    result = certify(prepare([mutant.reference], mutant.requirements, seed=mutant.seed, quick=mutant.quick), tmp_path,
                     environment=tidy_database)
    verdicts = {v.requirement: v for v in result.verdicts}
    seen = {req: (v.verdict, v.reason[:300]) for req, v in verdicts.items()}
    assert result.complete and set(verdicts) == set(mutant.requirements), seen
    assert {req for req, v in verdicts.items() if v.verdict == "fail"} == set(mutant.breaks), seen
    assert {req for req in mutant.keeps if verdicts[req].verdict == "pass"} == set(mutant.keeps), seen
    # caught by its bug, not because it cannot run at all: every judged run delivered records
    for req in mutant.breaks:
        for run in verdicts[req].evidence["runs"]:
            assert not _cannot_run(run), (req, run["scenario"], run["error"], run["checks"][:1])


@pytest.mark.integration
@pytest.mark.parametrize("mutant", [m for m in MUTANTS if _name(m) in LONG_RUNS], ids=_name)
def test_a_long_mutant_is_caught_by_the_faults_that_reach_its_bug(mutant, tidy_database, tmp_path):
    """The default run's catch of a mutant whose whole certification is long: the same certification on the
    requirements its bug breaks, with the runs' schedules cut to :data:`CATCHING_FAULTS` (and their input to what
    those leave); every requirement it breaks fails, on runs that delivered records, with faults that struck."""
    certification = prepare([mutant.reference], sorted(mutant.breaks), seed=mutant.seed, quick=mutant.quick)
    certification.runs = [_targeted(run, CATCHING_FAULTS[_name(mutant)]) for run in certification.runs]
    result = certify(certification, tmp_path, environment=tidy_database)
    verdicts = {v.requirement: v for v in result.verdicts}
    seen = {req: (v.verdict, v.reason[:300]) for req, v in verdicts.items()}
    assert result.complete and {req for req, v in verdicts.items() if v.verdict == "fail"} == set(mutant.breaks), seen
    for req in mutant.breaks:
        for run in verdicts[req].evidence["runs"]:
            assert not _cannot_run(run), (req, run["scenario"], run["error"], run["checks"][:1])
            # each fault struck what it aimed at (its point reached, its window open), none failed to start
            reached = fault_reached(run["faults"])
            assert reached.valid is True, (req, run["scenario"], reached.error, reached.violations)


def _targeted(run, catching: dict[str, list[tuple[str, str, dict, float]]]):
    """``run`` with its schedule replaced by ``catching[run.name]`` and its input cut as the plan sizes it for those
    faults (:func:`~streamcert.conformance.plans._kill_records`, :func:`~streamcert.conformance.plans._zombie_records`);
    ``run`` itself when ``catching`` does not name it."""
    from streamcert.conformance.plans import _chain, _kill_records, _zombie_records

    if run.name not in catching:
        return run
    faults = catching[run.name]
    batch = run.scenario.options["max_records_per_batch"]
    total = {"driver-kills": _kill_records, "zombies": _zombie_records}.get(run.name)
    workload = run.scenario.workload
    if total is not None:
        workload = dataclasses.replace(workload, total=total(batch, faults))
    schedule = run.scenario.schedule  # the plan's own gap between chained faults
    gap_s = schedule[1].at_s if len(schedule) > 1 else 2.0
    scenario = run.scenario.model_copy(update={"schedule": _chain(faults, gap_s=gap_s), "workload": workload})
    return dataclasses.replace(run, scenario=scenario)


def _cannot_run(run: dict) -> bool:
    """A run in which the connector delivered nothing it owed (it crashed on every batch, say)."""
    delivered = [check["counts"]["delivered"] for check in run["checks"]
                 if check["name"] == "lost" and check["counts"].get("acknowledged")]
    return bool(delivered) and max(delivered) == 0
