"""Unit tests: Spark master URLs are checked before a JVM is started."""

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.spark import validate_master


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "local[2, 3]",
                                    "local-cluster[2,1,1024]", "spark://127.0.0.1:7077",
                                    "spark://127.0.0.1:7077,127.0.0.1:7078", "standalone"])
def test_valid_masters(master):
    assert validate_master(master) == master


@pytest.mark.parametrize("master", ["", "foo", "local[0]", "local[2,0]", "local-cluster[2,1]", "locale[2]",
                                    "spark://host", "standalone[2]"])
def test_invalid_masters_are_explained(master):
    with pytest.raises(ConfigurationError) as info:
        validate_master(master)
    assert "local[N,F]" in str(info.value) and "local-cluster" in str(info.value)


def test_a_standalone_cluster_spark_cannot_run_is_refused_before_anything_starts():
    from streamcert.harness.stack.spark import SparkConfig, SparkResource

    with pytest.raises(ConfigurationError, match="below 450 MiB"):
        SparkResource(SparkConfig(master="standalone", worker_memory_mb=100)).preflight()
    with pytest.raises(ConfigurationError, match="at least one worker"):
        SparkResource(SparkConfig(master="standalone", workers=0)).preflight()
