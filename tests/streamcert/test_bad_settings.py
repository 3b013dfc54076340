"""Bad settings (environment variables) through the CLI, as a user meets them: exit 2 in seconds, one paragraph
that names the variable and the value that was wrong, never an internal error or a traceback."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest


def _streamcert(*args: str, timeout: float = 60, **settings: str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, STREAMCERT_QUIET="1")
    for name, value in settings.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "streamcert", *args], capture_output=True, text=True,
                            timeout=timeout, env=env)
    return result, time.monotonic() - began


def _assert_clear_error(result: subprocess.CompletedProcess, seconds: float, *names: str) -> str:
    """Exit 2 within 10 s; the error paragraph names every one of ``names``; no traceback, no internal error."""
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err)
    assert seconds < 10, (seconds, err)
    assert "internal error" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("streamcert")]
    assert lines, err
    message = lines[-1]
    for name in names:
        assert name in message, (name, message)
    assert "Hint:" in message, message
    return message


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the cache folder ------------------------------------------------------------------

def test_a_cache_setting_that_is_a_file_is_named(tmp_path):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    result, seconds = _streamcert("env", "up", "--provider", "local", "--for-seconds", "1",
                                  STREAMCERT_CACHE=str(a_file))
    message = _assert_clear_error(result, seconds, "STREAMCERT_CACHE", str(a_file), "is a file")
    assert "a folder you can write" in message


def test_an_uncreatable_cache_folder_is_named(tmp_path):
    a_file = tmp_path / "plain-file"
    a_file.write_text("x")
    inside_a_file = a_file / "cache"
    result, seconds = _streamcert("env", "up", "--provider", "local", "--for-seconds", "1",
                                  STREAMCERT_CACHE=str(inside_a_file))
    _assert_clear_error(result, seconds, "STREAMCERT_CACHE", str(inside_a_file), "cannot be created")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root to mount a read-only tmpfs")
def test_a_read_only_cache_folder_is_named():
    folder = Path(tempfile.mkdtemp(prefix="streamcert-ro-cache-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        result, seconds = _streamcert("env", "up", "--provider", "local", "--for-seconds", "1",
                                      STREAMCERT_CACHE=str(folder))
        _assert_clear_error(result, seconds, "STREAMCERT_CACHE", str(folder), "read-only")
    finally:
        subprocess.run(["umount", str(folder)], check=False)
        folder.rmdir()


def test_env_check_lists_a_bad_cache_setting_among_its_checks(tmp_path):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    result, seconds = _streamcert("env", "check", "--json", STREAMCERT_CACHE=str(a_file))
    assert result.returncode == 1 and seconds < 10, result.stderr  # env check: 1 = a prerequisite is missing
    import json

    checks = {check["name"]: check for check in json.loads(result.stdout.splitlines()[-1])["checks"]}
    assert not checks["cache folder"]["ok"] and "STREAMCERT_CACHE" in checks["cache folder"]["detail"]
    assert checks["python"]["ok"]  # the other checks still ran


# -- overrides of the servers' installations --------------------------------------------

def _bad_overrides(tmp_path: Path) -> dict[str, tuple[str, str]]:
    not_a_binary = tmp_path / "toxiproxy-server"
    not_a_binary.write_text("#!/bin/sh\necho 'I am not toxiproxy'; exit 1\n")
    not_a_binary.chmod(not_a_binary.stat().st_mode | stat.S_IXUSR)
    empty = tmp_path / "empty"
    empty.mkdir()
    return {"STREAMCERT_KAFKA_LIB": (str(empty), "kafka 4.3.1 jars"),
            "STREAMCERT_TOXIPROXY_BIN": (str(not_a_binary), "toxiproxy v2.12.0"),
            "STREAMCERT_PG_BIN": (str(empty), "postgresql server")}


@pytest.mark.parametrize("variable", ["STREAMCERT_KAFKA_LIB", "STREAMCERT_TOXIPROXY_BIN", "STREAMCERT_PG_BIN"])
def test_env_check_validates_overrides_of_the_servers(tmp_path, variable):
    import json

    value, check_name = _bad_overrides(tmp_path)[variable]
    result, seconds = _streamcert("env", "check", "--json", **{variable: value})
    assert result.returncode == 1 and seconds < 10, result.stderr
    checks = {check["name"]: check for check in json.loads(result.stdout.splitlines()[-1])["checks"]}
    assert not checks[check_name]["ok"], checks[check_name]  # it used to say "ok"
    assert variable in checks[check_name]["detail"] and value in checks[check_name]["detail"]
    assert variable in checks[check_name]["hint"]


@pytest.mark.parametrize("variable", ["STREAMCERT_KAFKA_LIB", "STREAMCERT_TOXIPROXY_BIN", "STREAMCERT_PG_BIN"])
def test_env_up_refuses_a_bad_override_of_a_server(tmp_path, variable):
    value, _ = _bad_overrides(tmp_path)[variable]
    result, seconds = _streamcert("env", "up", "--provider", "local", "--for-seconds", "1", **{variable: value})
    _assert_clear_error(result, seconds, variable, value)


def test_an_invalid_java_home_is_named_not_reported_as_no_java_on_path(tmp_path):
    result, seconds = _streamcert("env", "up", "--provider", "local", "--for-seconds", "1",
                                  JAVA_HOME=str(tmp_path / "no-jdk-here"))
    message = _assert_clear_error(result, seconds, "JAVA_HOME", str(tmp_path / "no-jdk-here"), "bin/java")
    assert "no `java` on PATH" not in message


# -- the external provider ---------------------------------------------------------------

def test_a_toxiproxy_api_setting_without_a_port_is_named():
    result, seconds = _streamcert("env", "smoke", "--provider", "external", STREAMCERT_KAFKA_BOOTSTRAP="127.0.0.1:9092",
                                  STREAMCERT_TOXIPROXY_API="127.0.0.1")
    _assert_clear_error(result, seconds, "STREAMCERT_TOXIPROXY_API", "'127.0.0.1'", "no port")


@pytest.fixture
def listening_address():
    """An address where something listens (the provider's quick check only asks whether a connection is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("variable", ["STREAMCERT_KAFKA_BOOTSTRAP", "STREAMCERT_TOXIPROXY_API"])
def test_a_closed_port_is_refused_at_once_not_retried(variable, listening_address):
    closed = f"127.0.0.1:{_closed_port()}"
    settings = {"STREAMCERT_KAFKA_BOOTSTRAP": listening_address, "STREAMCERT_POSTGRES_DSN": None, variable: closed}
    result, seconds = _streamcert("env", "smoke", "--provider", "external", **settings)
    _assert_clear_error(result, seconds, variable, closed, "connection refused")


def test_a_malformed_postgres_dsn_is_named_and_its_password_masked():
    dsn = "host=127.0.0.1 port password=hunter2"
    result, seconds = _streamcert("env", "smoke", "--provider", "external", STREAMCERT_POSTGRES_DSN=dsn)
    _assert_clear_error(result, seconds, "STREAMCERT_POSTGRES_DSN", "not a PostgreSQL connection string")
    assert "hunter2" not in result.stderr


def test_a_postgres_dsn_with_a_bad_port_is_named():
    result, seconds = _streamcert("env", "smoke", "--provider", "external",
                                  STREAMCERT_POSTGRES_DSN="host=127.0.0.1 port=fivefourthreetwo")
    _assert_clear_error(result, seconds, "STREAMCERT_POSTGRES_DSN", "fivefourthreetwo")


@pytest.mark.integration
def test_a_postgres_login_the_server_rejects_is_not_retried(stack):
    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(stack.endpoints.postgres_direct_dsn)
    params.pop("passfile", None)
    params["password"] = "not-the-password"
    dsn = psycopg.conninfo.make_conninfo(**params)
    result, seconds = _streamcert("env", "smoke", "--provider", "external", STREAMCERT_POSTGRES_DSN=dsn,
                                  STREAMCERT_KAFKA_BOOTSTRAP=None, STREAMCERT_TOXIPROXY_API=None)
    message = _assert_clear_error(result, seconds, "STREAMCERT_POSTGRES_DSN", "password authentication failed")
    assert "not-the-password" not in result.stderr and "***" in message


@pytest.mark.integration
def test_env_smoke_on_the_external_provider_as_the_readme_sets_it_up(stack):
    """The README's external set-up (bootstrap, DSN, Toxiproxy API) on servers someone else runs: every step that
    applies passes; the Kafka network steps are skipped with their reason (the user's Kafka has no link of ours)."""
    import json

    result, seconds = _streamcert("env", "smoke", "--provider", "external", timeout=180,
                                  STREAMCERT_KAFKA_BOOTSTRAP=stack.endpoints.kafka_direct_bootstrap,
                                  STREAMCERT_POSTGRES_DSN=stack.endpoints.postgres_direct_dsn,
                                  STREAMCERT_TOXIPROXY_API=stack.endpoints.toxiproxy_api)
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.splitlines()[-1])
    assert line["ok"] and line["provider"] == "external" and line["failed"] == []
    assert line["spark_batches"] >= 1 and line["pg_prepared_commit_ok"] and line["txn_committed_visible"]
    assert set(line["skipped"]) == {"kafka_rtt_with_latency_toxic_ms", "proxy_down_produce_failed"}
    assert "skipped kafka_rtt_with_latency_toxic_ms" in result.stderr


