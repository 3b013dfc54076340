"""What a verdict's evidence says, in a few lines a reader can act on: the checks that failed with their counts
and first violations, the faults that struck, and the command that replays it."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["failed_checks", "finding_lines", "fault_lines", "replay"]


def failed_checks(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks of the verdict's runs that did not pass (invalid or unknown), each with its run's scenario."""
    found = []
    for run in verdict.get("evidence", {}).get("runs", []):
        for check in run.get("checks", []):
            if check.get("valid") is not True:
                found.append({**check, "scenario": run.get("scenario")})
    return found


def _counts(check: dict[str, Any]) -> str:
    counts = {k: v for k, v in (check.get("counts") or {}).items() if v}
    return ", ".join(f"{k}={v}" for k, v in counts.items())


def finding_lines(verdict: dict[str, Any], violations: int = 3) -> list[str]:
    """One line per failed check (scenario, check, counts, error), then its first violations."""
    lines = []
    for check in failed_checks(verdict):
        state = "invalid" if check.get("valid") is False else "unknown"
        head = f"{check.get('scenario')}: {check['name']} {state}"
        detail = _counts(check) or check.get("error") or ""
        lines.append(f"{head} ({detail})" if detail else head)
        for violation in (check.get("violations") or [])[:violations]:
            lines.append("    first: " + json.dumps(violation, default=str, sort_keys=True)[:300])
    return lines


def fault_lines(verdict: dict[str, Any]) -> list[str]:
    """The faults that struck in the verdict's runs: ``scenario @ 12.3 s: driver_kill_random (driver)``."""
    lines = []
    for run in verdict.get("evidence", {}).get("runs", []):
        for event in run.get("faults", []):
            if event.get("kind") != "fault-start":
                continue
            at = event.get("elapsed_s")
            when = f" @ {at:.1f} s" if isinstance(at, (int, float)) else ""
            lines.append(f"{run.get('scenario')}{when}: {event.get('fault')} ({event.get('target')})")
    return lines


def replay(verdict: dict[str, Any]) -> str:
    return verdict.get("evidence", {}).get("replay", "")
