"""Unit tests: prerequisites that are missing or unreachable give a clear error with a hint, fast."""

import time
from pathlib import Path

import pytest

from streamcert.harness.stack import install
from streamcert.harness.errors import ConfigurationError, PrerequisiteMissing
from streamcert.harness.stack.ports import free_port


@pytest.mark.parametrize("text, major", [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('java version "1.8.0_392"', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ("no version here", None),
])
def test_parse_java_major(text, major):
    assert install.parse_java_major(text) == major


def test_java_missing_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PrerequisiteMissing) as info:
        install.find_java()
    text = str(info.value)
    assert "Java was not found" in text and "Hint:" in text and "JAVA_HOME" in text


def test_a_java_home_without_java_is_named_not_reported_as_no_java(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(PrerequisiteMissing) as info:
        install.find_java()
    text = str(info.value)
    assert f"JAVA_HOME={tmp_path / 'no-jdk'} has no bin/java (it does not exist)" in text
    assert "Java was not found" not in text and "Hint: Point JAVA_HOME at" in text


def test_old_java_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    (fake / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(PrerequisiteMissing) as info:
        install.find_java()
    assert "Java 17+ is required" in str(info.value) and "1.8.0_392" in str(info.value)


def test_maven_missing_names_the_alternatives(monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    monkeypatch.delenv("STREAMCERT_KAFKA_LIB", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PrerequisiteMissing) as info:
        install.ensure_kafka()
    text = str(info.value)
    assert "Maven (`mvn`)" in text and "--provider testcontainers" in text and "--provider external" in text


def test_maven_central_unreachable_fails_within_seconds_with_the_evidence(monkeypatch, tmp_path):
    if not install.shutil.which("mvn"):
        pytest.skip("Maven is not installed here")
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    monkeypatch.delenv("STREAMCERT_KAFKA_LIB", raising=False)
    # A loopback port nobody listens on: connections are refused at once.
    monkeypatch.setenv("STREAMCERT_MAVEN_REPO", f"http://127.0.0.1:{free_port()}/maven2")
    began = time.monotonic()
    with pytest.raises(PrerequisiteMissing) as info:
        install.ensure_kafka()
    assert time.monotonic() - began < 120
    text = str(info.value)
    assert "Maven could not resolve org.apache.kafka:kafka_2.13" in text
    assert "STREAMCERT_MAVEN_REPO" in text and "Hint:" in text
    assert not (tmp_path / "kafka" / install.KAFKA_VERSION / "lib" / ".complete").exists()


def test_go_missing_names_the_alternatives(monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    monkeypatch.delenv("STREAMCERT_TOXIPROXY_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(install, "GO_FALLBACKS", ())
    with pytest.raises(PrerequisiteMissing) as info:
        install.ensure_toxiproxy()
    assert "Go is needed once to build Toxiproxy" in str(info.value)
    assert "STREAMCERT_TOXIPROXY_BIN" in str(info.value)


def test_overrides_that_point_nowhere_are_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMCERT_KAFKA_LIB", str(tmp_path / "nothing"))
    with pytest.raises(ConfigurationError, match="STREAMCERT_KAFKA_LIB=.* is not a folder"):
        install.ensure_kafka()
    (tmp_path / "libs").mkdir()
    monkeypatch.setenv("STREAMCERT_KAFKA_LIB", str(tmp_path / "libs"))
    with pytest.raises(ConfigurationError, match="holds no kafka_2.13-"):
        install.ensure_kafka()
    monkeypatch.setenv("STREAMCERT_TOXIPROXY_BIN", str(tmp_path / "no-server"))
    with pytest.raises(ConfigurationError, match="STREAMCERT_TOXIPROXY_BIN: .*no-server does not exist"):
        install.ensure_toxiproxy()
    monkeypatch.setenv("STREAMCERT_TOXIPROXY_BIN", "/bin/sh")
    with pytest.raises(ConfigurationError, match="is not a toxiproxy-server binary"):
        install.ensure_toxiproxy()
    monkeypatch.setenv("STREAMCERT_PG_BIN", str(tmp_path / "libs"))
    with pytest.raises(ConfigurationError, match="holds no postgres, no initdb"):
        install.ensure_postgres()


def test_overrides_that_point_at_the_real_thing_are_taken(monkeypatch):
    real = install.postgres_bin_dir()
    if real is None:
        pytest.skip("PostgreSQL is installed on first start; nothing to point at yet")
    monkeypatch.setenv("STREAMCERT_PG_BIN", str(real))
    assert install.ensure_postgres() == real


def test_postgres_binaries_are_found_on_this_machine():
    found = install.postgres_bin_dir()
    if found is None:
        pytest.skip("PostgreSQL is installed on first start; nothing to find yet")
    assert (Path(found) / "postgres").exists() and (Path(found) / "initdb").exists()


@pytest.mark.parametrize("bad", ["spark-sql-kafka", "org.apache.spark:spark-sql-kafka", "a:b:c:d", "a:b c:1"])
def test_a_declared_jar_that_is_no_maven_coordinate_is_a_configuration_error(bad, monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    with pytest.raises(ConfigurationError, match="is not a Maven coordinate") as info:
        install.ensure_jars(["org.apache.commons:commons-pool2:2.13.1", bad])
    assert bad in str(info.value) and "group:artifact:version" in info.value.hint


def test_no_declared_jars_need_no_maven(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert install.ensure_jars([]) == []


def test_declared_jars_that_do_not_resolve_fail_with_the_names(monkeypatch, tmp_path):
    if not install.shutil.which("mvn"):
        pytest.skip("Maven is not installed here")
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path))
    monkeypatch.setenv("STREAMCERT_MAVEN_REPO", f"http://127.0.0.1:{free_port()}/maven2")
    with pytest.raises(PrerequisiteMissing, match="Maven could not resolve io.streamcert:no-such-jar:0.0.1"):
        install.ensure_jars(["io.streamcert:no-such-jar:0.0.1"])
    assert not list(tmp_path.glob("jars/*/lib/.complete"))
