"""The connector declaration: what a third party writes, checked before anything runs."""

from __future__ import annotations

import pytest

from streamcert.connectors.declarations import (BatchAggregatorUnderTest, KafkaOffsetSourceUnderTest,
                                                KafkaTwoPhaseSinkUnderTest, PostgresTwoPhaseSinkUnderTest)
from streamcert.conformance.catalogue import ids_for
from streamcert.connectors.spark_builtin import SparkFileSink, SparkKafkaSink, SparkKafkaSource
from streamcert.spi import ConfigurationError
from streamcert.harness.run.observers import observer_classes
from streamcert.spi.external import ExternalSystem
from streamcert.spi.connector import KINDS, AggregatorConnector, Connector, QueryContext, SinkConnector, SourceConnector

#: The requirement IDs by connector kind, from the catalogue.
REQUIREMENTS = {kind: ids_for(kind) for kind in ("source", "sink", "aggregator")}
REFERENCE = [KafkaOffsetSourceUnderTest, KafkaTwoPhaseSinkUnderTest, PostgresTwoPhaseSinkUnderTest,
             BatchAggregatorUnderTest, SparkFileSink, SparkKafkaSource, SparkKafkaSink]
BASES = {"source": SourceConnector, "sink": SinkConnector, "aggregator": AggregatorConnector}


class _Sink(SinkConnector):
    name = "example-sink"
    claims = frozenset({"SNK-1"})
    unclaimed = {"SNK-2": "writes no transactions"}

    def write(self, frame, context):
        return frame


@pytest.mark.parametrize("cls", REFERENCE, ids=lambda c: c.__name__)
def test_every_reference_declaration_satisfies_its_kind_and_covers_every_requirement(cls):
    connector = cls()
    assert isinstance(connector, BASES[connector.kind]) and connector.kind in KINDS
    connector.check_declaration(REQUIREMENTS[connector.kind], strict=True)
    if connector.kind == "sink":
        assert connector.output_kind in observer_classes()  # the harness can read back what it writes


def test_a_declaration_must_implement_its_kinds_method():
    class Incomplete(SourceConnector):
        name = "incomplete"

    with pytest.raises(TypeError, match="read"):
        Incomplete()


def test_coverage_says_claimed_unclaimed_with_reason_or_undeclared():
    assert _Sink().coverage(["SNK-1", "SNK-2", "SNK-3"]) == {
        "SNK-1": "claimed", "SNK-2": "unclaimed: writes no transactions", "SNK-3": "undeclared"}


def test_strict_mode_refuses_a_requirement_neither_claimed_nor_waived():
    with pytest.raises(ConfigurationError, match="SNK-3") as caught:
        _Sink().check_declaration(["SNK-1", "SNK-2", "SNK-3"])
    assert "unclaimed" in caught.value.hint
    _Sink().check_declaration(["SNK-1", "SNK-2", "SNK-3"], strict=False)  # lenient: skipped later, not an error


@pytest.mark.parametrize(("changes", "message"), [
    ({"name": ""}, "no name"),
    ({"claims": frozenset({"SNK-1", "SNK-2"})}, "both claims and waives SNK-2"),
    ({"unclaimed": {"SNK-2": "  "}}, "waives SNK-2 without a reason"),
])
def test_malformed_declarations_are_refused_with_what_is_wrong(changes, message):
    broken = type("Broken", (_Sink,), changes)()
    with pytest.raises(ConfigurationError, match=message):
        broken.check_declaration(strict=False)


class _WriteOnly(ExternalSystem):
    name = "write-only"

    def writer(self, name, endpoints):
        raise AssertionError("not called by a declaration check")


@pytest.mark.parametrize(("changes", "message"), [
    ({"output_system": object()}, "output_system is a object, not an ExternalSystem"),
    ({"output_system": _WriteOnly()}, r"output_system 'write-only' has no reader\(\)"),
])
def test_a_sink_s_system_that_cannot_read_its_output_back_is_refused(changes, message):
    broken = type("Broken", (_Sink,), changes)()
    with pytest.raises(ConfigurationError, match=message):
        broken.check_declaration(strict=False)


