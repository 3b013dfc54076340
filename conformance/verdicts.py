"""From runs to verdicts: each requirement of a connector is ``pass``, ``fail``, ``skip`` or ``unknown``.

- ``skip``: the connector does not claim the requirement; the reason is the one it gave (or, for an optional
  requirement, that it is optional).
- ``fail``: a check that decides the requirement found a violation in one of the runs that judge it.
- ``unknown``: nothing failed, but something could not be decided: a run did not complete, a check was unknown
  (the kill missed its moment, the fault never happened, the output stopped being read), or no run judged it.
- ``pass``: every check that decides it was valid on every run that judges it.

A requirement whose procedure uses faults is unknown unless those faults happened in the run (and, for the kills it
aims, :attr:`~streamcert.conformance.catalogue.Requirement.moments` / ``aim``, struck where it needs them), and
unless each of its :attr:`~streamcert.conformance.catalogue.Requirement.witnesses` was seen in one of its runs
(:mod:`streamcert.conformance.witnesses`): the reason names the missing one. Each
verdict keeps its evidence: the runs, their seeds, the faults as they happened, the checks with their first
violations, and the command that replays it.
Called in the harness's process once the runs are done.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from streamcert.conformance.catalogue import EVIDENCE_CHECKS, Requirement, capabilities
from streamcert.conformance.evidence import RunEvidence, evidence_check
from streamcert.conformance.plans import PlannedRun
from streamcert.conformance.witnesses import missing_witnesses, witness
from streamcert.harness.results import RunResult
from streamcert.harness.verify.aspects import aspect_of
from streamcert.harness.verify.checkers import UNKNOWN, CheckResult

__all__ = ["VERDICTS", "FULL_PLAN_ONLY", "Verdict", "CapabilityVerdict", "JudgedRun", "judge", "skipped",
           "capability_verdicts"]

VERDICTS = ("pass", "fail", "skip", "unknown")
#: Evidence key of a ``--quick`` certification's unknown verdict whose runs only the full plan has.
FULL_PLAN_ONLY = "full_plan_only"
#: Violations kept per check in a verdict's evidence.
_FIRST = 5
_FAULT_FIELDS = ("kind", "elapsed_s", "fault", "target", "params", "phase", "in_window", "reached", "aim",
                 "pending_batch", "latest_commit", "delay_ms", "error", "attempt", "moment", "executor_ids",
                 "busy_workers", "tries", "declared_lost", "lost_tasks", "replaced", "frozen_s", "zombie_ran_s",
                 "reason", "node", "leader_moved", "new_controller", "isr_shrank_or_leader_moved", "batch_class",
                 "strikes", "slowed", "let_go", "absent", "zombie_finished")


class Verdict(BaseModel):
    """One requirement of one connector."""

    model_config = ConfigDict(extra="forbid")

    connector: str = Field(description="the connector's name")
    requirement: str
    verdict: Literal["pass", "fail", "skip", "unknown"]
    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict,
                                     description="runs (scenario, seed, folder, faults, checks) and the replay "
                                                 "command")


class CapabilityVerdict(BaseModel):
    """A capability a connector claims, judged by the requirements behind it (catalogue ``CAPABILITIES``)."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["pass", "fail", "unknown"]
    requirements: dict[str, str] = Field(description="each requirement behind it -> its verdict (skip: waived with a "
                                                     "reason; absent: not judged by this certification)")


