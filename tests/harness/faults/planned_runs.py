"""A run of a reference sink's plan with a schedule of a test's own, judged as a certification judges it."""

from __future__ import annotations

from pathlib import Path

from streamcert.conformance.certify import evidence_of
from streamcert.conformance.plans import plan
from streamcert.conformance.verdicts import JudgedRun
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.scenario import run_scenario

__all__ = ["sink_run"]


def sink_run(stack, tmp_path: Path, reference: str, name: str, wanted: str, schedule: list[FaultSpec], total: int,
             quick: bool = False):
    """The sink ``reference``, and its plan's run ``name`` (of the plan for requirement ``wanted``) run on ``stack``
    with ``schedule`` and ``total`` records instead of the plan's, judged (a run that did not complete fails)."""
    sink = load_connector(reference, "sink")
    [planned] = [run for run in plan(reference, sink, seed=1, quick=quick, wanted={wanted}) if run.name == name]
    workload = planned.scenario.workload.__class__(**{**planned.scenario.workload.as_dict(), "total": total})
    scenario = planned.scenario.model_copy(update={"schedule": schedule, "workload": workload})
    result = run_scenario(stack, scenario, tmp_path / "run")
    assert result.complete, result.error
    return sink, JudgedRun(planned, result, evidence_of(planned, result, tmp_path / "run", sink), Path("run"))
