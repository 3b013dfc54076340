"""A connector that lives outside streamcert, certified as its author would (docs/certify-a-connector.md): the
example package docs/examples/acme-sinks is built in a temp dir, installed, found by its entry point, and
certified for the driver-kill requirements; its idempotent foreachBatch append passes them, with no fault point
of its own (the kills reach it at every moment of its batches the query is observed in, its output visible
before Spark committed among them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "acme-sinks"


def _install(tmp_path: Path) -> Path:
    package, site = tmp_path / "acme-sinks", tmp_path / "site"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(package)], check=True, timeout=300)
    return site


def test_an_external_package_is_found_by_its_entry_point_and_certified(tmp_path):
    site = _install(tmp_path)
    env = dict(os.environ, STREAMCERT_QUIET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    listed = subprocess.run([sys.executable, "-c", "from streamcert.harness.run.connectors import "
                             "available_connectors as a; print(a()['acme-idempotent-pg'])"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert listed.stdout.strip() == "acme_sinks.certification:IdempotentPostgresSinkUnderTest", listed.stderr
    out = tmp_path / "certification"
    done = subprocess.run([sys.executable, "-m", "streamcert", "certify", "--connector", "acme-idempotent-pg",
                           "--requirements", "SNK-1,SNK-4,SNK-6", "--quick", "--seed", "4", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    results = json.loads((out / "results.json").read_text())
    verdicts = {v["requirement"]: v for v in results["verdicts"]}
    assert done.returncode == 0, (done.stderr[-3000:], {k: v["reason"] for k, v in verdicts.items()})
    assert results["complete"] is True and results["connectors"] == ["acme-idempotent-pg"]
    assert results["command"].startswith("streamcert certify --connector acme-idempotent-pg --requirements")
    assert verdicts["SNK-1"]["verdict"] == verdicts["SNK-4"]["verdict"] == "pass"
    assert verdicts["SNK-6"]["verdict"] == "skip" and "no task attempt to fence" in verdicts["SNK-6"]["reason"]
    replay = verdicts["SNK-4"]["evidence"]["replay"]
    assert replay == "streamcert certify --connector acme-idempotent-pg --requirements SNK-4 --seed 4 --quick"
    [run] = verdicts["SNK-4"]["evidence"]["runs"]
    kills = [f for f in run["faults"] if f.get("fault") == "driver_kill_moment" and f["kind"] == "fault-start"]
    assert kills and all(f.get("reached") for f in kills), kills
    assert any(f["params"]["moment"] == "output_visible" for f in kills), kills
    # the reports are rendered beside results.json, from it
    page = (out / "report.html").read_text()
    assert 'class="v pass"' in page and "acme-idempotent-pg" in page and page.count("<svg") >= 1
    assert 'classname="streamcert.acme-idempotent-pg" name="SNK-1' in (out / "junit.xml").read_text()
    assert "**certified**" in (out / "summary.md").read_text()
