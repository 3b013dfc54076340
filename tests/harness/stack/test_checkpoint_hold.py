"""The checkpoint hold's protocol files, the jar built once against pyspark's jars, and a clear error without a JDK."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import PrerequisiteMissing
from streamcert.harness.stack.checkpoint_hold import HOLD_CLASS, CheckpointHold, ensure_hold_jar


def test_the_hold_protocol_arms_reports_and_disarms_in_the_checkpoint(tmp_path):
    hold = CheckpointHold(f"file:{tmp_path}")
    assert hold.held("commits") == []
    hold.arm("commits", 7)
    assert (tmp_path / ".streamcert-hold" / "arm-commits").read_text() == "7\n"
    (tmp_path / ".streamcert-hold" / "held-commits-7").write_text("1 2\n")
    assert hold.held("commits") == [7] and hold.held("offsets") == []
    hold.release("commits", 7)
    hold.disarm("commits")
    assert hold.held("commits") == [] and not list((tmp_path / ".streamcert-hold").iterdir())
    with pytest.raises(ValueError):
        hold.arm("state", 1)


@pytest.mark.integration
def test_the_hold_jar_is_built_once_and_holds_the_class_spark_is_told_to_use():
    import zipfile

    jar = ensure_hold_jar()
    assert ensure_hold_jar() == jar
    assert HOLD_CLASS.replace(".", "/") + ".class" in zipfile.ZipFile(jar).namelist()


def test_without_a_jdk_the_hold_cannot_be_built_and_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PrerequisiteMissing) as caught:
        ensure_hold_jar()
    assert "javac" in caught.value.message and "JDK" in caught.value.hint
