"""Bad command-line arguments, as a user types them: exit 2 in seconds with a message naming the option and the
value, never an internal error, a traceback or a wait."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from streamcert.cli import _describe


def _run(*argv: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, STREAMCERT_QUIET="1")
    began = time.monotonic()
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=env)
    return result, time.monotonic() - began


def _assert_refused(result: subprocess.CompletedProcess, seconds: float, *names: str) -> str:
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err)
    assert seconds < 10, (seconds, err)
    assert "internal error" not in err and "Traceback" not in err, err
    message = err.strip().splitlines()[-1]
    for name in names:
        assert name in message, (name, message)
    return message


@pytest.mark.parametrize("master, said", [
    ("local[0]", "not a Spark master URL"),
    ("local-cluster[2,1,10]", "10 MiB"),
    ("spark://127.0.0.1", "not a Spark master URL"),
    ("yarn", "loopback"),
    ("k8s://https://127.0.0.1:6443", "loopback"),
    ("mesos://127.0.0.1:5050", "Mesos"),
])
def test_spark_masters_spark_or_streamcert_cannot_use_are_refused_by_the_option(master, said):
    result, seconds = _run("-m", "streamcert", "env", "smoke", "--spark-master", master)
    _assert_refused(result, seconds, "--spark-master", master, said)


def test_a_standalone_master_nobody_answers_at_is_refused_before_the_stack_starts():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    result, seconds = _run("-m", "streamcert", "env", "smoke", "--provider", "local", "--spark-master", master)
    message = _assert_refused(result, seconds, master, "connection refused")
    assert seconds < 5 and "Hint:" in message  # Spark itself would retry for a minute


@pytest.mark.parametrize("argv, names", [
    (["bench", "--rate", "0"], ["--rate", "0"]),
    (["bench", "--rate", "-100"], ["--rate", "-100"]),
    (["bench", "--rate", "nan"], ["--rate", "nan"]),
    (["bench", "--rate", "1e12"], ["--rate", "1000000000000", "up to 10,000,000"]),
    (["bench", "--duration", "-5"], ["--duration", "-5"]),
    (["bench", "--duration", "inf"], ["--duration", "inf"]),
    (["bench", "--repeats", "0"], ["--repeats", "0"]),
    (["bench", "--record-size", "0"], ["--record-size", "0"]),
    (["bench", "--connector", "no-such-case"], ["no-such-case"]),
    (["bench", "--fault", '{"fault": "down", "target": "kafka", "at_s": NaN, "duration_s": 3}'], ["at_s", "nan"]),
    (["bench", "--fault", '{"fault": "down", "target": "kafka", "at_s": 1e999, "duration_s": 3}'], ["at_s", "inf"]),
    (["bench", "--fault", '{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": 3, '
                          '"params": {"latency": NaN}}'], ["latency", "nan"]),
    (["certify", "--seed", "-1"], ["--seed", "-1"]),
    (["env", "up", "--kafka-heap-mb", "0"], ["--kafka-heap-mb", "0"]),
    (["env", "up", "--for-seconds", "nan"], ["--for-seconds", "nan"]),
])
def test_bad_numbers_on_the_command_line_are_refused_naming_the_option(argv, names):
    result, seconds = _run("-m", "streamcert", *argv)
    _assert_refused(result, seconds, *names)


@pytest.mark.parametrize("module, argv, names", [
    ("streamcert.benchmarks.checkers", ["--records", "-5"], ["--records", "-5"]),
    ("streamcert.benchmarks.checkers", ["--keys", "0"], ["--keys", "0"]),
    ("streamcert.benchmarks.checkers", ["--faults", "0"], ["--faults", "0"]),
    ("streamcert.benchmarks.checkers", ["--records", "10", "--no-pin"], ["--records 10", "Hint:"]),
    ("streamcert.benchmarks.connectors", ["--partitions", "0"], ["--partitions", "0"]),
    ("streamcert.benchmarks.connectors", ["--repeats", "-1"], ["--repeats", "-1"]),
])
def test_bad_benchmark_arguments_are_refused_naming_the_option(module, argv, names, tmp_path):
    result, seconds = _run("-m", module, *argv, "--out", str(tmp_path / "out.json"))
    _assert_refused(result, seconds, *names)


class _JvmGone(Exception):
    """Like a Py4J error whose text asks a JVM that teardown already stopped."""

    errmsg = "An error occurred while calling o42.start"

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def test_the_error_printer_never_fails_on_an_error_whose_text_needs_the_jvm():
    assert _describe(_JvmGone()) == "_JvmGone: An error occurred while calling o42.start"
    assert _describe(ValueError("first line\n\tat a.b(C.java:1)\n" * 50)) == "ValueError: first line"


@pytest.mark.parametrize("argv", [
    ["certify", "--connector", "streamcert-kafka", "--requirements", "SRC-1"],
    ["bench", "--duration", "5"],
])
def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(argv, tmp_path):
    a_file = tmp_path / "plain-file"
    a_file.write_text("x")
    out = str(a_file / "results")
    result, seconds = _run("-m", "streamcert", *argv, "--out", out)
    _assert_refused(result, seconds, "--out", out, "cannot be created")
