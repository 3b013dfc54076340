"""``streamcert certify`` refuses bad input within seconds, with exit 2 and one paragraph naming the bad value,
before any server starts; a connector's declaration is checked (strict by default)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from streamcert.conformance.certify import REFERENCE_CONNECTORS, prepare
from streamcert.harness.errors import ConfigurationError


def _certify(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STREAMCERT_QUIET="1")
    return subprocess.run([sys.executable, "-m", "streamcert", "certify", *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("args, needle", [
    (["--connector", "no-such-connector"], "'no-such-connector' is neither an installed connector"),
    (["--connector", "tests.conformance.declarations:NOTHING"], "NOTHING"),
    (["--connector", "tests.conformance.declarations:UndeclaredSink"], "neither claims nor waives SNK-2"),
    (["--connector", "tests.conformance.declarations:BadMomentSink"], "unknown moments"),
    (["--requirements", "SNK-99"], "There is no requirement 'SNK-99'"),
    (["--connector", "streamcert-kafka", "--requirements", "SNK-1"], "None of the requirements SNK-1 applies"),
    (["--seed", "-3"], "expected a seed >= 0"),
    (["--provider", "cloud"], "invalid choice: 'cloud'"),
])
def test_bad_input_exits_2_fast_with_the_bad_value_named(args, needle, tmp_path):
    began = time.monotonic()
    result = _certify(*args, "--out", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - began < 30
    assert not (tmp_path / "results.json").exists()  # nothing started


def test_no_strict_lets_an_undeclared_requirement_through_as_a_skip():
    certification = prepare(["tests.conformance.declarations:UndeclaredSink"], ["SNK-2"], strict=False)
    assert certification.runs == []  # SNK-2 is not claimed: nothing to run for it


def test_the_reference_connectors_are_the_default_and_each_gets_runs():
    certification = prepare(None, seed=3, quick=True)
    assert list(certification.connectors) == list(REFERENCE_CONNECTORS)
    assert {run.connector for run in certification.runs} == set(REFERENCE_CONNECTORS)


def test_two_connectors_with_one_name_are_refused():
    with pytest.raises(ConfigurationError, match="share a name"):
        prepare(["streamcert-kafka", "tests.conformance.declarations:SameNameSource"])


def test_an_output_folder_with_someone_elses_runs_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    result = _certify("--connector", "streamcert-kafka", "--out", str(tmp_path))
    assert result.returncode == 2 and "holds a runs/ folder that no certification wrote" in result.stderr
    assert (tmp_path / "runs" / "mine").is_dir()
