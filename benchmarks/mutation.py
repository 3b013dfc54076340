"""Benchmark: the mutation score. Every project mutant certified on the whole (full, not ``--quick``) plan of the
requirements it is judged on, with the connectors' own fault points left out (``cooperative=False``), over several
seeds; the detection rate is a measured figure (SPEC §8, §9: >= 95 % over 5 seeds), not a test that forces a fault.
``--plan quick`` measures the quick plan's instead (what a CI gate of ``certify --quick`` catches; its own file).

    python -m streamcert.benchmarks.mutation --seeds 1-5 --out results/bench/mutants.json
    python -m streamcert.benchmarks.mutation --plan quick --seeds 1-2   # results/bench/mutants-quick.json
    python -m streamcert.benchmarks.mutation --mutants source_resumes_from_group --seeds 1 --out /tmp/m.json

A (mutant, seed) pair is **caught** when every requirement its bug breaks is ``fail``, each on a finding of a run
that completed: a violation an output check found (duplicates, lost, unexpected, aborted reads, order, batch rules)
or an evidence check that decides it (leftovers, clean stop, options, ...). A catch that rests only on records
missing after the run stopped waiting for a query that no longer progressed (``quiet_timeout`` with the last batch
uncommitted) is a timeout, and counts as missed. Each pair records its verdicts, the checks that failed, and the
kill that preceded the first duplicated or unexpected delivery (its moment and batch class; ``attribution``
``preceding``), or, for lost records, which show no time of their own, every kill that landed (``candidates``).
``mutants.json`` is rewritten after every pair (an interrupted run keeps what it measured, ``complete: false``, and
the next run of the same ``--out`` goes on from there unless ``--fresh``); ``streamcert report mutants.json`` renders
``mutants.html`` (:mod:`streamcert.reports.mutants_html`).

Each run's schedule ends at its first finding (``fail_fast``, as ``certify --fail-fast``): once the output shows a
record delivered twice, the rest of the schedule cannot change whether the pair is caught, only make it slower (a
pair caught by its third kill of twelve took ~300 s); the faults under way finish, and the run settles and is
judged as any run. A run whose bug only loses records goes through its whole schedule. ``cut_at_first_finding``
names a pair's runs that ended this way.

Runs in the harness's process, on one stack started for the whole benchmark.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from streamcert.harness.arguments import seed as seed_argument
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.machine import git_commit, machine_info

__all__ = ["SCHEMA_VERSION", "OUTPUT_CHECKS", "PLANS", "judge_pair", "score", "run_mutation_score", "main"]

SCHEMA_VERSION = 1
#: Checks whose failure is a finding about the output (the evidence checks other than fault_reached count too).
OUTPUT_CHECKS = ("lost", "duplicate", "unexpected", "aborted_read", "per_key_order", "aggregator_batches")
#: The plans a score can be measured on, and where each one's score goes by default.
PLANS = {"full": Path("results/bench/mutants.json"), "quick": Path("results/bench/mutants-quick.json")}
#: Checks that never make a catch: they say whether the run tested something, not what the connector did.
_NOT_FINDINGS = ("fault_reached", "progress")


def _short(reference: str) -> str:
    return reference.split(":")[0].rsplit(".", 1)[-1]


def _run_results(folder: Path) -> dict[str, Any]:
    path = folder / "results.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _timed_out(run: dict[str, Any]) -> bool:
    """The run stopped waiting because nothing moved: its query made no progress at the end (quiet timeout with a
    batch left uncommitted, or no clean stop)."""
    history = run.get("history", [])
    quiesced = [event for event in history if event.get("kind") == "quiesced"]
    stops = [event for event in history if event.get("kind") == "driver-stop"]
    stalled = bool(quiesced) and quiesced[-1].get("reason") == "quiet_timeout"
    uncommitted = bool(stops) and stops[-1].get("pending_batch") is not None
    return stalled and (uncommitted or not stops)


def _first_violation_time(checks: list[dict[str, Any]], output: Any) -> float | None:
    """When the first duplicated or unexpected record became visible (the observer's stamp), if the run says."""
    ids = [violation.get("id") for check in checks if check.get("valid") is False
           and check.get("name") in ("duplicate", "unexpected") for violation in check.get("violations", [])
           if isinstance(violation, dict) and violation.get("id") is not None]
    if not ids or output is None or "visible_at" not in getattr(output, "columns", ()):
        return None
    rows = output.loc[output["id"].isin(ids)].sort_values("visible_at")
    duplicated = rows[rows.duplicated("id", keep="first")]
    chosen = duplicated if not duplicated.empty else rows
    return float(chosen["visible_at"].iloc[0]) if not chosen.empty else None


def _kills_before(history: list[dict[str, Any]], moment_time: float | None) -> list[dict[str, Any]]:
    """The faults the run struck (a moment kill's landed strikes, of the driver, a Python worker or an executor; any
    other fault as itself), those before ``moment_time`` when given (latest last)."""
    strikes = []
    for event in history:
        if event.get("kind") != "fault-start":
            continue
        if moment_time is not None and event.get("time", 0) > moment_time:
            continue
        fault = str(event.get("fault", ""))
        for strike in event.get("strikes") or [{"moments": [fault], "batch_class": None, "landed": True,
                                                "batch": event.get("pending_batch")}]:
            if strike.get("landed"):
                strikes.append({"fault": fault, "moments": strike.get("moments"),
                                "batch_class": strike.get("batch_class"), "batch": strike.get("batch"),
                                "attempt": strike.get("attempt")})
    return strikes


def judge_pair(mutant: Any, seed: int, certification: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One (mutant, seed): its verdicts, whether each broken requirement was caught and by what, and the pair's
    outcome."""
    import pandas as pd

    verdicts = {v["requirement"]: v for v in certification.get("verdicts", [])}
    requirements = {}
    for requirement in sorted(mutant.breaks):
        verdict = verdicts.get(requirement, {})
        findings, timed_out, killed_by, attribution = [], False, [], None
        for run in (verdict.get("evidence") or {}).get("runs", []):
            failing = [check for check in run.get("checks", []) if check.get("valid") is False
                       and check.get("name") not in _NOT_FINDINGS]
            if not failing:
                continue
            detail = _run_results(folder / run.get("folder", ""))
            only_loss = all(check["name"] == "lost" for check in failing)
            if only_loss and _timed_out(detail):
                timed_out = True
                continue
            output_file = folder / run.get("folder", "") / "output.parquet"
            output = pd.read_parquet(output_file) if output_file.exists() else None
            seen_at = _first_violation_time(failing, output)
            # a record seen twice: the kill just before its second delivery; a lost record shows no time of its own,
            # so every landed kill of the run is a candidate
            killed_by = _kills_before(detail.get("history", []), seen_at)
            killed_by, attribution = (killed_by[-1:], "preceding") if seen_at is not None else (killed_by,
                                                                                                "candidates")
            findings += [{"run": run.get("scenario"), "check": check["name"], "counts": check.get("counts", {})}
                         for check in failing]
        caught = verdict.get("verdict") == "fail" and bool(findings)
        requirements[requirement] = {"verdict": verdict.get("verdict"), "caught": caught, "findings": findings,
                                     "timeout_only": timed_out and not findings, "killed_by": killed_by,
                                     "attribution": attribution if findings else None}
    return {"mutant": _short(mutant.reference), "reference": mutant.reference, "bug": mutant.bug, "seed": seed,
            "complete": bool(certification.get("complete")), "unplanned": _unplanned(mutant, certification),
            "caught": all(entry["caught"] for entry in requirements.values()) and bool(requirements),
            "requirements": requirements,
            "verdicts": {req: v.get("verdict") for req, v in verdicts.items()},
            "duration_s": certification.get("duration_s"), "folder": str(folder)}


def _unplanned(mutant: Any, certification: dict[str, Any]) -> list[str]:
    """The requirements the mutant breaks that no run of the certification's plan judges (the quick plan leaves some
    to the full plan: a rescale's, event-time alignment's): such a pair cannot be caught by that plan."""
    judged = {requirement for run in certification.get("runs", []) for requirement in run.get("judges", [])}
    judged |= {requirement for run in certification.get("runs", [])
               for ids in (run.get("also_judges") or {}).values() for requirement in ids}
    return sorted(set(mutant.breaks) - judged)


def score(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures: the share of (mutant, seed) pairs caught, and per mutant the seeds that caught it; and the same
    share among the pairs whose broken requirements the plan judges (``in_plan``: the quick plan leaves some
    requirements to the full plan, and their mutants to the full plan's score)."""
    by_mutant: dict[str, list[dict[str, Any]]] = {}
    for pair in pairs:
        by_mutant.setdefault(pair["mutant"], []).append(pair)
    caught = sum(1 for pair in pairs if pair["caught"])
    in_plan = [pair for pair in pairs if not pair.get("unplanned")]
    caught_in_plan = sum(1 for pair in in_plan if pair["caught"])
    return {"pairs": len(pairs), "caught": caught, "detection_rate": round(caught / len(pairs), 4) if pairs else None,
            "in_plan": {"pairs": len(in_plan), "caught": caught_in_plan,
                        "detection_rate": round(caught_in_plan / len(in_plan), 4) if in_plan else None,
                        "left_out": sorted({pair["mutant"] for pair in pairs if pair.get("unplanned")})},
            "mutants": {name: {"seeds": len(found), "caught": sum(1 for p in found if p["caught"]),
                               "missed_seeds": [p["seed"] for p in found if not p["caught"]]}
                        for name, found in sorted(by_mutant.items())}}


def _selected(names: list[str] | None) -> list[Any]:
    from streamcert.conformance.mutants import MUTANTS

    if not names:
        return list(MUTANTS)
    known = {_short(m.reference): m for m in MUTANTS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigurationError(f"There is no mutant {', '.join(unknown)}.", hint=f"Mutants: {', '.join(known)}.")
    return [known[name] for name in names]


def _cut_runs(certification: dict[str, Any], folder: Path) -> list[str]:
    """The runs of a pair whose schedule ended at their first finding."""
    return sorted(str(run.get("folder")) for run in certification.get("runs", [])
                  if any(event.get("kind") == "first-finding"
                         for event in _run_results(folder / str(run.get("folder", ""))).get("history", [])))


def run_mutation_score(mutants: list[Any], seeds: list[int], out: Path, environment: Any = None,
                       resume: bool = True, plan: str = "full") -> dict[str, Any]:
    """Certify each mutant on each seed (cooperative points off) on ``plan`` (a key of :data:`PLANS`) and write
    ``out`` (JSON) after every pair; return the report. (``streamcert report OUT`` renders its page.)

    ``resume``: the pairs an earlier, interrupted run of the same ``out`` measured are kept and not run again (a
    whole score takes hours: it may be measured over several sittings, on several machines). A kept pair's judgement
    is its record: its folder (left out of git) may be gone, and :func:`rejudge` then leaves it as it is."""
    from streamcert.conformance.certify import certify, prepare

    report: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": "mutation-score", "complete": False,
                              "seeds": seeds, "cooperative": False, "plan": plan, "started_at": time.time(),
                              "machine": machine_info(), "pairs": _earlier_pairs(out, plan) if resume else []}
    done = {(pair["mutant"], pair["seed"]) for pair in report["pairs"]}
    folder = out.parent / out.stem
    # seed by seed: every mutant is measured once before any is measured again, so a sitting cut short still
    # shows which mutants a plan misses
    for seed in seeds:
        for mutant in mutants:
            if (_short(mutant.reference), seed) in done:
                continue
            run_folder = folder / _short(mutant.reference) / f"seed-{seed}"
            if run_folder.exists():  # a pair interrupted half way: measured again from the start
                shutil.rmtree(run_folder)
            certification = prepare([mutant.reference], mutant.requirements, seed=seed, quick=plan == "quick",
                                    cooperative=False, fail_fast=True)
            began = time.monotonic()
            result = certify(certification, run_folder, environment=environment)
            pair = judge_pair(mutant, seed, result.model_dump(mode="json"), run_folder)
            pair["duration_s"] = round(time.monotonic() - began, 1)
            pair["git_commit"] = git_commit()  # a score measured over several sittings may span commits
            pair["cut_at_first_finding"] = _cut_runs(result.model_dump(mode="json"), run_folder)
            report["pairs"].append(pair)
            report["score"] = score(report["pairs"])
            _write(report, out)
            print(f"streamcert mutants: {pair['mutant']} seed {seed}: {'caught' if pair['caught'] else 'MISSED'} "
                  f"({pair['duration_s']:.0f} s)", file=sys.stderr, flush=True)
    report["complete"] = True
    report["duration_s"] = round(time.time() - report["started_at"], 1)
    _write(report, out)
    return report


def rejudge(out: Path) -> dict[str, Any]:
    """Judge every pair of the score at ``out`` again from the certification it kept in its folder (the judgement
    is a function of that evidence: a change to how findings are attributed reaches pairs measured before it);
    rewrite ``out`` and return it. Pairs whose folder is gone keep their judgement."""
    report = json.loads(out.read_text())
    known = {_short(m.reference): m for m in _selected(None)}
    for index, pair in enumerate(report.get("pairs", [])):
        folder = Path(pair.get("folder", ""))
        results = folder / "results.json"
        if pair["mutant"] not in known or not results.exists():
            continue
        judged = judge_pair(known[pair["mutant"]], pair["seed"], json.loads(results.read_text()), folder)
        report["pairs"][index] = {**judged, "duration_s": pair.get("duration_s"),
                                  "git_commit": pair.get("git_commit")}
    report["score"] = score(report["pairs"])
    _write(report, out)
    return report


def _earlier_pairs(out: Path, plan: str = "full") -> list[dict[str, Any]]:
    """The pairs of an earlier run of ``out`` on ``plan`` (none when there is no such file), whether or not their
    folders are still on disk: a score committed by one sitting goes on in the next one's fresh checkout. A score of
    another plan is refused: its pairs would count as this plan's."""
    if not out.exists():
        return []
    try:
        earlier = json.loads(out.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(earlier, dict) or earlier.get("kind") != "mutation-score":
        raise ConfigurationError(f"{out} is not a mutation score, and would be overwritten.",
                                 hint="Give --out a path of its own (results/bench/mutants.json by default).")
    if earlier.get("plan", "full") != plan:
        raise ConfigurationError(f"{out} holds a mutation score of the {earlier.get('plan', 'full')} plan; this one "
                                 f"measures the {plan} plan, whose pairs cannot go on from it.",
                                 hint=f"Give --out a path of its own ({PLANS[plan]} by default for --plan {plan}), "
                                      "or --fresh to measure it again from nothing.")
    return [pair for pair in earlier.get("pairs", []) if isinstance(pair, dict) and "mutant" in pair]


def _write(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(report, indent=1, default=str) + "\n")
    temporary.replace(out)


def _seeds(text: str) -> list[int]:
    try:
        if "-" in text:
            low, high = (int(part) for part in text.split("-", 1))
            values = list(range(low, high + 1))
        else:
            values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: give a range such as 1-5 or a list such as 1,3") from None
    if not values:
        raise argparse.ArgumentTypeError(f"seeds {text!r} names no seed")
    return [seed_argument(str(value)) for value in values]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamcert.benchmarks.mutation",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=_seeds, default=[1, 2, 3, 4, 5], help="a range (1-5) or a list (1,3)")
    parser.add_argument("--mutants", nargs="*", help="mutant module names (default: every mutant)")
    parser.add_argument("--plan", choices=sorted(PLANS), default="full",
                        help="the plan certified: full (the score SPEC §9 asks for) or quick (what a CI gate of "
                             "`certify --quick` catches)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"the score's file (default: {PLANS['full']}, or {PLANS['quick']} with --plan quick)")
    parser.add_argument("--fresh", action="store_true", help="measure every pair again (default: keep the pairs an "
                                                            "earlier run of the same --out measured)")
    parser.add_argument("--rejudge", action="store_true", help="judge the pairs of --out again from their kept "
                                                               "evidence, and measure nothing")
    args = parser.parse_args(argv)
    args.out = args.out or PLANS[args.plan]
    if args.rejudge:
        figures = rejudge(args.out)["score"]
        print(json.dumps({"detection_rate": figures["detection_rate"], "pairs": figures["pairs"],
                          "caught": figures["caught"]}))
        return 0
    from streamcert.harness.errors import StreamcertError
    from streamcert.harness.interrupts import terminate_as_interrupt
    from streamcert.harness.stack.environment import Environment, EnvironmentConfig

    terminate_as_interrupt()
    try:
        mutants = _selected(args.mutants)
        if not args.fresh:
            _earlier_pairs(args.out, args.plan)  # another plan's score is refused before the stack starts
        with Environment(EnvironmentConfig(provider="local")) as environment:
            report = run_mutation_score(mutants, args.seeds, args.out, environment, resume=not args.fresh,
                                        plan=args.plan)
    except StreamcertError as exc:
        print(f"streamcert mutants: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"streamcert mutants: interrupted; the stack was stopped, and the pairs measured so far are in "
              f"{args.out} (run the same command again to go on from them).", file=sys.stderr)
        return 130
    figures = report["score"]
    print(json.dumps({"detection_rate": figures["detection_rate"], "pairs": figures["pairs"],
                      "caught": figures["caught"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
