"""One certification from its shards' results (``streamcert merge``): every shard's runs copied under one folder and
every verdict judged again from all of them, as an unsharded certification judges them.

The shards must be parts of one plan: the same connectors, requirements, seed and flags, on the same Spark, each
shard once. The plan is made again here (it is deterministic), each kept run is matched to its planned run by
connector and name, and its evidence is read back from its folder (:func:`~streamcert.conformance.certify.evidence_of`:
the leftovers a run's probe saw were kept there when it ran). Runs in the harness's process.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from streamcert.conformance.catalogue import CLUSTER_SUBJECT
from streamcert.conformance.certify import evidence_of, prepare, verdicts_of
from streamcert.conformance.results import CertificationResult
from streamcert.conformance.verdicts import JudgedRun
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.results import RunResult

__all__ = ["merge"]

#: What every shard of one certification shares.
_SAME = ("seed", "quick", "strict", "cooperative", "fail_fast", "requirements", "connectors")


def merge(results: list[Path], out: Path, command: str = "",
          render: Callable[[Path], None] | None = None) -> CertificationResult:
    """Merge the shards whose ``results.json`` (or folders) are ``results`` into ``out`` (results.json and every
    run's folder; ``render(out)`` writes the reports, as for :func:`~streamcert.conformance.certify.certify`);
    return the merged result. A ConfigurationError when they are not one plan's shards."""
    shards = [_load(Path(path)) for path in results]
    _check(shards)
    first = shards[0][1]
    references = [summary.reference for name, summary in first.declarations.items() if name != CLUSTER_SUBJECT]
    certification = prepare(references, first.requirements, seed=first.seed, quick=first.quick, strict=first.strict,
                            cooperative=first.cooperative, fail_fast=first.fail_fast)
    names = {connector.name: reference for reference, connector in certification.connectors.items()}
    names[CLUSTER_SUBJECT] = CLUSTER_SUBJECT
    planned = {(run.connector, run.name): run for run in certification.runs}
    out = _fresh(Path(out), [folder for folder, _ in shards])
    judged, runs = [], []
    for folder, shard in shards:
        for skipped in shard.skipped_runs:
            certification.skipped_runs[(names.get(skipped["connector"], skipped["connector"]),
                                        skipped["scenario"])] = skipped["reason"]
        for summary in shard.runs:
            run = planned.get((names.get(summary.connector, summary.connector), summary.scenario))
            if run is None:
                raise ConfigurationError(f"Shard {shard.shard} ran {summary.connector} / {summary.scenario}, which "
                                         "the plan made here does not have.", hint="Merge shards made by this "
                                         "version of streamcert (the plan is part of the code).")
            target = out / summary.folder
            if target.resolve() != (folder / summary.folder).resolve():
                shutil.copytree(folder / summary.folder, target, dirs_exist_ok=True)
            result = RunResult.load(target / "results.json")
            judged.append(JudgedRun(run, result, evidence_of(run, result, target, certification.connectors.get(
                run.connector)), Path(summary.folder)))
            runs.append(summary)
    order = {(run.connector, run.name): index
             for index, run in enumerate(sorted(certification.runs, key=lambda run: run.brokers))}
    ranks = [order[(run.planned.connector, run.planned.name)] for run in judged]
    judged = [run for _, run in sorted(zip(ranks, judged, strict=True), key=lambda pair: pair[0])]
    runs = [summary for _, summary in sorted(zip(ranks, runs, strict=True), key=lambda pair: pair[0])]
    merged = first.model_copy(update={
        "complete": all(shard.complete for _, shard in shards), "shard": None, "command": command,
        "merged_from": [str(folder / "results.json") for folder, _ in shards], "runs": runs,
        "skipped_runs": [item for _, shard in shards for item in shard.skipped_runs],
        "started_at": min(shard.started_at for _, shard in shards),
        "duration_s": max(shard.duration_s for _, shard in shards),
        "error": "; ".join(f"shard {shard.shard}: {shard.error}" for _, shard in shards if shard.error) or None})
    merged.verdicts, merged.capabilities = verdicts_of(certification, judged)
    merged.save(out / "results.json")
    if render is not None:
        render(out)
    return merged


def _fresh(out: Path, shards: list[Path]) -> Path:
    """``out``, ready for the merged runs: a new folder, or an earlier merge's (its runs replaced); never a shard's or
    another certification's."""
    if any(out.resolve() == folder.resolve() for folder in shards):
        raise ConfigurationError(f"--out {out} is one of the shards' folders.",
                                 hint="Merge into a folder of its own (the shards keep their results).")
    if (out / "results.json").exists():
        try:
            earlier = CertificationResult.load(out / "results.json")
        except ValueError:
            earlier = None
        if earlier is None or not earlier.merged_from:
            raise ConfigurationError(f"--out {out} holds a results.json that no merge wrote.",
                                     hint="Merge into a new folder, or the folder of an earlier merge.")
        shutil.rmtree(out / "runs", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _load(path: Path) -> tuple[Path, CertificationResult]:
    file = path / "results.json" if path.is_dir() else path
    try:
        result = CertificationResult.load(file)
    except FileNotFoundError:
        raise ConfigurationError(f"There is no results.json at {path}.",
                                 hint="Name each shard's results.json or its --out folder.") from None
    except ValueError as exc:
        raise ConfigurationError(f"{file} is not a certification's results.json ({str(exc).splitlines()[0]}).",
                                 hint="Name the results.json that `streamcert certify --shard I/N` wrote.") from None
    return file.parent, result


def _check(shards: list[tuple[Path, CertificationResult]]) -> None:
    """The shards are the parts of one plan, each once, on one Spark."""
    unsharded = [str(folder) for folder, result in shards if not result.shard]
    if unsharded:
        raise ConfigurationError(f"{', '.join(unsharded)} ran the whole plan, not a shard of it.",
                                 hint="Merge the results of `streamcert certify --shard I/N` runs.")
    first = shards[0][1]
    for folder, result in shards[1:]:
        differ = [name for name in _SAME if getattr(result, name) != getattr(first, name)]
        if result.versions.get("spark") != first.versions.get("spark"):
            differ.append("Spark version")
        if differ:
            raise ConfigurationError(f"The shard at {folder} differs from the one at {shards[0][0]} in "
                                     f"{', '.join(differ)}: they are not parts of one certification.",
                                     hint="Run every shard with the same connectors, requirements, seed and flags.")
    count = int(first.shard.split("/")[1])
    seen = [result.shard for _, result in shards]
    wanted = [f"{index}/{count}" for index in range(1, count + 1)]
    if sorted(seen) != sorted(wanted):
        missing = [shard for shard in wanted if shard not in seen]
        twice = sorted({shard for shard in seen if seen.count(shard) > 1})
        raise ConfigurationError(f"The shards given are {', '.join(seen)}" + (f"; missing {', '.join(missing)}"
                                 if missing else "") + (f"; given twice {', '.join(twice)}" if twice else "") + ".",
                                 hint=f"Give each of the {count} shards' results once.")
