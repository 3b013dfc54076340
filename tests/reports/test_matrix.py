"""The capability matrix: connectors x requirements from several certifications, the newest certification of a
connector wins, every cell links to that certification's report at the verdict's anchor."""

from __future__ import annotations

import json
import re

from streamcert.cli import main
from streamcert.reports.matrix import capability_matrix, matrix_html
from streamcert.reports.render import MATRIX_FILES, render_certification
from tests.reports.fixtures import write_certification


def _two_certifications(tmp_path):
    old = write_certification(tmp_path / "old")
    new = write_certification(tmp_path / "new")
    results = json.loads(new.read_text())
    results["started_at"] += 3600
    results["connectors"] = ["dup-sink"]
    results["verdicts"] = [dict(v, verdict="pass", reason="fixed") for v in results["verdicts"]
                           if v["connector"] == "dup-sink"]
    new.write_text(json.dumps(results))
    return old, new


def test_the_newest_certification_of_a_connector_wins(tmp_path):
    old, new = _two_certifications(tmp_path)
    connectors, requirements, cells = capability_matrix([new, old])
    assert connectors == ["good-source", "dup-sink"]
    assert requirements == ["SRC-1", "SRC-11", "SNK-1", "SNK-6", "GEN-1"]
    assert cells[("dup-sink", "SNK-1")].verdict == "pass" and cells[("good-source", "SRC-1")].verdict == "pass"
    assert cells[("dup-sink", "SNK-1")].certification.folder == tmp_path / "new"
    assert ("good-source", "SNK-1") not in cells


def test_every_cell_links_to_its_evidence_in_its_report(tmp_path, capsys):
    old, new = _two_certifications(tmp_path)
    for results in (old, new):
        render_certification(results)
    assert main(["matrix", str(old), str(new), "--out", str(tmp_path / "matrix")]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "matrix" / name) for name in MATRIX_FILES]
    page = (tmp_path / "matrix" / "matrix.html").read_text()
    links = re.findall(r'<td class="v (\w+)" title="[^"]*"><a href="([^"]+)">', page)
    assert len(links) == 5 and not re.search(r"(src|href)=\"(https?:)?//", page)
    for _, link in links:
        report, anchor = link.split("#")
        target = (tmp_path / "matrix" / report).resolve()
        assert target.is_file() and f'id="{anchor}"' in target.read_text()
    markdown = (tmp_path / "matrix" / "matrix.md").read_text()
    assert "| SNK-1 |  | [✅ pass](../new/report.html#v-dup-sink-SNK-1) |" in markdown
    assert "| SRC-11 | [– skip](../old/report.html#v-good-source-SRC-11) |  |" in markdown


def test_certifications_on_two_spark_versions_make_the_spark_version_an_axis(tmp_path):
    paths = []
    for spark, verdict in (("4.1.1", "fail"), ("4.3.0", "pass")):
        path = write_certification(tmp_path / spark)
        results = json.loads(path.read_text())
        results["versions"] = {**results.get("versions", {}), "spark": spark}
        results["verdicts"] = [dict(v, verdict=verdict) if v["connector"] == "dup-sink" else v
                               for v in results["verdicts"]]
        path.write_text(json.dumps(results))
        paths.append(path)
    columns, _, cells = capability_matrix(paths)
    assert columns == ["dup-sink · Spark 4.1.1", "dup-sink · Spark 4.3.0", "good-source · Spark 4.1.1",
                       "good-source · Spark 4.3.0"]
    assert cells[("dup-sink · Spark 4.1.1", "SNK-1")].verdict == "fail"
    assert cells[("dup-sink · Spark 4.3.0", "SNK-1")].verdict == "pass"
    page = matrix_html(paths, tmp_path / "matrix")
    assert '<th colspan="2">dup-sink</th><th colspan="2">good-source</th>' in page  # the connector over its Sparks
    assert page.count("<th>Spark 4.1.1</th>") == 2 and page.count("<th>Spark 4.3.0</th>") == 2
    assert "2 connectors on 2 Spark versions (4 columns)" in page
