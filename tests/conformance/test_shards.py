"""Sharding a certification's plan: every run in exactly one shard, the same split everywhere, the shards' expected
times balanced, and what a shard cannot judge alone said so."""

from __future__ import annotations

import pytest

from streamcert.conformance.certify import prepare
from streamcert.conformance.shards import RUN_COST, Shard, assign, parse_shard
from streamcert.harness.errors import ConfigurationError


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", ""])
def test_a_shard_that_is_not_i_of_n_is_refused_with_a_hint(text):
    with pytest.raises(ConfigurationError, match="not a shard") as caught:
        parse_shard(text)
    assert "1 <= I <= N" in caught.value.hint


def test_a_shard_is_read_as_i_of_n():
    assert parse_shard(" 2 / 3 ") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"


@pytest.fixture(scope="module")
def full_plan():
    return prepare(None, None, seed=1, quick=False).runs


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_every_run_of_the_plan_is_in_exactly_one_shard_and_the_split_is_balanced(full_plan, count):
    shards = assign(full_plan, count)
    assert sorted(shards) == sorted((run.connector, run.name) for run in full_plan)
    assert set(shards.values()) <= set(range(1, count + 1))
    hosted = {(run.connector, run.name) for run in full_plan if run.hosted_by}  # runs only after a finding
    loads = [sum(RUN_COST.get(name, 30.0) for (connector, name), shard in shards.items()
                 if shard == index and (connector, name) not in hosted)
             for index in range(1, count + 1)]
    assert max(loads) - min(loads) <= max(RUN_COST.values())  # greedy: off by at most one run
    assert assign(list(reversed(full_plan)), count) == shards  # the plan's order does not change the split


def test_each_shard_runs_its_part_and_knows_where_the_others_are(full_plan):
    parts = [prepare(None, None, seed=1, quick=False, shard=Shard(index, 3)) for index in (1, 2, 3)]
    mine = [{(run.connector, run.name) for run in part.runs} - set(part.elsewhere) for part in parts]
    assert set().union(*mine) == {(run.connector, run.name) for run in full_plan}
    assert sum(len(runs) for runs in mine) == len(full_plan)  # disjoint
    assert {where for part in parts for where in part.elsewhere.values()} == {"1/3", "2/3", "3/3"}
    assert all(part.elsewhere[key] != f"{index}/3" for index, part in enumerate(parts, 1) for key in part.elsewhere)


@pytest.mark.parametrize(("cores", "gib", "jobs"), [(2, 24, 1), (4, 16, 2), (8, 6, 1), (16, 64, 8), (1, 1, 1)])
def test_the_default_jobs_are_one_per_two_cores_and_four_gib_available(monkeypatch, cores, gib, jobs):
    import types

    import psutil

    from streamcert.conformance.certify import default_jobs

    monkeypatch.setattr("os.cpu_count", lambda: cores)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=gib * 2 ** 30))
    assert default_jobs() == jobs


def _verdict(requirement: str, verdict: str, **evidence):
    from streamcert.conformance.verdicts import Verdict

    return Verdict(connector="c", requirement=requirement, verdict=verdict, reason="r", evidence=evidence)


@pytest.mark.parametrize("here, shard_passes", [("pass", True), (None, True), ("unknown", False)])
def test_a_shard_passes_when_what_it_ran_passed_and_the_rest_is_in_other_shards(here, shard_passes):
    from streamcert.conformance.results import CertificationResult

    waiting = _verdict("SRC-9", "unknown", elsewhere={"bounded": "2/2"}, here=here)
    shard = CertificationResult(seed=1, shard="1/2", complete=True, verdicts=[_verdict("SRC-7", "pass"), waiting])
    assert shard.passed() is shard_passes and shard.passed_here(waiting) is shard_passes
    whole = shard.model_copy(update={"shard": None})
    assert not whole.passed() and not whole.passed_here(waiting)  # unsharded, an unknown is never a pass
    found = shard.model_copy(update={"verdicts": [_verdict("SRC-7", "fail"), waiting]})
    assert not found.passed()  # a finding in a shard fails it
    undecided = shard.model_copy(update={"verdicts": [_verdict("SRC-7", "unknown"), waiting]})
    assert not undecided.passed()  # unknown for a reason of its own
    assert not shard.model_copy(update={"complete": False}).passed()


def test_a_quick_certification_gates_on_what_it_judged_and_is_never_a_certificate():
    """``--quick`` exits 0 when every requirement it judged passed: those only the full plan judges are unknown and
    not held against it. Any other unknown, a finding, or an incomplete run fails the gate; a full certification's
    gate is its certificate."""
    from streamcert.conformance.results import CertificationResult

    waiting = _verdict("SNK-7", "unknown", full_plan_only=True)
    quick = CertificationResult(seed=1, quick=True, complete=True, verdicts=[_verdict("SNK-1", "pass"), waiting])
    assert quick.gate_passed() and not quick.passed() and quick.full_plan_only(waiting)
    assert not quick.model_copy(update={"verdicts": [_verdict("SNK-1", "fail"), waiting]}).gate_passed()
    assert not quick.model_copy(update={"verdicts": [_verdict("SNK-1", "unknown"), waiting]}).gate_passed()
    assert not quick.model_copy(update={"verdicts": [waiting]}).gate_passed()  # it judged nothing
    assert not quick.model_copy(update={"complete": False}).gate_passed()
    full = quick.model_copy(update={"quick": False})
    assert not full.gate_passed() and not full.full_plan_only(waiting)
    assert full.model_copy(update={"verdicts": [_verdict("SNK-1", "pass")]}).gate_passed()
