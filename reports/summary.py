"""A short Markdown summary of a certification, for a pull-request comment: the outcome, a connector x verdict
count table, every failed or unknown requirement with its reason and replay command, and the environment."""

from __future__ import annotations

from streamcert.reports.certification import Certification

__all__ = ["summary_markdown"]

_MARK = {"pass": "✅ pass", "fail": "❌ fail", "unknown": "❔ unknown", "skip": "⏭ skip"}


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def summary_markdown(certification: Certification, problems_shown: int = 20) -> str:
    results = certification.results
    counts = certification.counts()
    outcome = ("**certified**: every claimed requirement passed" if certification.passed() else
               f"**quick plan passed**: every requirement it judged passed; {len(certification.full_plan_only())} "
               "are judged only by the full certification" if certification.quick_passed() else
               "**incomplete**: the certification stopped before its end" if not results.get("complete") else
               "**not certified**: some claimed requirement failed or could not be decided")
    plan = "quick plan" if results.get("quick") else "full plan"
    plan += (f" (shard {results['shard']})" if results.get("shard") else
             f" (merged from {len(results['merged_from'])} shards)" if results.get("merged_from") else "")
    lines = [f"## streamcert certification: {outcome}", "",
             f"{counts['pass']} passed, {counts['fail']} failed, {counts['unknown']} unknown, {counts['skip']} "
             f"skipped; {len(results.get('runs', []))} scenario runs, seed {results.get('seed')}, {plan}, "
             f"{(results.get('duration_s') or 0) / 60:.1f} min.", "",
             "| connector | pass | fail | unknown | skip |", "|---|---:|---:|---:|---:|"]
    for connector in certification.connectors:
        mine = [v["verdict"] for v in certification.verdicts if v["connector"] == connector]
        lines.append(f"| {_cell(connector)} | " + " | ".join(str(mine.count(k)) for k in
                                                            ("pass", "fail", "unknown", "skip")) + " |")
    held = [f"{_cell(connector)} {capability}: {judged['verdict']}"
            for connector, claimed in (results.get("capabilities") or {}).items()
            for capability, judged in claimed.items()]
    if held:
        lines += ["", "Capabilities (each holds when every requirement behind it passed): " + "; ".join(held) + "."]
    problems = [v for v in certification.verdicts if v["verdict"] in ("fail", "unknown")]
    if problems:
        lines += ["", "| connector | requirement | verdict | reason | replay |", "|---|---|---|---|---|"]
        for verdict in problems[:problems_shown]:
            replay = verdict.get("evidence", {}).get("replay", "")
            lines.append(f"| {_cell(verdict['connector'])} | {verdict['requirement']} | {_MARK[verdict['verdict']]} "
                         f"| {_cell(verdict.get('reason', ''))[:300]} | `{replay}` |")
        if len(problems) > problems_shown:
            lines.append(f"\n… and {len(problems) - problems_shown} more in results.json.")
    versions = results.get("versions") or {}
    lines += ["", "<sub>" + ", ".join(f"{k} {v}" for k, v in versions.items() if v) +
              (f"; `{results.get('command')}`" if results.get("command") else "") + "</sub>", ""]
    return "\n".join(lines)
