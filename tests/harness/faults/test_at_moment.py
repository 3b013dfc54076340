"""Faults aimed at a moment of the query (network cuts, server kills, leader failovers): their parameters are checked
when the schedule is read (a cut's own attributes included), each kind strikes the fault it names, and each belongs
to the family its struck fault does."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcert.conformance.catalogue import FAULT_FAMILIES
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.at_moment import CUTS, MOMENT_FAULTS, FaultAtMoment
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.registry import kinds
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.history import History
from tests.harness.faults.planned_runs import sink_run


def _spec(fault: str, target: str, **params) -> FaultSpec:
    return FaultSpec(fault, target, 0.0, 1.0, {"moment": "commit_in_flight", **params})


@pytest.mark.parametrize("params, problem", [
    ({"cut": "timeout", "cut_params": {"bytes": 3}}, "cut_params do not fit timeout"),
    ({"cut": "latency"}, "parameter cut='latency' must be one of reset_peer, timeout, limit_data, down"),
    ({"cut": "down", "moment": "output_visible"}, "must be one of planning, reading"),
    ({"cut": "down", "batch_class": "first"}, "parameter batch_class='first'"),
    ({"cut": "limit_data", "cut_params": {"bytes": 0}}, "cut_params do not fit limit_data"),
])
def test_a_cut_with_wrong_parameters_is_refused_when_the_schedule_is_read(params, problem):
    with pytest.raises(ConfigurationError) as raised:
        _spec("network_moment", "postgres", **params)
    assert problem in str(raised.value)


class _Environment:
    def link(self, _name):
        return None


def _built(spec: FaultSpec, tmp_path: Path) -> FaultAtMoment:
    context = FaultContext(history=History(), workdir=tmp_path, driver=object(),
                           environment=_Environment())
    return FaultAtMoment(spec, context)


@pytest.mark.parametrize("spec, struck, params", [
    (_spec("network_moment", "postgres", cut="reset_peer", cut_params={"timeout": 0}), "reset_peer", {"timeout": 0}),
    (_spec("network_moment", "kafka", cut="down"), "down", {}),
    (_spec("server_kill_moment", "postgres"), "database_kill", {}),
    (_spec("server_kill_moment", "kafka"), "broker_kill", {}),
    (_spec("node_moment", "kafka", action="node_isolate_kill", answering_s=2.0), "node_isolate_kill",
     {"node": "leader", "partition": 0, "answering_s": 2.0}),
])
def test_each_kind_strikes_the_fault_it_names_on_its_target(spec, struck, params, tmp_path):
    fault = _built(spec, tmp_path)
    assert (fault._inner.spec.fault, fault._inner.spec.target, fault._inner.spec.params) == (struck, spec.target,
                                                                                               params)
    assert not fault.kills_driver


def test_each_kind_is_in_the_families_of_what_it_strikes():
    family_of = {kind: family for family, members in FAULT_FAMILIES.items() for kind in members}
    assert set(MOMENT_FAULTS) <= set(kinds())
    assert family_of["network_moment"] == "network" and all(family_of[cut] == "network" for cut in CUTS)
    assert "server_kill_moment" in FAULT_FAMILIES["broker"] and "server_kill_moment" in FAULT_FAMILIES["database"]
    assert "node_moment" in FAULT_FAMILIES["failover"]


def _network_run(stack, tmp_path: Path, reference: str, schedule: list[FaultSpec]):
    return sink_run(stack, tmp_path, reference, "network", "SNK-7", schedule, 1500)


@pytest.mark.integration
def test_a_cut_of_the_database_link_during_a_commit_finds_a_statement_in_flight_and_witnesses_snk7(stack, tmp_path):
    from streamcert.conformance.catalogue import requirement
    from streamcert.conformance.verdicts import judge

    cut = FaultSpec("network_moment", "postgres", 0.0, 1.0, {
        "moment": "commit_in_flight", "cut": "reset_peer", "cut_params": {"timeout": 0}, "fraction": 0.5,
        "slow_link": "postgres", "slow_streams": "downstream", "latency_ms": 200})
    sink, ran = _network_run(stack, tmp_path, "streamcert-pg-2pc", [cut])
    [start] = [e for e in ran.result.history if e["kind"] == "fault-start"]
    assert start["reached"] is True and start["struck_fault"] == "reset_peer"
    [strike] = [s for s in start["strikes"] if s["landed"]]
    assert strike["in_flight"] or any(s["state"] == "active" for s in strike["statements"])
    verdict = judge(sink, requirement("SNK-7"), [ran])
    assert verdict.verdict == "pass", verdict.reason
    assert "witnessed: cut_in_flight" in verdict.reason
