"""JUnit XML from a certification: one test case per requirement x connector; fail, unknown and skip map to
failure, error and skipped with the reason; counts add up; the replay command is in each case's output."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from streamcert.conformance.catalogue import requirement
from streamcert.reports.certification import load_certification
from streamcert.reports.junit import junit_xml
from tests.reports.fixtures import write_certification


def test_one_case_per_verdict_with_the_verdict_as_junit_knows_it(tmp_path):
    root = ET.fromstring(junit_xml(load_certification(write_certification(tmp_path))))
    cases = {(c.get("classname"), c.get("name").split()[0]): c for c in root.iter("testcase")}
    assert set(cases) == {("streamcert.good-source", "SRC-1"), ("streamcert.good-source", "SRC-11"),
                          ("streamcert.dup-sink", "SNK-1"), ("streamcert.dup-sink", "SNK-6"),
                          ("streamcert.dup-sink", "GEN-1")}
    failure = cases[("streamcert.dup-sink", "SNK-1")].find("failure")
    assert failure is not None and "60 duplicated ids" in failure.get("message")
    assert "duplicate invalid (deliveries=660, duplicated_ids=60)" in failure.text and "r-000017" in failure.text
    assert cases[("streamcert.dup-sink", "SNK-6")].find("error").get("message").startswith("unknown:")
    assert cases[("streamcert.good-source", "SRC-11")].find("skipped").get("message") == "no event-time alignment"
    passed = cases[("streamcert.good-source", "SRC-1")]
    assert list(passed) == [passed.find("system-out")] and "--requirements SRC-1 --seed 5" in passed[0].text
    assert passed.get("name") == f"SRC-1 {requirement('SRC-1').statement}"


def test_the_counts_add_up_per_suite_and_overall(tmp_path):
    root = ET.fromstring(junit_xml(load_certification(write_certification(tmp_path))))
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("5", "1", "1", "1")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["dup-sink"].get("tests") == "3" and suites["good-source"].get("skipped") == "1"
    props = {p.get("name"): p.get("value") for p in suites["dup-sink"].iter("property")}
    assert props["seed"] == "5" and props["git_commit"] == "abc123"
    # a case's time is the time of the runs that judged it
    sink = {c.get("name").split()[0]: c for c in suites["dup-sink"].iter("testcase")}
    assert float(sink["SNK-1"].get("time")) == 90.25
