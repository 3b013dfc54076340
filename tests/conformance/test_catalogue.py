"""The requirement catalogue: complete against SPEC §5, every fault and check it names exists, lookups and the
``streamcert requirements`` command."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from streamcert.cli import main
from streamcert.conformance.catalogue import (CAPABILITIES, CATALOGUE, EVIDENCE_CHECKS, FAULT_FAMILIES, Requirement,
                                              ids_for, requirement, requirements)
from streamcert.conformance.plans import cluster_runs, plan
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.registry import kinds
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.verify.aspects import aspect_names
from streamcert.harness.verify.checkers import AggregatorBatchChecker, exactly_once_checkers
from streamcert.harness.verify.event_time import EventTimeDriftChecker

SPEC_IDS = ([f"SRC-{n}" for n in range(1, 12)] + [f"SNK-{n}" for n in range(1, 9)]
            + [f"AGG-{n}" for n in range(1, 7)] + [f"GEN-{n}" for n in range(1, 4)])
OUTPUT_CHECKERS = ({checker.name for checker in exactly_once_checkers()}
                   | {AggregatorBatchChecker.name, EventTimeDriftChecker.name})


def test_every_requirement_of_the_spec_is_in_the_catalogue_once():
    ids = [req.id for req in CATALOGUE]
    assert len(ids) == len(set(ids))
    assert set(SPEC_IDS) <= set(ids)


@pytest.mark.parametrize("req", CATALOGUE, ids=lambda r: r.id)
def test_each_requirement_names_faults_and_checks_that_exist(req):
    assert set(req.faults) <= set(kinds()), f"{req.id}: unknown fault kinds {set(req.faults) - set(kinds())}"
    unknown = set(req.checks) - OUTPUT_CHECKERS - set(EVIDENCE_CHECKS) - aspect_names()
    assert unknown == set(), f"{req.id}: no checker or evidence check called {unknown}"
    assert req.id.split("-")[0] == {"source": "SRC", "sink": "SNK", "aggregator": "AGG", "general": "GEN",
                                        "broker": "BRK"}[req.kind]


def test_a_requirement_that_needs_a_fault_to_strike_says_so_with_its_evidence_check():
    """Where a kill must land in a window, a missed kill must make the verdict unknown: fault_reached decides it."""
    aimed = [req.id for req in CATALOGUE if (req.moments or req.aim) and "fault_reached" not in req.checks]
    assert aimed == []
    assert {req.id for req in CATALOGUE if req.moments} == {"SRC-1", "SNK-1", "SNK-3", "SNK-4", "AGG-4"}


def test_a_requirement_names_its_faults_by_family_and_the_kinds_follow():
    assert requirement("SNK-2").faults == FAULT_FAMILIES["task-kill"]
    assert set(requirement("SNK-7").faults) >= {"latency", "broker_restart", "database_kill", "node_isolate"}
    assert requirement("GEN-1").faults == ()
    with pytest.raises(ValidationError, match="unknown fault families"):
        Requirement(**{**CATALOGUE[0].model_dump(exclude={"faults"}), "fault_families": ("meteor",)})
    with pytest.raises(ValidationError, match="unknown moments"):
        Requirement(**{**CATALOGUE[0].model_dump(exclude={"faults"}), "moments": ("lunch",)})


# -- the catalogue and the plans agree: a requirement is one unit of change ------------------------------

_REFERENCES = ("streamcert-kafka", "spark-kafka", "streamcert-kafka-2pc", "streamcert-pg-2pc", "spark-kafka-sink",
               "spark-files", "streamcert-batch-aggregator",
               "tests.external_system.ledger:SINK",  # a sink with a system of its own: the system faults
               "tests.external_system.ledger:SOURCE")  # a source reading a system of its own over a link


@pytest.fixture(scope="module")
def full_plans():
    """Every reference connector's full plan (seed 1, its own fault points included) and the cluster's runs."""
    runs = []
    for reference in _REFERENCES:
        connector = load_connector(reference)
        runs += [(connector.kind, run) for run in plan(reference, connector, seed=1)]
    return runs + [("broker", run) for run in cluster_runs(1, None, failover_planned=True)]


def test_every_run_a_requirement_names_is_planned_and_judges_it(full_plans):
    planned = {(kind, run.name): run for kind, run in full_plans}
    for req in CATALOGUE:
        kinds = ("source", "sink", "aggregator") if req.kind == "general" else (req.kind,)
        for name in req.runs:
            found = [planned[(kind, name)] for kind in kinds if (kind, name) in planned]
            assert found, f"{req.id} names run {name!r}, which no plan of a {req.kind} has"
    assert [req.id for req in CATALOGUE if not req.runs] == []  # every requirement has a scenario


def test_each_fault_family_a_requirement_names_is_carried_by_a_run_that_judges_it(full_plans):
    """Catalogue fault lists may not drift from the plans (a family listed but never planned would be a claim the
    certificate does not back)."""
    scheduled = {}
    for _kind, run in full_plans:
        kinds = {spec.fault for spec in run.scenario.schedule}
        for req_id in run.judges:
            scheduled.setdefault(req_id, set()).update(kinds)
    for req in CATALOGUE:
        for family in req.fault_families:
            assert set(FAULT_FAMILIES[family]) & scheduled.get(req.id, set()), (
                f"{req.id} lists the {family} family, and no run that judges it carries one of its faults")


def test_every_fault_a_run_carries_belongs_to_a_requirement_it_judges(full_plans):
    for kind, run in full_plans:
        families = {kind_ for req_id in run.judges for kind_ in requirement(req_id).faults}
        for spec in run.scenario.schedule if run.scenario else ():
            assert spec.fault in families, (f"{kind} run {run.name} carries {spec.fault}, which no requirement it "
                                            f"judges ({', '.join(run.judges)}) lists")


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
        Requirement(**{**CATALOGUE[0].model_dump(exclude={"faults"}), **changes})


def test_the_requirements_command_prints_the_catalogue_as_json_and_as_a_table(capsys):
    assert main(["requirements", "--kind", "sink", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in listed] == ids_for("sink")
    assert listed[0]["checks"] and listed[0]["pass_condition"]
    assert main(["requirements"]) == 0
    table = capsys.readouterr().out
    assert all(req_id in table for req_id in SPEC_IDS)


def test_each_capability_stands_on_requirements_of_its_kind():
    for capability, by_kind in CAPABILITIES.items():
        for kind, backing in by_kind.items():
            assert backing and {requirement(req).kind for req in backing} == {kind}, (capability, kind)
