"""add_partitions grows the run's input topic."""

from __future__ import annotations

import uuid

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.faults.topics import AddPartitionsFault
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic


@pytest.mark.integration
def test_add_partitions_grows_the_input_topic(stack, tmp_path):
    from confluent_kafka.admin import AdminClient

    from streamcert.harness.stack.kafka_clients import client_conf

    topic, history = f"faults-{uuid.uuid4().hex[:8]}", History()
    create_topic(stack.endpoints.bootstrap_servers, topic, partitions=2)
    fault = build_fault(FaultSpec("add_partitions", "kafka", 0, 1, {"count": 5}),
                        FaultContext(environment=stack, history=history, input_topic=topic, workdir=tmp_path))
    assert isinstance(fault, AddPartitionsFault)
    fault.start()
    fault.stop()
    admin = AdminClient(client_conf(stack.endpoints.bootstrap_servers))
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    assert history.events("fault-start")[0]["topic"] == topic


def test_add_partitions_needs_the_input_topic(tmp_path):
    with pytest.raises(ConfigurationError, match="input topic") as info:
        build_fault(FaultSpec("add_partitions", "kafka", 0, 1, {"count": 5}),
                    FaultContext(environment=object(), history=History(), workdir=tmp_path))
    assert "FaultContext(input_topic=" in str(info.value)
