"""Kafka source and sink options: defaults, and a clear error naming the option and its allowed values."""

import pytest

from streamcert.connectors.kafka_options import parse_source_options
from streamcert.connectors.kafka_sink_options import parse_sink_options
from streamcert.spi.errors import ConfigurationError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a, b"}


def test_defaults():
    options = parse_source_options(BASE)
    assert options.topics == ("a", "b")
    assert options.isolation_level == "read_committed"
    assert options.starting_offsets == "earliest"
    assert options.max_records_per_batch is None and options.partition_discovery_interval_ms == 1000


def test_librdkafka_settings_pass_through():
    options = parse_source_options({**BASE, "kafka.fetch.max.bytes": "1048576", "maxRecordsPerBatch": "500"})
    assert options.kafka_conf == {"fetch.max.bytes": "1048576"} and options.max_records_per_batch == 500


@pytest.mark.parametrize("extra, needle", [
    ({"isolationLevel": "snapshot"}, "isolationLevel takes read_committed (default) or read_uncommitted"),
    ({"maxRecordsPerBatch": "0"}, "maxRecordsPerBatch='0'"),
    ({"maxRecordsPerBatch": "ten"}, "maxRecordsPerBatch='ten'"),
    ({"startingOffsets": "yesterday"}, "earliest (default) or latest"),
    ({"readerParallelism": "-1"}, "readerParallelism"),
    ({"subscribe": " , "}, "subscribe"),
    ({"maxOffsetsPerTrigger": "5"}, "Unknown option(s) for the streamcert-kafka source: maxOffsetsPerTrigger"),
    ({"kafka.group.id": "g"}, "set by the streamcert-kafka source itself"),
    ({"KAFKA.GROUP.ID": "g"}, "kafka.group.id are set by the streamcert-kafka source itself"),
])
def test_bad_options_are_named_with_allowed_values(extra, needle):
    with pytest.raises(ConfigurationError) as info:
        parse_source_options({**BASE, **extra})
    text = str(info.value)
    assert needle in text and "Hint:" in text


def test_bootstrap_is_required():
    with pytest.raises(ConfigurationError, match="Option kafka.bootstrap.servers is missing"):
        parse_source_options({"subscribe": "a"})
    with pytest.raises(ConfigurationError, match="kafka.bootstrap.servers=' '"):
        parse_source_options({"subscribe": "a", "kafka.bootstrap.servers": " "})


def test_spark_own_path_is_accepted_and_a_blank_group_is_no_group():
    options = parse_source_options({**BASE, "path": "ignored", "commitToGroup": " "})
    assert options.commit_to_group is None and options.kafka_conf == {}


def test_option_names_are_case_insensitive_as_in_spark():
    options = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "subscribe": "a", "maxrecordsperbatch": "7",
                                    "ISOLATIONLEVEL": "read_uncommitted"})
    assert options.max_records_per_batch == 7 and options.isolation_level == "read_uncommitted"
    assert options.bootstrap_servers == "h:1"


SINK = {"kafka.bootstrap.servers": "h:1", "topic": "out", "sinkId": "s1"}


def test_sink_defaults_name_the_staging_and_decision_log_topics():
    options = parse_sink_options({**SINK, "checkpointLocation": "/tmp/cp", "kafka.linger.ms": "7"})
    assert (options.staging_topic, options.decision_log_topic) == ("out.s1.staging", "out.s1.ledger")
    assert options.kafka_conf == {"linger.ms": "7"} and options.staging_partitions == 8


@pytest.mark.parametrize("name", ["decisionLogTopic", "ledgerTopic", "LEDGERTOPIC", "decisionlogtopic"])
def test_the_decision_log_topic_option_and_its_former_name_ledger_topic_mean_the_same(name):
    assert parse_sink_options({**SINK, name: "decisions"}).decision_log_topic == "decisions"


def test_the_decision_log_topic_set_twice_differently_is_refused():
    with pytest.raises(ConfigurationError, match="ledgerTopic='a' and decisionLogTopic='b'"):
        parse_sink_options({**SINK, "ledgerTopic": "a", "decisionLogTopic": "b"})
    assert parse_sink_options({**SINK, "ledgerTopic": "a", "decisionLogTopic": "a"}).decision_log_topic == "a"


@pytest.mark.parametrize("extra, needle", [
    ({"topic": None}, "Option topic is missing for the streamcert-kafka-2pc sink"),
    ({"sinkId": " "}, "sinkId=' '"),
    ({"sinkId": "a b"}, "sinkId 'a b' is not valid"),
    ({"stagingTopic": "no spaces"}, "stagingTopic='no spaces'"),
    ({"decisionLogTopic": ""}, "decisionLogTopic=''"),
    ({"tpoic": "x"}, "Unknown option(s) for the streamcert-kafka-2pc sink: tpoic"),
    ({"kafka.acks": "1"}, "kafka.acks are set by the streamcert-kafka-2pc sink itself"),
    ({"stagingBlockBytes": "9000000"}, "stagingBlockBytes takes an integer from 1 to 8388608"),
])
def test_bad_sink_options_are_named(extra, needle):
    options = {k: v for k, v in {**SINK, **extra}.items() if v is not None}
    with pytest.raises(ConfigurationError) as info:
        parse_sink_options(options)
    assert needle in str(info.value) and "Hint:" in str(info.value)
