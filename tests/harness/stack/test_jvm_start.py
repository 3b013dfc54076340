"""Spark's JVM start-up options: the class archive is built once, used only when complete, skipped when switched
off or when its build failed; the quick JIT is asked for by name. One integration test shows a real driver JVM
mapping the archive."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack import jvm_start
from streamcert.harness.stack.jvm_start import (ARCHIVE_SWITCH_VAR, CERTIFICATION_JIT, class_archive_path,
                                                 class_archive_state, default_jit, ensure_class_archive, jit_mode,
                                                 start_up_options)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    monkeypatch.delenv(ARCHIVE_SWITCH_VAR, raising=False)
    monkeypatch.setattr(jvm_start, "_runtime_fingerprint", lambda: "f00d")
    return tmp_path


def _fake_build(calls):
    def build(path):
        calls.append(path)
        path.write_bytes(b"archive")
        return None
    return build


def test_the_quick_jit_is_c1_only_and_full_adds_nothing(cache):
    assert start_up_options("quick") == "-XX:TieredStopAtLevel=1"
    assert start_up_options("full") == ""
    with pytest.raises(ConfigurationError, match="'fast' is not a JIT mode") as info:
        start_up_options("fast")
    assert "STREAMCERT_JIT" in info.value.hint


def test_spark_runs_the_full_jit_unless_streamcert_jit_says_quick(monkeypatch):
    from streamcert.harness.stack.spark import SparkConfig

    monkeypatch.delenv("STREAMCERT_JIT", raising=False)
    assert SparkConfig().jit == "full"
    monkeypatch.setenv("STREAMCERT_JIT", "quick")
    assert SparkConfig().jit == "quick" and SparkConfig(jit="full").jit == "full"


def test_a_certification_s_jvms_run_the_quick_jit_unless_streamcert_jit_says_otherwise(monkeypatch):
    from streamcert.harness.stack.spark import SparkConfig

    monkeypatch.delenv("STREAMCERT_JIT", raising=False)
    with default_jit(CERTIFICATION_JIT) as mode:
        assert mode == "quick" and os.environ["STREAMCERT_JIT"] == "quick" and SparkConfig().jit == "quick"
    assert "STREAMCERT_JIT" not in os.environ and SparkConfig().jit == "full"
    monkeypatch.setenv("STREAMCERT_JIT", "full")
    with default_jit(CERTIFICATION_JIT) as mode:
        assert mode == "full" and SparkConfig().jit == "full"
    assert os.environ["STREAMCERT_JIT"] == "full"


def test_a_bad_streamcert_jit_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setenv("STREAMCERT_JIT", "turbo")
    with pytest.raises(ConfigurationError, match="STREAMCERT_JIT=turbo") as info:
        with default_jit(CERTIFICATION_JIT):
            pass
    assert "quick, full" in info.value.hint
    assert os.environ["STREAMCERT_JIT"] == "turbo"
    monkeypatch.delenv("STREAMCERT_JIT")
    assert jit_mode() == "full" and jit_mode("quick") == "quick"


def test_the_archive_is_used_only_once_it_exists(cache):
    path = class_archive_path()
    assert path == cache / "jvm" / "spark-classes-f00d.jsa"
    assert "SharedArchiveFile" not in start_up_options("full")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert start_up_options("full") == f"-XX:SharedArchiveFile={path}"


def test_the_archive_is_built_once(cache, monkeypatch):
    calls = []
    monkeypatch.setattr(jvm_start, "_build", _fake_build(calls))
    assert ensure_class_archive() == class_archive_path()
    assert ensure_class_archive() == class_archive_path()
    assert len(calls) == 1


def test_a_failed_build_is_noted_and_not_retried_for_a_day(cache, monkeypatch, caplog):
    monkeypatch.setattr(jvm_start, "_build", lambda path: "the warm-up query exited with 1.")
    assert ensure_class_archive() is None
    marker = class_archive_path().with_suffix(".failed")
    assert marker.read_text() == "the warm-up query exited with 1."
    assert "without a class archive" in caplog.text and str(marker) in caplog.text
    calls = []
    monkeypatch.setattr(jvm_start, "_build", _fake_build(calls))
    assert ensure_class_archive() is None and calls == []
    a_day_ago = time.time() - 86401
    os.utime(marker, (a_day_ago, a_day_ago))
    assert ensure_class_archive() == class_archive_path() and len(calls) == 1


def test_switched_off_the_archive_is_neither_built_nor_used(cache, monkeypatch):
    path = class_archive_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    monkeypatch.setenv(ARCHIVE_SWITCH_VAR, "off")
    monkeypatch.setattr(jvm_start, "_build", lambda path: pytest.fail("built while switched off"))
    assert ensure_class_archive() is None
    assert start_up_options("quick") == "-XX:TieredStopAtLevel=1"


def test_a_warm_up_that_writes_nothing_is_a_failed_build(cache, monkeypatch):
    """The JVM writes the archive only on a clean exit: a warm-up killed or stopped by a signal leaves no file,
    and nothing half-written ever reaches the archive's path."""
    def run(command, **_):
        return subprocess.CompletedProcess(command, 0, "", "Setting default log level\nstopped by a signal")
    monkeypatch.setattr(jvm_start.subprocess, "run", run)
    assert ensure_class_archive() is None
    assert not class_archive_path().exists()
    assert "wrote no archive" in class_archive_path().with_suffix(".failed").read_text()
    assert list(class_archive_path().parent.iterdir()) == [class_archive_path().with_suffix(".failed")]