def capability_verdicts(claims: dict[str, tuple[str, Any]],
                        verdicts: list[Verdict]) -> dict[str, dict[str, CapabilityVerdict]]:
    """Connector -> capability -> verdict, for ``claims`` (connector name -> (kind, its claims)): pass when every
    requirement behind the capability the connector claims passed (those it waived with a reason show as ``skip``),
    fail when one failed, unknown otherwise (one not judged here: a ``--requirements`` or ``--quick``
    certification)."""
    by_id = {(v.connector, v.requirement): v.verdict for v in verdicts}
    out: dict[str, dict[str, CapabilityVerdict]] = {}
    for name, (kind, claimed) in claims.items():
        for capability, backing in capabilities(kind).items():
            if capability not in claimed:
                continue
            found = {req: by_id[(name, req)] for req in backing if (name, req) in by_id}
            verdict = ("fail" if "fail" in found.values() else
                       "pass" if len(found) == len(backing) and "pass" in found.values()
                       and set(found.values()) <= {"pass", "skip"} else "unknown")
            out.setdefault(name, {})[capability] = CapabilityVerdict(verdict=verdict, requirements=found)
    return out


@dataclass
class JudgedRun:
    """A planned run once it ran: its result, the evidence read from it, and its folder (relative to the
    certification's)."""

    planned: PlannedRun
    result: RunResult
    evidence: RunEvidence
    folder: Path
    #: the name of the connector whose run this is, when it stands in for ``planned`` (a shared run); None: its own
    host: str | None = None


def skipped(connector: Any, requirement: Requirement) -> Verdict:
    reason = str(connector.unclaimed.get(requirement.id, "")).strip()
    if not reason:
        reason = ("optional, and not claimed" if requirement.optional else
                  "neither claimed nor waived (the declaration gives no reason; strict mode refuses this)")
    return Verdict(connector=connector.name, requirement=requirement.id, verdict="skip", reason=reason)


def _checks_of(requirement: Requirement, run: JudgedRun) -> list[CheckResult]:
    by_name = {check["name"]: check for check in run.result.checks}
    checks = []
    for name in requirement.checks:
        if name in EVIDENCE_CHECKS:
            checks.append(evidence_check(name, run.evidence, requirement))
        elif name.partition(".")[0] in by_name:
            checker, _, aspect = name.partition(".")
            found = by_name[checker]
            result = CheckResult(checker, found["valid"], found.get("counts", {}), found.get("violations", []),
                                 found.get("error"), found.get("data", {}))
            checks.append(aspect_of(result, aspect) if aspect else result)
        else:
            checks.append(CheckResult(name, UNKNOWN, {}, [], f"the run has no {name} check"))
    if requirement.faults and "fault_reached" not in requirement.checks:
        checks.append(evidence_check("fault_reached", run.evidence, requirement))
    return checks


def _summary(check: CheckResult) -> str:
    if check.valid is False:
        found = {k: v for k, v in check.counts.items() if v and k not in ("acknowledged", "delivered", "records",
                                                                          "attempted", "ok")}
        first = check.violations[0] if check.violations else None
        return f"{check.name} invalid ({_counts(found) or check.error or 'violations'})" + (
            f", first: {first}" if first else "")
    return f"{check.name} unknown ({check.error or 'undecided'})"


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in list(counts.items())[:4])


def _faults(run: JudgedRun) -> list[dict[str, Any]]:
    return [{key: event[key] for key in _FAULT_FIELDS if key in event} for event in run.result.history
            if event["kind"] in ("fault-start", "fault-stop", "fault-error", "fault-skip", "driver-stop")]


def _run_evidence(run: JudgedRun, checks: list[CheckResult]) -> dict[str, Any]:
    return {"scenario": run.planned.name, "seed": run.result.seed, "folder": str(run.folder),
            "complete": run.result.complete, "error": run.result.error, "driver_attempts": run.result.driver_attempts,
            "faults": _faults(run),
            "checks": [{**check.to_dict(), "violations": check.to_dict()["violations"][:_FIRST]} for check in checks]}


