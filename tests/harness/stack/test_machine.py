"""machine_info: what a result file says about the machine; git_commit only for a checkout of streamcert."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import psutil
import pytest

from streamcert.harness.stack import machine
from streamcert.harness.stack.machine import git_commit, machine_info


def test_machine_info_describes_this_machine():
    info = machine_info()
    assert {"platform", "machine", "processor", "python", "cpu_count", "cpus_usable", "memory_mib", "java",
            "pyspark", "git_commit"} <= info.keys()
    assert info["python"] == platform.python_version() and info["platform"] == platform.platform()
    assert info["cpu_count"] == psutil.cpu_count() and 1 <= info["cpus_usable"] <= info["cpu_count"]
    assert info["memory_mib"] == psutil.virtual_memory().total // 2**20 > 0
    assert info["pyspark"].startswith("4.")


def test_machine_info_is_a_new_dict_each_time():
    first = machine_info()
    first["numpy"] = "added by a caller"
    assert "numpy" not in machine_info()


def test_java_is_none_when_there_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    machine._java_version.cache_clear()
    try:
        assert machine_info()["java"] is None
    finally:
        machine._java_version.cache_clear()


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A git repository laid out like streamcert's source tree."""
    module = tmp_path / "repo" / "harness" / "stack" / "machine.py"
    module.parent.mkdir(parents=True)
    module.write_text("# a copy\n")
    repo = tmp_path / "repo"
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def test_git_commit_of_a_checkout_is_its_head(checkout):
    assert git_commit(checkout / "harness" / "stack" / "machine.py") == _git(checkout, "rev-parse", "HEAD")


def test_a_checkout_whose_code_changed_since_its_commit_says_so(checkout):
    module = checkout / "harness" / "stack" / "machine.py"
    head = _git(checkout, "rev-parse", "HEAD")
    (checkout / "notes.txt").write_text("not code\n")  # untracked, outside the code: still the commit's code
    assert git_commit(module) == head
    module.write_text("# changed\n")
    assert git_commit(module) == head + "+dirty"
    _git(checkout, "add", ".")
    assert git_commit(module) == head + "+dirty"  # staged is still not the commit


def test_an_installed_copy_inside_another_repository_has_no_commit(checkout):
    # e.g. site-packages of a virtualenv that lives inside some checkout
    copy = checkout / "venv" / "site-packages" / "streamcert" / "harness" / "stack" / "machine.py"
    copy.parent.mkdir(parents=True)
    copy.write_text("# installed\n")
    assert git_commit(copy) is None


def test_outside_any_repository_there_is_no_commit(tmp_path):
    lone = tmp_path / "harness" / "stack" / "machine.py"
    lone.parent.mkdir(parents=True)
    lone.write_text("# not in git\n")
    assert git_commit(lone) is None
