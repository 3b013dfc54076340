"""Network faults: a Toxiproxy toxic on the Kafka or PostgreSQL link, or the link taken down.

Each toxic's parameters are Toxiproxy's attributes (integers: milliseconds, bytes, KB/s); an attribute left out
takes Toxiproxy's default. Every kind here acts on one direction of the link (``stream``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from pydantic import Field

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import Fault
from streamcert.harness.faults.registry import FaultParams, fault_kind

if TYPE_CHECKING:
    from streamcert.harness.stack.toxiproxy import Link

__all__ = ["LINKS", "NetworkFault", "LatencyParams", "BandwidthParams", "TimeoutParams", "SlowCloseParams",
           "SlicerParams", "LimitDataParams"]

#: The targets of a network fault: the links the stack proxies (and those of the connectors' external systems).
LINKS = ("kafka", "postgres")
#: Every network fault acts on one direction of a link, and may target an external system's endpoint by name.
_ON_A_LINK = {"stream": True, "external": "endpoint"}


def _attribute(minimum: int, description: str) -> Any:
    # None: not sent, so Toxiproxy's own default applies (a default of 0 would break the minimum of some)
    return Field(None, ge=minimum, description=description)


class LatencyParams(FaultParams):
    latency: int = _attribute(0, "milliseconds added to each packet")
    jitter: int = _attribute(0, "milliseconds of random variation")


class BandwidthParams(FaultParams):
    rate: int = _attribute(1, "KB/s")


class TimeoutParams(FaultParams):
    timeout: int = _attribute(0, "milliseconds before the connection closes (0: data stops, never closes)")


class SlowCloseParams(FaultParams):
    delay: int = _attribute(0, "milliseconds the close is delayed")


class SlicerParams(FaultParams):
    average_size: int = _attribute(1, "bytes per slice")
    size_variation: int = _attribute(0, "bytes of variation")
    delay: int = _attribute(0, "microseconds between slices")


class LimitDataParams(FaultParams):
    bytes: int = _attribute(1, "bytes passed before the connection closes")


def _latency(rng: random.Random) -> dict[str, Any]:
    return {"latency": rng.choice([50, 100, 300, 1000]), "jitter": rng.choice([0, 20, 100])}


def _bandwidth(rng: random.Random) -> dict[str, Any]:
    return {"rate": rng.choice([10, 100, 1000])}


def _timeout(rng: random.Random) -> dict[str, Any]:
    return {"timeout": rng.choice([0, 500, 2000])}


def _reset_peer(rng: random.Random) -> dict[str, Any]:
    return {"timeout": rng.choice([0, 500])}


def _slow_close(rng: random.Random) -> dict[str, Any]:
    return {"delay": rng.choice([100, 1000])}


def _slicer(rng: random.Random) -> dict[str, Any]:
    return {"average_size": rng.choice([16, 64]), "size_variation": 8, "delay": rng.choice([1, 10])}


def _limit_data(rng: random.Random) -> dict[str, Any]:
    return {"bytes": rng.choice([1024, 65536])}


@fault_kind("latency", targets=LINKS, params=LatencyParams, random_params=_latency, **_ON_A_LINK)
@fault_kind("bandwidth", targets=LINKS, params=BandwidthParams, random_params=_bandwidth, **_ON_A_LINK)
@fault_kind("timeout", targets=LINKS, params=TimeoutParams, random_params=_timeout, **_ON_A_LINK)
@fault_kind("reset_peer", targets=LINKS, params=TimeoutParams, random_params=_reset_peer, **_ON_A_LINK)
@fault_kind("slow_close", targets=LINKS, params=SlowCloseParams, random_params=_slow_close, **_ON_A_LINK)
@fault_kind("slicer", targets=LINKS, params=SlicerParams, random_params=_slicer, **_ON_A_LINK)
@fault_kind("limit_data", targets=LINKS, params=LimitDataParams, random_params=_limit_data, **_ON_A_LINK)
@fault_kind("down", targets=LINKS, **_ON_A_LINK)
class NetworkFault(Fault):
    """A Toxiproxy toxic on a link, or the link down (``down``)."""

    needs = ("environment",)

    def _link(self) -> Link:
        environment = self.environment
        link = environment.link(self.spec.target)
        if link is None:
            raise ConfigurationError(f"There is no Toxiproxy link to {self.spec.target} in this environment.",
                                     hint="Network faults need the local or testcontainers provider "
                                     "(or STREAMCERT_TOXIPROXY_API with the external one).")
        return link

    def _inject(self) -> dict[str, Any]:
        link = self._link()
        if self.spec.fault == "down":
            link.disable()
            return {"link": link.name}
        # the attributes as written in the schedule: what is left out keeps Toxiproxy's default
        self._toxic = link.add_toxic(self.spec.fault, stream=self.spec.stream, **self.spec.params)
        return {"link": link.name, "toxic": self._toxic}

    def _heal(self) -> dict[str, Any]:
        link = self._link()
        if self.spec.fault == "down":
            link.enable()
        else:
            link.remove_toxic(self._toxic)
        return {"link": link.name}
