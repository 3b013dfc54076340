"""Faults on a connector's own external system (:mod:`streamcert.spi.external`), named by the system's name: killed
(SIGKILL, or what the system calls a kill) at start and started again on the same data at stop (``system_kill``), or
frozen at start and let go at stop (``system_pause``). A system takes the faults it overrides
(``ExternalSystem.faults()``); one that does not is told so before the run, never silently spared."""

from __future__ import annotations

from typing import Any

from streamcert.harness.faults.base import Fault, FaultNotApplicable
from streamcert.harness.faults.registry import fault_kind

__all__ = ["SystemFault"]

#: fault kind -> (the system's method at start, at stop)
_ACTIONS = {"system_kill": ("kill", "restart"), "system_pause": ("pause", "resume")}


@fault_kind("system_kill", targets=("system",), external="system")
@fault_kind("system_pause", targets=("system",), external="system")
class SystemFault(Fault):
    """A connector's external system killed then restarted, or paused then resumed; the target is its name (or
    ``system``: the one system the run's connectors bring)."""

    needs = ("environment",)

    def __init__(self, spec, context) -> None:
        super().__init__(spec, context)
        self._struck = False

    def _system(self) -> Any:
        started = self.environment.systems.named(self.spec.target)
        if started is None:
            raise FaultNotApplicable(f"Fault {self.spec.fault!r} targets the external system {self.spec.target!r}, "
                                     "and no connector of this run brings one by that name.",
                                     hint="Target the name of the sink's or source's ExternalSystem.")
        begin, _ = _ACTIONS[self.spec.fault]
        if begin not in started.system.faults():
            raise FaultNotApplicable(f"The external system {started.system.name!r} does not take {begin!r} (its "
                                     f"faults: {', '.join(started.system.faults()) or 'none'}).",
                                     hint=f"Override ExternalSystem.{begin} in its declaration, or leave the fault "
                                          "out.")
        return started.system

    def _inject(self) -> dict[str, Any]:
        system = self._system()
        getattr(system, _ACTIONS[self.spec.fault][0])()
        self._struck = True
        return {"system": system.name, "action": _ACTIONS[self.spec.fault][0]}

    def _heal(self) -> dict[str, Any]:
        if not self._struck:
            return {}
        system = self._system()
        getattr(system, _ACTIONS[self.spec.fault][1])()
        self._struck = False
        return {"system": system.name, "action": _ACTIONS[self.spec.fault][1]}
