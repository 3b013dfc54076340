"""A connector that lives outside streamcert, certified as its author would (docs/certify-a-connector.md): the
example package docs/examples/acme-sinks is built in a temp dir, installed, found by its entry point, and certified
through the command line, reports included. The default run certifies it on its baseline; ``tox -e long`` also
certifies it for the driver-kill requirements, which its idempotent foreachBatch append passes with no fault point of
its own (the kills reach it at every moment of its batches the query is observed in, its output visible before Spark
committed among them). The default run's proof that moment kills reach a foreachBatch sink's output before Spark's
commit is the ledger sink's (tests/external_system/test_ledger_certifies.py): the same kill run, on a system the
tests start themselves."""

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


def _certify(tmp_path: Path, requirements: str) -> tuple[subprocess.CompletedProcess, Path, dict, dict]:
    """The package installed into a folder of its own, found by its entry point and certified for
    ``requirements`` by ``streamcert certify`` in a fresh process, as its author would run it."""
    site = _install(tmp_path)
    env = dict(os.environ, STREAMCERT_QUIET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    listed = subprocess.run([sys.executable, "-c", "from streamcert.harness.run.connectors import "
                             "available_connectors as a; print(a()['acme-idempotent-pg'])"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert listed.stdout.strip() == "acme_sinks.certification:IdempotentPostgresSinkUnderTest", listed.stderr
    out = tmp_path / "certification"
    done = subprocess.run([sys.executable, "-m", "streamcert", "certify", "--connector", "acme-idempotent-pg",
                           "--requirements", requirements, "--quick", "--seed", "4", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    results = json.loads((out / "results.json").read_text())
    verdicts = {v["requirement"]: v for v in results["verdicts"]}
    assert done.returncode == 0, (done.stderr[-3000:], {k: v["reason"] for k, v in verdicts.items()})
    assert results["complete"] is True and results["connectors"] == ["acme-idempotent-pg"]
    return done, out, results, verdicts


def test_an_external_package_is_found_by_its_entry_point_and_certified(tmp_path):
    _done, out, results, verdicts = _certify(tmp_path, "GEN-1,GEN-3,SNK-6")
    assert results["command"].startswith("streamcert certify --connector acme-idempotent-pg --requirements")
    assert verdicts["GEN-1"]["verdict"] == verdicts["GEN-3"]["verdict"] == "pass"
    assert verdicts["SNK-6"]["verdict"] == "skip" and "no task attempt to fence" in verdicts["SNK-6"]["reason"]
    replay = verdicts["GEN-1"]["evidence"]["replay"]
    assert replay == "streamcert certify --connector acme-idempotent-pg --requirements GEN-1 --seed 4 --quick"
    [run] = verdicts["GEN-1"]["evidence"]["runs"]
    assert run["scenario"] == "baseline" and run["complete"] and not run["error"], run
    assert all(check["valid"] is not False for check in run["checks"]), run["checks"]
    # the reports are rendered beside results.json, from it
    page = (out / "report.html").read_text()
    assert 'class="v pass"' in page and "acme-idempotent-pg" in page and page.count("<svg") >= 1
    assert 'classname="streamcert.acme-idempotent-pg" name="GEN-1' in (out / "junit.xml").read_text()
    assert "**certified**" in (out / "summary.md").read_text()


@pytest.mark.slow  # in tox -e long: a kill run of ~10 restarts; the default run has the ledger sink's
def test_an_external_package_passes_the_driver_kill_requirements_with_kills_at_its_output_visible_moment(tmp_path):
    _done, _out, _results, verdicts = _certify(tmp_path, "SNK-1,SNK-4")
    assert verdicts["SNK-1"]["verdict"] == verdicts["SNK-4"]["verdict"] == "pass"
    [run] = verdicts["SNK-4"]["evidence"]["runs"]
    kills = [f for f in run["faults"] if f.get("fault") == "driver_kill_moment" and f["kind"] == "fault-start"]
    assert kills and all(f.get("reached") for f in kills), kills
    assert any(f["params"]["moment"] == "output_visible" for f in kills), kills
