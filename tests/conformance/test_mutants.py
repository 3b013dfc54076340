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


#: Mutants whose certification takes two to three minutes (a driver-kills run restarting a stateful query six
#: times, or the full plan's rescale): ``tox -e mutants`` and ``tox -e long`` certify them, the default run does
#: not, to stay within its half hour. The default run still catches a mutant of each kind end to end, and every
#: requirement these break has its checker shown failing on crafted histories in tests/harness/verify.
LONG_RUNS = frozenset({"kafka_ledger_outside_txn", "aggregator_emits_after_barrier", "aggregator_virtual_keys"})


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
    assert LONG_RUNS <= {_name(m) for m in MUTANTS}
    in_default_run = {load_connector(m.reference).kind for m in MUTANTS if _name(m) not in LONG_RUNS}
    assert in_default_run == kinds  # each kind is caught end to end in the default run


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


def _cannot_run(run: dict) -> bool:
    """A run in which the connector delivered nothing it owed (it crashed on every batch, say)."""
    delivered = [check["counts"]["delivered"] for check in run["checks"]
                 if check["name"] == "lost" and check["counts"].get("acknowledged")]
    return bool(delivered) and max(delivered) == 0
