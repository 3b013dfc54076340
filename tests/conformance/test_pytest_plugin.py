"""The pytest plugin: ``pytest --pyargs streamcert.conformance --streamcert-connector X`` gives one test case per
requirement x connector, whose outcome is the certification's verdict (pass, fail, skip with the reason, unknown
as a failure), visible in pytest's own JUnit XML. The certification itself is replaced here by a fixed result: the
real one is what ``streamcert certify`` runs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from streamcert.conformance.catalogue import ids_for

FAKE_CERTIFY = '''
import streamcert.conformance.certify as certify_module
from streamcert.conformance.results import CertificationResult
from streamcert.conformance.verdicts import Verdict
from streamcert.harness.results import ConnectorSummary

OUTCOMES = {"SNK-1": "pass", "SNK-2": "fail", "SNK-3": "unknown", "SRC-11": "skip"}


def fake_certify(certification, out, **settings):
    result = CertificationResult(seed=certification.seed, connectors=[], complete=True, machine={}, versions={})
    for reference, connector in certification.connectors.items():
        result.declarations[connector.name] = ConnectorSummary.of(connector, reference)
        for req in certification.requirements_of(connector):
            verdict = OUTCOMES.get(req.id, "pass")
            result.verdicts.append(Verdict(connector=connector.name, requirement=req.id, verdict=verdict,
                                           reason=f"{req.id} was {verdict} here",
                                           evidence={"replay": f"streamcert certify --requirements {req.id}"}))
    for req_id in certification.cluster_requirements():
        result.verdicts.append(Verdict(connector="kafka-cluster", requirement=req_id, verdict="pass",
                                       reason=f"{req_id} was pass here"))
    if certification.cluster_requirements():
        result.declarations["kafka-cluster"] = ConnectorSummary(reference="kafka-cluster", name="kafka-cluster",
                                                                kind="broker")
    return result


certify_module.certify = fake_certify
'''


def _run(pytester, *args):
    pytester.makeconftest(FAKE_CERTIFY)
    return pytester.runpytest_subprocess("--pyargs", "streamcert.conformance", "-p", "no:cacheprovider",
                                         "--junitxml", str(pytester.path / "junit.xml"), *args)


def test_one_case_per_requirement_and_connector_with_the_verdict_as_outcome(pytester):
    result = _run(pytester, "--streamcert-connector", "streamcert-pg-2pc", "--streamcert-connector",
                  "streamcert-kafka", "-rs")
    # and the cluster's own requirements, which the source's failover run brings in (BRK-1, BRK-2)
    sink, source, cluster = len(ids_for("sink")), len(ids_for("source")), len(ids_for("broker"))
    outcomes = result.parseoutcomes()
    # SNK-2 fails, SNK-3 unknown fails; SRC-11 skipped with the connector's reason
    assert outcomes["failed"] == 2 and outcomes["skipped"] == 1
    assert outcomes["passed"] == sink + source + cluster - 3
    result.stdout.fnmatch_lines(["*SRC-11 was skip here*"])
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    names = {case.get("name"): case for case in cases}
    assert len(names) == sink + source + cluster
    assert "test_SNK_1[streamcert-pg-2pc]" in names and "test_SRC_1[streamcert-kafka]" in names
    assert "test_BRK_1[kafka-cluster]" in names and "test_BRK_2[kafka-cluster]" in names
    unknown = names["test_SNK_3[streamcert-pg-2pc]"].find("failure")
    assert unknown is not None and "UNKNOWN (not a pass)" in unknown.get("message")
    failed = names["test_SNK_2[streamcert-pg-2pc]"].find("failure")
    assert "FAIL: SNK-2 was fail here" in failed.get("message")
    assert "replay: streamcert certify --requirements SNK-2" in failed.get("message")
    assert names["test_SRC_11[streamcert-kafka]"].find("skipped").get("message").endswith("SRC-11 was skip here")


def test_requirements_can_be_chosen_and_the_rest_is_deselected(pytester):
    result = _run(pytester, "--streamcert-connector", "streamcert-pg-2pc", "--streamcert-requirements", "SNK-1,GEN-1")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 2 and "failed" not in outcomes and outcomes["deselected"] > 0


def test_a_bad_connector_is_a_usage_error_in_one_paragraph(pytester):
    result = _run(pytester, "--streamcert-connector", "nope")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*streamcert: Connector 'nope' is neither an installed connector*"])


def test_each_requirements_test_carries_its_requirement_in_its_docstring():
    from streamcert.conformance import test_requirements

    doc = test_requirements.test_SNK_1.__doc__
    assert doc.startswith("SNK-1 (sink)") and "Procedure:" in doc and "Pass condition:" in doc
    assert "decided by: lost, duplicate" in doc
