"""The external-system SPI: what a system does by default, which faults it takes (the ones it overrides), and that
the SPI pulls in nothing of the harness (a connector's package depends on the standard library and pyspark only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streamcert.spi.external import SYSTEM_FAULTS, Endpoint, ExternalSystem


class _Table(ExternalSystem):
    name = "table"


class _Server(ExternalSystem):
    name = "server"

    def kill(self) -> None:
        pass

    def restart(self) -> None:
        pass


def test_a_system_takes_the_faults_it_overrides_and_serves_what_it_implements():
    assert _Table().faults() == () and _Server().faults() == ("kill", "restart")
    assert set(SYSTEM_FAULTS) == {"kill", "restart", "pause", "resume"}
    table = _Table()
    table.stop()  # safe without start
    assert table.endpoints() == {} and table.spark_conf({}) == {}
    assert table.output_name("s", "r1", "/w") == "/w/output" and table.input_name("s", "r1", "/w") == "/w/input"
    with pytest.raises(NotImplementedError, match="reads no output"):
        table.reader("/w/output", {})
    with pytest.raises(NotImplementedError, match="writes no input"):
        table.writer("/w/input", {})
    assert Endpoint("127.0.0.1", 9).address == "127.0.0.1:9"


def test_the_spi_imports_nothing_of_the_harness_nor_its_libraries():
    code = ("import sys, streamcert.spi; "
            "bad = sorted(m for m in sys.modules if m.startswith(('streamcert.harness', 'pandas', 'pydantic', "
            "'confluent_kafka', 'psycopg', 'requests'))); print(bad)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
