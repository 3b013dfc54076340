"""Topic faults: the input topic grown to more partitions while the query runs (a rescale of the source).

With ``freeze_driver_s`` the driver is frozen (SIGSTOP, :meth:`~streamcert.harness.run.driver.DriverProcess.pause`)
from before the partitions are added until the input's committed records reach every added one: the query can only
find the new partitions with records already in them, so a source that starts a found partition at its end, not at
its earliest, loses those records whatever its discovery interval (SRC-5's witness, records written before the
partition was found). The workload writes into the added partitions once they exist
(:attr:`~streamcert.harness.run.workload.WorkloadSpec.added_partitions`). With ``after_input_read_s`` it first waits
for the attempt running to read input, so that a rescale before it is seen reading (SRC-10's idle reader tasks).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from streamcert.harness.faults.base import Fault, wait_for_input_read, within
from streamcert.harness.faults.registry import FaultParams, fault_kind

__all__ = ["AddPartitionsParams", "AddPartitionsFault"]


class AddPartitionsParams(FaultParams):
    count: int = Field(ge=1, description="partitions the input topic has afterwards")
    freeze_driver_s: float = Field(0.0, ge=0, le=60, allow_inf_nan=False,
                                   description="freeze the driver from before the partitions are added until the "
                                               "input's committed records reach every added partition, at most this "
                                               "long (0: no freeze): the query then finds them with records in them")
    after_input_read_s: float = Field(0.0, ge=0, le=300, allow_inf_nan=False,
                                      description="before growing the topic, wait at most this long for the driver's "
                                                  "current attempt to commit a batch that read input (0: do not "
                                                  "wait): the attempt before the growth is seen reading (a rescale "
                                                  "to more reader tasks than partitions, SRC-10)")


@fault_kind("add_partitions", targets=("kafka",), params=AddPartitionsParams)
class AddPartitionsFault(Fault):
    """Grow the input topic to ``count`` partitions; nothing to heal (partitions cannot be removed). The
    ``fault-start`` event says when they were added (``added_at``), how many the topic had before, and, with a
    freeze, the committed end offset each added partition had when the driver was let go (``written_before_found``)."""

    needs = ("environment", "input_topic")

    def _inject(self) -> dict[str, Any]:
        # imported here: the registry imports every fault module to parse a schedule, which needs no Kafka client
        from streamcert.harness.stack.kafka_clients import add_partitions, partition_leaders

        bootstrap = self.environment.endpoints.bootstrap_servers
        wait = self.params.after_input_read_s
        read_first = wait_for_input_read(self, wait) if wait else {}
        before = len(partition_leaders(bootstrap, self.input_topic))
        freeze = self.params.freeze_driver_s
        if freeze:
            self.driver.pause()
        frozen_at = time.monotonic()
        try:
            added_at = time.time()
            add_partitions(bootstrap, self.input_topic, self.params.count)
            written = self._committed_into(bootstrap, range(before, self.params.count), frozen_at + freeze) \
                if freeze else {}
        finally:
            if freeze:
                self.driver.resume()
        return {"topic": self.input_topic, "added_at": added_at, "partitions_before": before, **read_first,
                **({"frozen_s": round(time.monotonic() - frozen_at, 3), "written_before_found": written}
                   if freeze else {})}

    def _committed_into(self, bootstrap: str, added: range, deadline: float) -> dict[str, int]:
        """The committed end offset of each added partition once every one has records, or at ``deadline``."""
        from streamcert.harness.stack.kafka_clients import end_offsets

        def offsets() -> dict[int, int]:
            return {p: o for p, o in end_offsets(bootstrap, self.input_topic, "read_committed", timeout=5).items()
                    if p in added}

        def all_written() -> dict[int, int] | None:
            seen = offsets()
            return seen if len(seen) == len(added) and all(seen.values()) else None

        found = within(all_written, what="records in the added partitions",
                       timeout=max(0.0, deadline - time.monotonic()), interval=0.1)
        return {str(p): o for p, o in sorted((found or offsets()).items())}

    def _heal(self) -> None:
        return None
