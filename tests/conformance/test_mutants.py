"""Every mutant (a connector broken on purpose, streamcert.conformance.mutants) is caught: its certification fails
exactly the requirements its bug breaks and passes the others certified with it. A check that cannot fail is not
worth having; these are the proof that each can."""

from __future__ import annotations

import importlib
import time

import psycopg
import pytest

from streamcert.conformance.certify import certify, prepare
from streamcert.conformance.mutants import MUTANTS
from streamcert.harness.run.connectors import load_connector


def _name(mutant) -> str:
    return mutant.reference.split(".")[-1].split(":")[0]


#: Mutants the default test run certifies: bugs every run of their plan shows (a baseline's or a bounded run's
#: findings), and one that only the kills timed by observed moments reach (most kills of a source's grid land after
#: its tasks read). The others' catch depends on the reach of those kills too: ``tox -e long`` certifies each of
#: them here (exactly the requirements its bug breaks fail), and ``tox -e mutants`` measures how often they are
#: caught over five seeds with the connectors' own fault points off (the mutation score).
IN_DEFAULT_RUN = frozenset({"source_even_split", "source_off_by_one", "source_read_uncommitted",
                            "aggregator_waits_for_input",
                            # and one whose bug only a kill after its tasks read shows, with no fault point to help
                            "source_commits_on_read"})


def _certified(mutants) -> list:
    return [pytest.param(m, id=_name(m), marks=[] if _name(m) in IN_DEFAULT_RUN else [pytest.mark.slow])
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
    assert len({m.reference for m in MUTANTS}) == len(MUTANTS) >= 16
    assert IN_DEFAULT_RUN <= {_name(m) for m in MUTANTS}


def test_no_mutant_marks_its_bug_with_a_fault_point():
    """The suite must find a bug where the connector does not help: a mutant's own code reaches no fault point."""
    import inspect

    for mutant in MUTANTS:
        source = inspect.getsource(importlib.import_module(mutant.reference.split(":")[0]))
        assert "fault_points" not in source and "reached(" not in source, _name(mutant)


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
    # a mutant that keeps nothing it is certified on fails fast: a record delivered twice is its catch, and the
    # faults after it could only make the run longer (one that keeps a requirement needs every fault to pass it)
    certification = prepare([mutant.reference], mutant.requirements, seed=mutant.seed, quick=mutant.quick,
                            cooperative=False, fail_fast=not mutant.keeps)
    result = certify(certification, tmp_path, environment=tidy_database)
    verdicts = {v.requirement: v for v in result.verdicts}
    seen = {req: (v.verdict, v.reason[:300]) for req, v in verdicts.items()}
    assert result.complete and set(verdicts) == set(mutant.requirements), seen
    assert {req for req, v in verdicts.items() if v.verdict == "fail"} == set(mutant.breaks), seen
    assert {req for req in mutant.keeps if verdicts[req].verdict == "pass"} == set(mutant.keeps), seen
    # caught by its bug, not because it cannot run at all: every judged run delivered records
    for req in mutant.breaks:
        for run in verdicts[req].evidence["runs"]:
            assert not _cannot_run(run), (req, run["scenario"], run["error"], run["checks"][:1])


def _cannot_run(run: dict) -> bool:
    """A run in which the connector delivered nothing it owed (it crashed on every batch, say)."""
    delivered = [check["counts"]["delivered"] for check in run["checks"]
                 if check["name"] == "lost" and check["counts"].get("acknowledged")]
    return bool(delivered) and max(delivered) == 0
