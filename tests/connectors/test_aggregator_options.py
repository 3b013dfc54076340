"""The batch aggregator refuses bad options and a state store it cannot work with, before any query starts."""

from __future__ import annotations

import pytest

from streamcert.connectors.aggregator import ROCKSDB_PROVIDER, aggregate_batches
from streamcert.harness.errors import ConfigurationError

pytestmark = pytest.mark.integration


@pytest.fixture
def frame(stack):
    spark = stack.spark
    return spark.readStream.format("rate").load().selectExpr(
        "CAST(value % 5 AS STRING) AS key", "0 AS partition", "value AS offset", "CAST('x' AS BINARY) AS value")


def test_the_default_state_store_is_refused_with_the_setting_to_use(stack, frame):
    previous = stack.spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    stack.spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
    try:
        with pytest.raises(ConfigurationError, match="RocksDB") as error:
            aggregate_batches(frame, max_batch_size=10, max_wait_ms=100)
        assert ROCKSDB_PROVIDER in error.value.hint
    finally:
        if previous:
            stack.spark.conf.set("spark.sql.streaming.stateStore.providerClass", previous)


@pytest.mark.parametrize("options, needle", [({"max_batch_size": 0, "max_wait_ms": 10}, "maxBatchSize"),
                                             ({"max_batch_size": 5, "max_wait_ms": -1}, "maxWaitMs"),
                                             ({"max_batch_size": 5, "max_wait_ms": 10, "key_groups": 0}, "keyGroups")])
def test_bad_options_name_the_option(stack, frame, options, needle):
    with pytest.raises(ConfigurationError, match=needle):
        aggregate_batches(frame, **options)


def test_missing_columns_are_named(stack, frame):
    stack.spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    try:
        with pytest.raises(ConfigurationError, match="offset"):
            aggregate_batches(frame.drop("offset"), max_batch_size=5, max_wait_ms=10)
    finally:
        stack.spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
