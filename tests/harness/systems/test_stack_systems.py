"""The stack's Kafka, PostgreSQL and file sink as SPI systems: what plans read of them unbound, how a run binds them,
how the SPI's reader interface reads through the stack's observers."""

from __future__ import annotations

import pandas as pd
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.observers.base import VISIBILITY_ORDER, Observer, OutputTarget
from streamcert.harness.systems import (STACK_SYSTEMS, KafkaTopics, ObserverReader, PostgresTables, SparkFileSink,
                                        StackAddresses, StackSystem, declared_input_system, declared_output_system,
                                        input_system_of, output_system_of)
from streamcert.spi.external import Endpoint, ExternalSystem, InputWriter, OutputReader


@pytest.mark.parametrize("system", [KafkaTopics, PostgresTables, SparkFileSink])
def test_each_stack_system_is_an_spi_system_named_as_sinks_declare_their_output(system):
    assert issubclass(system, ExternalSystem) and issubclass(system, StackSystem)
    assert STACK_SYSTEMS[system.name] is system
    assert system().faults() == ()  # its process is the stack's: its faults are the stack's families


def test_unbound_systems_name_their_endpoints_and_refuse_addresses_with_a_hint():
    assert KafkaTopics.endpoint_names == ("kafka",) and PostgresTables.endpoint_names == ("postgres",)
    assert SparkFileSink().endpoints() == {}
    with pytest.raises(ConfigurationError, match="no Kafka") as caught:
        KafkaTopics().writer("topic", {})
    assert caught.value.hint


def test_bound_systems_give_the_run_s_path_to_the_query_and_the_server_s_own_address():
    at = StackAddresses(bootstrap_servers="127.0.0.1:1001", kafka_direct="127.0.0.1:2002",
                        postgres_dsn="host=127.0.0.1 port=3003 dbname=x",
                        postgres_direct_dsn="host=127.0.0.1 port=4004")
    kafka, postgres = KafkaTopics().bound(at), PostgresTables().bound(at)
    assert kafka.proxied() == {"kafka": "127.0.0.1:1001"} and kafka.direct() == {"kafka": "127.0.0.1:2002"}
    assert kafka.endpoints() == {"kafka": Endpoint("127.0.0.1", 2002)}
    assert postgres.endpoints() == {"postgres": Endpoint("127.0.0.1", 4004)}
    writer = kafka.writer("in-topic", {})
    assert isinstance(writer, InputWriter) and writer.writes_uncommitted and writer.bootstrap == "127.0.0.1:1001"
    assert kafka.observer("out").target.mark_address == "127.0.0.1:2002"
    assert isinstance(postgres.reader("t", {}), OutputReader)


class _Source:
    name, input_system = "src", None


class _Sink:
    name, output_system, output_kind = "snk", None, "postgres"


class _Own(ExternalSystem):
    name = "own"


def test_connectors_without_a_system_of_their_own_get_the_stack_s_and_others_keep_theirs():
    at = StackAddresses(bootstrap_servers="b:1")
    assert isinstance(declared_input_system(_Source()), KafkaTopics)
    assert input_system_of(_Source(), at).at is at
    assert isinstance(output_system_of(_Sink(), at), PostgresTables)
    own = _Own()
    sink = type("S", (), {"name": "s", "output_system": own, "output_kind": "kafka"})()
    assert declared_output_system(sink) is own and output_system_of(sink, at) is own
    odd = type("S", (), {"name": "odd", "output_system": None, "output_kind": "ftp"})()
    with pytest.raises(ConfigurationError, match="'ftp'") as caught:
        declared_output_system(odd)
    assert "output_system" in caught.value.hint


class _Rows(Observer):
    kind = ""

    def __init__(self, frames):
        super().__init__(OutputTarget("test", "t"))
        self.frames, self.opened, self.closed = list(frames), 0, 0

    def _open(self):
        self.opened += 1

    def _close(self):
        self.closed += 1

    def _read_new(self):
        return self.frames.pop(0) if self.frames else None


def test_the_observer_reader_hands_over_each_row_with_its_order_and_location():
    rows = _Rows([pd.DataFrame({"key": [b"k", None], "value": [b"v1", b"v2"], VISIBILITY_ORDER: [3, 3],
                                "file": ["f", "f"], "batch": [1, 1]})])
    reader = ObserverReader(rows, leftovers=lambda: None)
    first = reader.read_new()
    assert [(r.value, r.key, r.order, dict(r.location)) for r in first] == [
        (b"v1", b"k", 3, {"file": "f", "batch": 1}), (b"v2", None, 3, {"file": "f", "batch": 1})]
    assert reader.read_new() == [] and rows.opened == 1
    reader.close()
    assert rows.closed == 1 and reader.leftovers() is None
