"""The requirement catalogue: complete against SPEC §5, every fault and check it names exists, lookups and the
``streamcert requirements`` command."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from streamcert.cli import main
from streamcert.conformance.catalogue import (CATALOGUE, EVIDENCE_CHECKS, Requirement, ids_for, requirement,
                                              requirements)
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.registry import kinds
from streamcert.harness.verify.checkers import AggregatorBatchChecker, exactly_once_checkers

SPEC_IDS = ([f"SRC-{n}" for n in range(1, 12)] + [f"SNK-{n}" for n in range(1, 9)]
            + [f"AGG-{n}" for n in range(1, 7)] + [f"GEN-{n}" for n in range(1, 4)])
OUTPUT_CHECKERS = {checker.name for checker in exactly_once_checkers()} | {AggregatorBatchChecker.name}


def test_every_requirement_of_the_spec_is_in_the_catalogue_once():
    ids = [req.id for req in CATALOGUE]
    assert len(ids) == len(set(ids))
    assert set(SPEC_IDS) <= set(ids)


@pytest.mark.parametrize("req", CATALOGUE, ids=lambda r: r.id)
def test_each_requirement_names_faults_and_checks_that_exist(req):
    assert set(req.faults) <= set(kinds()), f"{req.id}: unknown fault kinds {set(req.faults) - set(kinds())}"
    unknown = set(req.checks) - OUTPUT_CHECKERS - set(EVIDENCE_CHECKS)
    assert unknown == set(), f"{req.id}: no checker or evidence check called {unknown}"
    assert req.id.split("-")[0] == {"source": "SRC", "sink": "SNK", "aggregator": "AGG", "general": "GEN",
                                        "broker": "BRK"}[req.kind]


def test_a_requirement_that_needs_a_fault_to_strike_says_so_with_its_evidence_check():
    """Where a kill must land in a window, a missed kill must make the verdict unknown: fault_reached decides it."""
    aimed = [req.id for req in CATALOGUE if "driver_kill_at" in req.faults and "fault_reached" not in req.checks]
    assert set(aimed) <= {"SNK-5", "SNK-8"}  # these judge the output whatever moment the kill hit


def test_what_applies_to_a_kind_is_its_own_and_the_general_requirements():
    assert ids_for("aggregator") == [f"AGG-{n}" for n in range(1, 7)] + ["GEN-1", "GEN-2", "GEN-3"]
    assert {req.kind for req in requirements("source")} == {"source", "general"}
    assert [req.id for req in requirements("broker")] == ["BRK-1", "BRK-2"]  # the cluster's, no connector's
    with pytest.raises(ConfigurationError, match="'connector'"):
        requirements("connector")


def test_a_requirement_is_found_by_id_and_an_unknown_one_lists_its_neighbours():
    assert requirement("snk-1").kind == "sink" and requirement(" SRC-11 ").optional is True
    with pytest.raises(ConfigurationError) as caught:
        requirement("SNK-99")
    assert "SNK-99" in str(caught.value) and "SNK-1" in caught.value.hint and "SRC-1" not in caught.value.hint


@pytest.mark.parametrize("changes", [{"id": "SNK-0"}, {"id": "XYZ-1"}, {"kind": "database"}, {"checks": ()},
                                     {"statement": "short"}])
def test_a_malformed_requirement_is_refused(changes):
    with pytest.raises(ValidationError):
        Requirement(**{**CATALOGUE[0].model_dump(), **changes})


def test_the_requirements_command_prints_the_catalogue_as_json_and_as_a_table(capsys):
    assert main(["requirements", "--kind", "sink", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in listed] == ids_for("sink")
    assert listed[0]["checks"] and listed[0]["pass_condition"]
    assert main(["requirements"]) == 0
    table = capsys.readouterr().out
    assert all(req_id in table for req_id in SPEC_IDS)
