"""Standalone cluster faults (a scenario with master ``standalone``): a worker SIGKILLed with its executor.

The worker's process group goes (the worker JVM, the executor it launched, that executor's Python workers): the
master sees the worker lost, Spark loses the executor's tasks and retries them on the other workers. ``stop``
starts the worker again and waits until the master counts it alive. The events record the worker hit, whether its
executor was running the application (cores in use), and the master's count of live workers after the kill.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import Fault, within
from streamcert.harness.faults.registry import FaultParams, fault_kind

__all__ = ["WorkerKillParams", "WorkerKill"]


class WorkerKillParams(FaultParams):
    worker: int | None = Field(None, ge=0, description="the worker's index (default: the first one whose executor "
                                                       "has cores in use)")


@fault_kind("worker_kill", targets=("executor",), params=WorkerKillParams)
class WorkerKill(Fault):
    """SIGKILL one standalone worker with its executor; start it again at stop."""

    needs = ("spark_cluster",)
    wait_s = 60.0

    @property
    def cluster(self) -> Any:
        return self.context.spark_cluster

    def _busy(self) -> list[int]:
        """Indexes of our workers whose executor has cores in use (the application runs there)."""
        busy = {f"{w.get('host')}:{w.get('port')}" for w in self.cluster.alive_workers() if w.get("coresused")}
        return [worker.index for worker in self.cluster.workers if worker.address in busy]

    def _inject(self) -> dict[str, Any]:
        cluster = self.cluster
        busy = within(self._busy, what="a worker running the application's executor", timeout=self.wait_s,
                      interval=0.5) or []
        index = self.params.worker if self.params.worker is not None else (busy[0] if busy else 0)
        if index >= len(cluster.workers):
            raise ConfigurationError(f"Fault {self.spec.fault!r}: the cluster has no worker {index}.",
                                     hint=f"Workers: 0..{len(cluster.workers) - 1}.")
        worker = cluster.workers[index]
        pid = worker.pid
        self._hit = index
        cluster.kill_worker(index)
        alive_after = within(lambda: (alive := cluster.alive_workers()) is not None
                             and worker.address not in {f"{w.get('host')}:{w.get('port')}" for w in alive}
                             and len(alive) + 1, what="the master seeing the worker lost", timeout=30, interval=0.3)
        return {"worker": index, "address": worker.address, "pid": pid, "executor_busy": index in busy,
                "master_saw_loss": alive_after is not None,
                "alive_after": (alive_after - 1) if alive_after is not None else None}

    def _heal(self) -> dict[str, Any]:
        self.cluster.restart_worker(self._hit)
        return {"worker": self._hit, "alive": len(self.cluster.alive_workers())}
