"""Source options: defaults, and a clear error naming the option and its allowed values."""

import pytest

from streamcert.connectors.kafka_options import parse_source_options
from streamcert.harness.errors import ConfigurationError

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
    ({"kafka.group.id": "g"}, "set by the source itself"),
])
def test_bad_options_are_named_with_allowed_values(extra, needle):
    with pytest.raises(ConfigurationError) as info:
        parse_source_options({**BASE, **extra})
    text = str(info.value)
    assert needle in text and "Hint:" in text


def test_bootstrap_is_required():
    with pytest.raises(ConfigurationError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "a"})


def test_option_names_are_case_insensitive_as_in_spark():
    options = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "subscribe": "a", "maxrecordsperbatch": "7",
                                    "ISOLATIONLEVEL": "read_uncommitted"})
    assert options.max_records_per_batch == 7 and options.isolation_level == "read_uncommitted"
    assert options.bootstrap_servers == "h:1"