def test_a_run_registry_setting_that_is_a_file_is_named(tmp_path):
    a_file = tmp_path / "runs"
    a_file.write_text("x")
    result, seconds = _streamcert("env", "clean", STREAMCERT_RUNS=str(a_file))
    _assert_clear_error(result, seconds, "STREAMCERT_RUNS", str(a_file), "is a file")


def test_an_unknown_jit_mode_is_refused_before_any_server_starts():
    result, seconds = _streamcert("env", "smoke", "--provider", "local", STREAMCERT_JIT="turbo")
    _assert_clear_error(result, seconds, "STREAMCERT_JIT=turbo", "quick, full")
    assert seconds < 5


def test_an_unknown_jit_mode_is_refused_before_a_certification_starts(tmp_path):
    result, seconds = _streamcert("certify", "--connector", "streamcert-kafka", "--quick", "--out",
                                  str(tmp_path / "cert"), STREAMCERT_JIT="turbo")
    _assert_clear_error(result, seconds, "STREAMCERT_JIT=turbo", "quick, full")
    assert not (tmp_path / "cert" / "results.json").exists()


def test_a_fork_server_switch_that_is_neither_on_nor_off_is_refused_before_a_certification_starts(tmp_path):
    result, seconds = _streamcert("certify", "--connector", "streamcert-kafka", "--quick", "--out",
                                  str(tmp_path / "cert"), STREAMCERT_FORK_SERVER="sometimes")
    _assert_clear_error(result, seconds, "STREAMCERT_FORK_SERVER='sometimes'", "neither on nor off")
    assert not (tmp_path / "cert" / "results.json").exists()


def test_a_checkpoint_manager_switch_that_names_no_manager_is_refused_before_a_certification_starts(tmp_path):
    result, seconds = _streamcert("certify", "--connector", "streamcert-kafka", "--quick", "--out",
                                  str(tmp_path / "cert"), STREAMCERT_CHECKPOINT_MANAGER="hdfs")
    _assert_clear_error(result, seconds, "STREAMCERT_CHECKPOINT_MANAGER='hdfs'", "neither filesystem nor spark")
    assert not (tmp_path / "cert" / "results.json").exists()
