"""A small certification written to disk as `streamcert certify` writes one: two connectors, every verdict kind,
two runs with timelines and faults, one run that never wrote its results."""

from __future__ import annotations

import json
from pathlib import Path

_T0 = 1_800_000_000.0


def _check(name: str, valid, counts: dict, violations: list | None = None) -> dict:
    return {"name": name, "valid": valid, "counts": counts, "violations": violations or [], "error": None}


def _run_evidence(scenario: str, folder: str, checks: list[dict]) -> dict:
    return {"scenario": scenario, "seed": 77, "folder": folder, "complete": True, "error": None,
            "driver_attempts": 3,
            "faults": [{"kind": "fault-start", "elapsed_s": 12.5, "fault": "driver_kill_random", "target": "driver"},
                       {"kind": "fault-stop", "elapsed_s": 12.6, "fault": "driver_kill_random", "target": "driver"}],
            "checks": checks}


def _verdict(connector: str, requirement: str, verdict: str, reason: str, runs: list[dict]) -> dict:
    evidence = {"runs": runs}
    if verdict != "skip":
        evidence["replay"] = f"streamcert certify --connector {connector} --requirements {requirement} --seed 5"
    return {"connector": connector, "requirement": requirement, "verdict": verdict, "reason": reason,
            "evidence": evidence}


def certification_results(complete: bool = True) -> dict:
    ok = [_check("lost", True, {"acknowledged": 600, "lost": 0})]
    duplicated = [_check("duplicate", False, {"deliveries": 660, "duplicated_ids": 60},
                         [{"id": "r-000017", "deliveries": 2}]), _check("lost", True, {"lost": 0})]
    kills_src = _run_evidence("driver-kills", "runs/good-source/driver-kills", ok)
    kills_snk = _run_evidence("driver-kills", "runs/dup-sink/driver-kills", duplicated)
    verdicts = [
        _verdict("good-source", "SRC-1", "pass", "every check of lost valid", [kills_src]),
        _verdict("good-source", "SRC-11", "skip", "no event-time alignment", []),
        _verdict("dup-sink", "SNK-1", "fail", "duplicate invalid in driver-kills: 60 duplicated ids", [kills_snk]),
        _verdict("dup-sink", "SNK-6", "unknown", "no zombie attempt happened (fencing unknown)", []),
        _verdict("dup-sink", "GEN-1", "pass", "progress made", [kills_snk]),
    ]
    runs = [{"connector": "good-source", "scenario": "driver-kills", "judges": ["SRC-1"],
             "folder": "runs/good-source/driver-kills", "seed": 77, "complete": True, "valid": True,
             "duration_s": 61.5, "driver_attempts": 3, "faults": 2, "error": None},
            {"connector": "dup-sink", "scenario": "driver-kills", "judges": ["SNK-1", "GEN-1"],
             "folder": "runs/dup-sink/driver-kills", "seed": 78, "complete": True, "valid": False,
             "duration_s": 90.25, "driver_attempts": 4, "faults": 3, "error": None,
             "strike_coverage": {"planned": ["writing@reset_peer", "commit_in_flight@server_kill"],
                                 "reached": {"writing@reset_peer": 1}, "missing": ["commit_in_flight@server_kill"]}},
            {"connector": "dup-sink", "scenario": "zombies", "judges": ["SNK-6"], "folder": "runs/dup-sink/zombies",
             "seed": 79, "complete": False, "valid": "unknown", "duration_s": 12.0, "driver_attempts": 1,
             "faults": 0, "error": "StartupFailed: the driver exited"}]
    return {"schema_version": 1, "kind": "certification", "complete": complete,
            "connectors": ["good-source", "dup-sink"], "declarations": {}, "verdicts": verdicts, "runs": runs,
            "seed": 5, "quick": True, "requirements": None, "strict": True, "provider": "local",
            "command": "streamcert certify --connector good-source --connector dup-sink --seed 5 --quick",
            "versions": {"streamcert": "0.1.0", "spark": "4.3.0", "kafka": "4.3.1", "git_commit": "abc123"},
            "machine": {"cpu_count": 2, "memory_mib": 24105}, "started_at": _T0, "duration_s": 163.75,
            "cpu": {"wall_s": 163.8, "busy_s": 265.4, "nice_s": 80.2, "idle_s": 62.2, "cores": 2, "busy_share": 0.81,
                    "floor_s": 132.7},
            "error": None if complete else "KeyboardInterrupt: "}


def run_results(faults: list[tuple[str, str, float, float]], seconds: int = 40) -> dict:
    history = [{"kind": "driver-start", "time": _T0}]
    for fault, target, start, stop in faults:
        history.append({"kind": "fault-start", "time": _T0 + start, "fault": fault, "target": target})
        history.append({"kind": "fault-stop", "time": _T0 + stop, "fault": fault, "target": target})
    delivered = [0, 0] + [20] * (seconds - 2)
    recovery = [{"fault": fault, "target": target, "start_s": start, "stop_s": stop, "recovery_s": 3.5}
                for fault, target, start, stop in faults]
    return {"schema_version": "2", "history": history,
            "metrics": {"latency_ms": {"p50": 1500.0, "p75": 1800.0, "p95": 2500.0, "p99": 4100.0,
                                       "p99.9": 4200.0, "max": 4321.0, "count": 600},
                        "timeline": {"second": list(range(seconds)), "delivered": delivered,
                                     "acked_total": [600] * seconds, "delivered_total": delivered,
                                     "backlog": [max(0, 600 - 20 * n) for n in range(seconds)]},
                        "recovery": recovery}}


def write_certification(folder: Path, complete: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps(certification_results(complete)))
    for run, faults in (("runs/good-source/driver-kills", [("driver_kill_random", "driver", 12.5, 12.6)]),
                        ("runs/dup-sink/driver-kills", [("driver_kill_on_output", "driver", 8.0, 8.1),
                                                        ("latency", "kafka", 15.0, 18.5)])):
        (folder / run).mkdir(parents=True)
        (folder / run / "results.json").write_text(json.dumps(run_results(faults)))
    return path
