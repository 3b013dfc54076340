"""Topic faults: the input topic grown to more partitions while the query runs (a rescale of the source)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from streamcert.harness.faults.base import Fault
from streamcert.harness.faults.registry import FaultParams, fault_kind

__all__ = ["AddPartitionsParams", "AddPartitionsFault"]


class AddPartitionsParams(FaultParams):
    count: int = Field(ge=1, description="partitions the input topic has afterwards")


@fault_kind("add_partitions", targets=("kafka",), params=AddPartitionsParams)
class AddPartitionsFault(Fault):
    """Grow the input topic to ``count`` partitions; nothing to heal (partitions cannot be removed)."""

    needs = ("environment", "input_topic")

    def _inject(self) -> dict[str, Any]:
        # imported here: the registry imports every fault module to parse a schedule, which needs no Kafka client
        from streamcert.harness.stack.kafka_clients import add_partitions

        add_partitions(self.environment.endpoints.bootstrap_servers, self.input_topic, self.params.count)
        return {"topic": self.input_topic}

    def _heal(self) -> None:
        return None