def judge(connector: Any, requirement: Requirement, runs: list[JudgedRun], planned: int | None = None,
          in_full_plan: bool = False) -> Verdict:
    """The verdict of a claimed ``requirement`` from the ``runs`` that judge it (all of them must pass); ``planned``
    is how many runs were meant to judge it (when fewer ran, the certification stopped early); ``in_full_plan``
    says the full certification has a run for it (this one was ``--quick``)."""
    name = connector.name
    if not runs:
        reason = ("its runs did not happen: the certification stopped before them" if planned else
                  "not run by --quick: the full certification (without --quick) judges it" if in_full_plan else
                  "no scenario of this version of streamcert exercises it yet")
        # a --quick certification gates on what it judged (CertificationResult.gate_passed): not on this one
        return Verdict(connector=name, requirement=requirement.id, verdict="unknown", reason=reason,
                       evidence={FULL_PLAN_ONLY: True} if in_full_plan and not planned else {})
    skipped_faults = _skipped_faults(requirement, runs)
    if skipped_faults and not any(event.get("fault") in requirement.faults for run in runs
                                  for event in run.evidence.fault_starts()):
        return Verdict(connector=name, requirement=requirement.id, verdict="skip",
                       reason="its faults need control of servers this stack does not have: " + skipped_faults,
                       evidence={"runs": [_run_evidence(run, []) for run in runs]})
    verdict = _judge_runs(name, requirement, runs)
    if verdict.verdict == "pass" and planned and len(runs) < planned:  # an interrupted certification's half
        verdict.verdict = "unknown"
        verdict.reason = (f"only {len(runs)} of its {planned} runs happened (the certification stopped before the "
                          f"others); they passed: {verdict.reason}")
    if skipped_faults:
        verdict.reason += f" (skipped here: {skipped_faults})"
    cancelled = sum(1 for run in runs for event in run.result.history if event["kind"] == "fault-cancelled")
    if cancelled and verdict.verdict == "unknown":
        verdict.reason += (f" ({cancelled} fault(s) cancelled after a run's first finding, --fail-fast: certify "
                           "without it to judge everything)")
    return verdict


def _skipped_faults(requirement: Requirement, runs: list[JudgedRun]) -> str:
    """The requirement's faults that the runs' stack could not carry out, with why (once each)."""
    reasons = {f"{event.get('fault')}: {event.get('reason')}" for run in runs for event in run.result.history
               if event["kind"] == "fault-skip" and event.get("fault") in requirement.faults}
    return "; ".join(sorted(reasons))


def _judge_runs(name: str, requirement: Requirement, runs: list[JudgedRun]) -> Verdict:
    failed, unknown, evidence = [], [], []
    found: dict[str, list[tuple[str, CheckResult]]] = {}
    for run in runs:
        if not run.result.complete:
            unknown.append(f"{run.planned.name}: the run did not complete ({(run.result.error or '').splitlines()[0]})")
            evidence.append(_run_evidence(run, []))
            continue
        checks = _checks_of(requirement, run)
        seen = [witness(witness_name, run.evidence) for witness_name in requirement.witnesses]
        for result in seen:
            found.setdefault(result.name, []).append((run.planned.name, result))
        evidence.append({**_run_evidence(run, checks), "witnesses": [result.to_dict() for result in seen]})
        failed += [f"{run.planned.name}: {_summary(c)}" for c in checks if c.valid is False]
        unknown += [f"{run.planned.name}: {_summary(c)}" for c in checks if c.valid not in (True, False)]
    if all(run.result.complete for run in runs):  # an incomplete run's witnesses are not missing: the run is
        unknown += missing_witnesses(requirement, found)
    record = {"runs": evidence}
    if failed:
        return Verdict(connector=name, requirement=requirement.id, verdict="fail", reason="; ".join(failed),
                       evidence=record)
    if unknown:
        return Verdict(connector=name, requirement=requirement.id, verdict="unknown", reason="; ".join(unknown),
                       evidence=record)
    scenarios = ", ".join(run.planned.name for run in runs)
    witnessed = f"; witnessed: {', '.join(requirement.witnesses)}" if requirement.witnesses else ""
    return Verdict(connector=name, requirement=requirement.id, verdict="pass",
                   reason=f"every check of {', '.join(requirement.checks)} valid on {scenarios}{witnessed}",
                   evidence=record)
