"""JUnit XML from a certification: one test case per requirement x connector, so any CI lists them natively.

``fail`` is a JUnit failure, ``unknown`` an error (the fault it needed did not happen, or the run broke: not a
pass), ``skip`` a skipped case with the connector's reason. Each case's output carries the replay command.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from streamcert.reports.certification import Certification
from streamcert.reports.findings import fault_lines, finding_lines, replay

__all__ = ["junit_xml"]


def _case_time(durations: dict[str, float], verdict: dict[str, Any]) -> float:
    folders = {run.get("folder") for run in verdict.get("evidence", {}).get("runs", [])}
    return round(sum(durations.get(folder, 0.0) for folder in folders), 3)


def _case(suite: ET.Element, certification: Certification, verdict: dict[str, Any],
          durations: dict[str, float]) -> str:
    requirement = verdict["requirement"]
    statement = certification.statement(requirement)
    case = ET.SubElement(suite, "testcase", classname=f"streamcert.{verdict['connector']}",
                         name=f"{requirement} {statement}".strip(), time=str(_case_time(durations, verdict)))
    reason = verdict.get("reason", "")
    body = "\n".join([*finding_lines(verdict), *fault_lines(verdict)])
    if verdict["verdict"] == "fail":
        ET.SubElement(case, "failure", message=reason, type="fail").text = body
    elif verdict["verdict"] == "unknown":
        ET.SubElement(case, "error", message=f"unknown: {reason}", type="unknown").text = body
    elif verdict["verdict"] == "skip":
        ET.SubElement(case, "skipped", message=reason)
    if replay(verdict):
        ET.SubElement(case, "system-out").text = f"replay: {replay(verdict)}"
    return verdict["verdict"]


def junit_xml(certification: Certification) -> str:
    """The certification as a JUnit XML document (one ``testsuite`` per connector)."""
    results = certification.results
    root = ET.Element("testsuites", name="streamcert certification")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    durations = {run.get("folder"): run.get("duration_s") or 0.0 for run in results.get("runs", [])}
    for connector in certification.connectors:
        suite = ET.SubElement(root, "testsuite", name=connector)
        properties = ET.SubElement(suite, "properties")
        for name, value in (("seed", results.get("seed")), ("quick", results.get("quick")),
                            ("complete", results.get("complete")), ("command", results.get("command")),
                            *sorted((results.get("versions") or {}).items())):
            ET.SubElement(properties, "property", name=str(name), value=str(value))
        outcomes = [_case(suite, certification, v, durations) for v in certification.verdicts
                    if v["connector"] == connector]
        counts = {"tests": len(outcomes), "failures": outcomes.count("fail"), "errors": outcomes.count("unknown"),
                  "skipped": outcomes.count("skip")}
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", str(round(sum(float(c.get("time")) for c in suite.iter("testcase")), 3)))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", str(results.get("duration_s") or 0))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