def test_a_source_s_system_without_a_writer_is_refused_and_one_with_it_is_taken():
    class Source(SourceConnector):
        name = "example-source"
        claims = frozenset({"SRC-1"})

        def read(self, spark, context):
            return None

    class ReadOnly(ExternalSystem):
        name = "read-only"

    with pytest.raises(ConfigurationError, match=r"input_system 'read-only' has no writer\(\)") as caught:
        type("Broken", (Source,), {"input_system": ReadOnly()})().check_declaration(strict=False)
    assert "Override ReadOnly.writer()" in caught.value.hint
    type("Fine", (Source,), {"input_system": _WriteOnly()})().check_declaration(strict=False)


def test_a_connector_of_no_kind_is_refused():
    class Kindless(Connector):
        name = "kindless"

    with pytest.raises(ConfigurationError, match="kind"):
        Kindless().check_declaration(strict=False)


def test_query_context_round_trips_through_plain_data_and_reads_options():
    context = QueryContext(bootstrap_servers="127.0.0.1:1", input_topic="in", output="out", checkpoint="/ck",
                           run_id="r1", postgres_dsn=None, parallelism=3, options={"sink_id": "x"})
    assert QueryContext.from_dict(context.to_dict()) == context
    assert context.option("sink_id") == "x" and context.option("missing", 7) == 7


def test_the_aggregators_batch_contract_follows_its_options():
    context = QueryContext("b", "in", "out", "/ck", "r", options={"max_batch_size": 40, "max_wait_ms": 2500})
    assert BatchAggregatorUnderTest().batch_bounds(context) == (40, 2.5)
    assert BatchAggregatorUnderTest().batch_bounds(QueryContext("b", "in", "out", "/ck", "r")) == (100, 1.0)


def test_a_claim_or_waiver_of_a_requirement_the_catalogue_does_not_have_for_the_kind_is_refused():
    class _Typo(SinkConnector):
        name = "typo-sink"
        claims = frozenset({"SNK-1", "SNK-11", "exactly-once"})

        def write(self, frame, context):
            raise NotImplementedError

    with pytest.raises(ConfigurationError, match="SNK-11") as caught:
        _Typo().check_declaration(["SNK-1", "SNK-2"], strict=False)
    assert "SNK-1, SNK-2" in caught.value.hint

    class _OtherKind(_Typo):
        claims = frozenset({"SNK-1"})
        unclaimed = {"SRC-1": "a sink reads nothing"}

    with pytest.raises(ConfigurationError, match="SRC-1"):
        _OtherKind().check_declaration(["SNK-1", "SNK-2"], strict=False)


def test_a_capability_claim_is_read_unknown_ones_are_refused_and_each_stands_on_its_requirements():
    from streamcert.conformance.catalogue import capabilities

    class _Capable(SinkConnector):
        name = "capable-sink"
        claims = frozenset({f"SNK-{n}" for n in range(1, 9)} | {"exactly-once", "rescale"})

        def write(self, frame, context):
            raise NotImplementedError

    sink_ids, sink_capabilities = REQUIREMENTS["sink"], capabilities("sink")
    _Capable().check_declaration(sink_ids, strict=False, capabilities=sink_capabilities)

    class _Misspelt(_Capable):
        claims = _Capable.claims | {"exactly_once"}

    with pytest.raises(ConfigurationError, match="'exactly_once'") as caught:
        _Misspelt().check_declaration(sink_ids, strict=False, capabilities=sink_capabilities)
    assert "exactly-once" in caught.value.hint

    class _Silent(_Capable):  # exactly once, and says nothing of the task-failure requirement that backs it
        claims = _Capable.claims - {"SNK-2"}

    with pytest.raises(ConfigurationError, match="'exactly-once' but neither claims nor waives SNK-2"):
        _Silent().check_declaration(sink_ids, strict=False, capabilities=sink_capabilities)
    _Silent().check_declaration(sink_ids, strict=False)  # without the catalogue's capabilities: not checked (SPI alone)

    class _DriverWrites(_Capable):  # its tasks write nothing: no zombie to fence, said with a reason
        claims = _Capable.claims - {"SNK-6"}
        unclaimed = {"SNK-6": "tasks write nothing"}

    _DriverWrites().check_declaration(sink_ids, strict=False, capabilities=sink_capabilities)

    class _Hollow(_Capable):  # exactly once, with every requirement behind it waived
        claims = frozenset({"exactly-once"})
        unclaimed = {f"SNK-{n}": "no" for n in range(1, 9)}

    with pytest.raises(ConfigurationError, match="waives every requirement behind it"):
        _Hollow().check_declaration(sink_ids, strict=False, capabilities=sink_capabilities)
