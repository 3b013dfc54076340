"""The command line: bad input exits non-zero with one clear paragraph; smoke ends with its JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from streamcert.harness.stack.smoke import EXPECTATIONS
from streamcert.cli import main


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, STREAMCERT_QUIET="1")
    return subprocess.run([sys.executable, "-m", "streamcert", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("args, needle", [
    (["env", "smoke", "--provider", "kubernetes"], "invalid choice: 'kubernetes'"),
    (["env", "smoke", "--spark-master", "foo"], "is not a Spark master URL"),
    (["env", "up", "--kafka-heap-mb", "-5"], "expected a positive integer"),
    (["certify-everything"], "invalid choice"),
])
def test_bad_arguments_are_refused_fast_with_exit_2(args, needle):
    began = time.monotonic()
    result = _run(*args)
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - began < 30


def test_unavailable_provider_is_one_paragraph_with_a_hint(monkeypatch, capsys):
    monkeypatch.setattr("streamcert.harness.stack.providers.docker_available", lambda timeout=3.0: False)
    code = main(["env", "smoke", "--provider", "testcontainers"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("streamcert: error: The testcontainers provider needs a Docker daemon")
    assert "Hint:" in err and "Traceback" not in err


def test_external_provider_without_endpoints_is_explained(monkeypatch, capsys):
    for name in ("STREAMCERT_KAFKA_BOOTSTRAP", "STREAMCERT_POSTGRES_DSN", "STREAMCERT_TOXIPROXY_API"):
        monkeypatch.delenv(name, raising=False)
    code = main(["env", "smoke", "--provider", "external"])
    err = capsys.readouterr().err
    assert code == 2 and "STREAMCERT_KAFKA_BOOTSTRAP" in err


def test_env_check_json_lists_every_check():
    result = _run("env", "check", "--json")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    names = {check["name"] for check in report["checks"]}
    assert {"python", "java", "docker daemon", "postgresql server", "loopback"} <= names
    assert result.returncode == (0 if report["ok"] else 1)
    assert all({"ok", "required", "detail", "hint"} <= set(check) for check in report["checks"])


def test_env_check_fails_when_java_is_missing(tmp_path):
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "no-jdk"), STREAMCERT_QUIET="1")
    result = subprocess.run([sys.executable, "-m", "streamcert", "env", "check", "--json"],
                            capture_output=True, text=True, timeout=60, env=env)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    java = next(check for check in report["checks"] if check["name"] == "java")
    assert result.returncode == 1 and report["ok"] is False
    assert java["ok"] is False and "JAVA_HOME" in java["hint"]


@pytest.mark.integration
def test_env_smoke_ends_with_a_json_line_meeting_every_expectation():
    result = _run("env", "smoke", "--provider", "local", timeout=400)
    last = result.stdout.strip().splitlines()[-1]
    report = json.loads(last)
    assert report["errors"] == {}, report["errors"]
    for name, healthy in EXPECTATIONS.items():
        assert healthy(report[name]), (name, report[name])
    assert report["kafka_rtt_with_latency_toxic_ms"] >= 300
    assert report["proxy_down_produce_failed"] is True
    assert report["txn_committed_visible"] is True and report["txn_aborted_visible"] is False
    assert report["leftover_processes"] == 0
    assert report["ok"] is True and result.returncode == 0
    assert isinstance(report["cold_start_s"], float)


@pytest.mark.integration
def test_env_up_prints_endpoints_and_stops_cleanly_on_sigterm():
    import signal

    env = dict(os.environ, STREAMCERT_QUIET="1")
    proc = subprocess.Popen([sys.executable, "-m", "streamcert", "env", "up", "--provider", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        endpoints = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                endpoints = json.loads(line)
                break
        if endpoints is None:  # stdout ended: the command exited; show why
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        assert endpoints is not None, (proc.poll(), proc.stderr.read() if proc.poll() is not None else "running")
        assert endpoints["bootstrap_servers"].startswith("127.0.0.1:")
        assert endpoints["toxiproxy_api"].startswith("http://127.0.0.1:")
        assert "host=127.0.0.1" in endpoints["postgres_dsn"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    from streamcert.harness.stack.process import processes_with_token

    assert processes_with_token(endpoints["run_token"]) == []


@pytest.mark.integration
@pytest.mark.slow
def test_env_smoke_on_a_kafka_cluster_and_a_standalone_spark_cluster_reports_failover_and_workers():
    """`streamcert env smoke --brokers 3 --spark-master standalone`: a leader kill moved leadership (metadata), the
    ISR grew back, nothing acknowledged was lost, and two workers served the Spark query."""
    env = dict(os.environ, STREAMCERT_QUIET="1")
    done = subprocess.run([sys.executable, "-m", "streamcert", "env", "smoke", "--provider", "local", "--brokers", "3",
                           "--spark-master", "standalone"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = json.loads(done.stdout.splitlines()[-1])
    assert line["ok"] and line["brokers"] == 3 and line["leader_moved"] and line["failover_records_lost"] == 0
    [move] = line["leader_moves"]
    assert move["from"] != move["to"] and move["from"] not in move["isr_after_kill"]
    assert sorted(move["isr_restored"]) == [1, 2, 3]
    assert len(line["spark_workers"]) == 2 and line["spark_master"].startswith("spark://127.0.0.1:")
    assert line["leftover_processes"] == 0


def test_the_progress_line_says_a_run_spared_by_a_shared_one_and_counts_it(capsys):
    import dataclasses

    from streamcert.cli import _RunProgress
    from streamcert.conformance.certify import prepare

    [own] = prepare(["streamcert-kafka"], ["SRC-6"], seed=1).runs
    spared = dataclasses.replace(own, hosted_by="streamcert-kafka-2pc")
    with _RunProgress(2) as progress:
        progress.update("start", spared, None)
        progress.update("spared", spared, None)
        assert progress.progress.tasks[0].completed == 1
    said = capsys.readouterr().err
    assert "streamcert-kafka / baseline" in said and "judged on streamcert-kafka-2pc's baseline" in said, said


def test_the_cpu_line_says_the_least_time_the_same_work_takes_here():
    from streamcert.cli import _cpu_line

    line = _cpu_line({"busy_s": 1300.6, "nice_s": 475.3, "cores": 2, "busy_share": 0.814, "floor_s": 650.3})
    assert "1301 s busy over 2 core(s) (81% of them, 475 s" in line and line.endswith("at least 650 s on this machine")