@pytest.mark.integration
def test_a_driver_jvm_maps_the_class_archive(stack, tmp_path):
    """The archive the harness built (the session's stack started Spark) is mapped by a new driver JVM."""
    assert ensure_class_archive() is not None
    log = tmp_path / "cds.log"
    loads = tmp_path / "loads.log"
    script = textwrap.dedent(f"""
        from streamcert.harness.run.query_status import STATUS_SPARK_CONF, warm_status_api
        from streamcert.harness.stack.spark import SparkConfig, spark_session, stop_spark
        spark = spark_session(SparkConfig(master="local[1]", conf=STATUS_SPARK_CONF, java_options=(
            "-Xlog:cds=info:file={log} -Xlog:class+load=info:file={loads}")))
        assert spark.range(10).count() == 10
        assert warm_status_api(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId) is not None
        stop_spark(spark)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=180, capture_output=True)
    text = log.read_text()
    assert f"Opened archive {class_archive_path()}" in text and "Mapped dynamic region" in text, text[-2000:]
    # the status API a moment kill reads is archived too: its REST resources come from the archive, not the jars
    handler = "org.glassfish.jersey.server.ApplicationHandler "
    jersey = [line for line in loads.read_text().splitlines() if handler in line]
    assert jersey and all("shared objects file" in line for line in jersey), jersey


def test_the_archive_state_says_what_the_next_start_will_do(cache, monkeypatch):
    assert class_archive_state() == ("missing", f"built at the next Spark start into {class_archive_path()}")
    monkeypatch.setattr(jvm_start, "_build", lambda path: "the warm-up query exited with 1.")
    ensure_class_archive()
    state, detail = class_archive_state()
    assert state == "failed" and "exited with 1" in detail and "delete" in detail
    class_archive_path().write_bytes(b"archive")
    assert class_archive_state() == ("built", str(class_archive_path()))
    monkeypatch.setenv(ARCHIVE_SWITCH_VAR, "off")
    assert class_archive_state()[0] == "off"


def test_the_doctor_reports_a_failed_archive_as_a_warning_not_a_blocker(cache, monkeypatch):
    from streamcert.harness.stack.doctor import _class_archive

    monkeypatch.setattr(jvm_start, "_build", lambda path: "the warm-up query exited with 1.")
    ensure_class_archive()
    check = _class_archive()
    assert check.ok is False and check.required is False and "exited with 1" in check.detail and check.hint


def test_another_pyspark_installation_gets_an_archive_of_its_own(monkeypatch, tmp_path):
    """A JVM silently ignores an archive dumped with another class path: the path of pyspark's jars is part of
    the archive's name."""
    import pyspark

    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    here = class_archive_path()
    elsewhere = tmp_path / "venv" / "pyspark"
    (elsewhere / "jars").mkdir(parents=True)
    monkeypatch.setattr(pyspark, "__file__", str(elsewhere / "__init__.py"))
    assert class_archive_path() != here


def test_building_an_archive_keeps_only_the_newest_few(cache, monkeypatch):
    folder = class_archive_path().parent
    folder.mkdir(parents=True)
    for age in range(6):
        old = folder / f"spark-classes-old{age}.jsa"
        old.write_bytes(b"archive")
        os.utime(old, (time.time() - 3600 * (age + 1),) * 2)
    monkeypatch.setattr(jvm_start, "_build", _fake_build([]))
    assert ensure_class_archive() == class_archive_path()
    assert sorted(p.name for p in folder.glob("*.jsa")) == [
        "spark-classes-f00d.jsa", "spark-classes-old0.jsa", "spark-classes-old1.jsa", "spark-classes-old2.jsa"]
