"""Servers that fail to start: the message names the real cause, and the logs it points at are still there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _env_up(tmp_path: Path, *options: str, tmpdir: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, STREAMCERT_QUIET="1", STREAMCERT_RUNS=str(tmp_path / "runs"))
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "streamcert", "env", "up", "--provider", "local",
                             "--for-seconds", "1", *options], capture_output=True, text=True, timeout=180, env=env)
    return result, time.monotonic() - began


def _kept_folders(stderr: str) -> list[Path]:
    found = re.search(r"kept for you in (.+?); remove them", stderr)
    assert found, stderr
    return [Path(part) for part in found.group(1).split(" and ")]


def test_a_heap_too_small_for_kafka_is_named_as_such_and_its_logs_are_kept(tmp_path):
    result, seconds = _env_up(tmp_path, "--kafka-heap-mb", "16")
    assert result.returncode == 2 and seconds < 30  # toxiproxy starts, then the broker's JVM fails at once
    first = result.stderr.splitlines()[0]
    assert "Cause: heap too small" in first and "--kafka-heap-mb" in first and "Java version" not in first
    kept = _kept_folders(first)
    try:
        assert kept and all(folder.is_dir() for folder in kept)
        assert str(kept[0]) in first.split("Cause:")[0]  # the folder the message points at is one of them
    finally:
        for folder in kept:
            shutil.rmtree(folder, ignore_errors=True)
    assert len(result.stderr.splitlines()) < 25  # the JVM's stack trace is cut to its first frames


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root to mount a small tmpfs")
def test_a_full_disk_is_named_as_such(tmp_path):
    # Under /tmp itself, not pytest's owner-only folder: PostgreSQL's user must be able to reach its folder.
    small = Path(tempfile.mkdtemp(prefix="streamcert-small-disk-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=1777", "tmpfs", str(small)],
                             capture_output=True)
    if mounted.returncode != 0:
        small.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        result, seconds = _env_up(tmp_path, tmpdir=small)
        first = result.stderr.splitlines()[0]
        assert result.returncode == 2 and seconds < 60, result.stderr[-2000:]
        assert "Cause: disk full" in first and "No space left on device" in first and f"{small}" in first
        assert "MiB free now, of 3 MiB" in first
        assert all(folder.is_dir() for folder in _kept_folders(first))
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)
        small.rmdir()
