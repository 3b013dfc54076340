"""The one table of fault kinds, and the one place a fault object is built from a spec.

Each module of this package registers the kinds it carries out with :func:`fault_kind` on its
:class:`~streamcert.harness.faults.base.Fault` class::

    @fault_kind("broker_kill", targets=("kafka",))
    class BrokerFault(Fault): ...

A kind names its fault class, the targets it may take, a pydantic model of its parameters (with their bounds),
the generator of random parameters :func:`streamcert.harness.faults.schedule.generate` uses, and whether it takes
a ``stream`` (a direction of a network link). The registry imports every module of the package itself
(:mod:`pkgutil`) the first time it is asked, so a new fault kind is one new module (and its test), nothing else:
the schedule's models, its JSON Schema and :func:`build_fault` all read this table.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import Fault, FaultContext

if TYPE_CHECKING:
    from streamcert.harness.faults.schedule import FaultSpec

__all__ = ["FaultParams", "NoParams", "FaultKind", "fault_kind", "kinds", "kind", "build_fault", "ENDPOINT_NAME",
           "stack_targets"]

#: What a connector's external system, or one of its endpoints, may be called, as a fault's target.
ENDPOINT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}")
_OR_EXTERNAL = {"endpoint": ", or the name of an endpoint of a connector's external system "
                            "(ExternalSystem.endpoint_names)",
                "system": ", or the name of a connector's external system (ExternalSystem.name)"}

F = TypeVar("F", bound=type[Fault])

#: The package whose modules are searched for fault kinds.
_PACKAGE = __name__.rpartition(".")[0]


class FaultParams(BaseModel):
    """Base of every kind's parameter model: unknown parameters refused, no coercion (``"5"`` is not 5)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NoParams(FaultParams):
    """The parameters of a kind that takes none."""


def _no_random_params(_rng: random.Random) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault: its name in schedules, what carries it out and what it accepts."""

    name: str
    fault_class: type[Fault]
    targets: tuple[str, ...]
    params: type[FaultParams]
    #: ``random_params(rng)``: parameters for a generated schedule; the rng calls it makes are part of the
    #: schedule's byte-for-byte replay by seed, so change them only with the golden test. None: a kind whose
    #: required parameters no generator can choose (a connector's point name), left out of generated schedules.
    random_params: Callable[[random.Random], dict[str, Any]] | None
    #: True when the kind acts on one direction of a link (``upstream`` or ``downstream``).
    stream: bool
    #: What of a connector's own external system (:mod:`streamcert.spi.external`) the kind may also target, by its
    #: name (:data:`ENDPOINT_NAME`): ``endpoint`` (a link the stack made for it), ``system`` (the system itself), or
    #: nothing (empty).
    external: str = ""

    def targets_text(self) -> str:
        """The targets this kind takes, as a hint says them."""
        return ", ".join(self.targets) + _OR_EXTERNAL.get(self.external, "")

    def accepts(self, target: str) -> bool:
        """Whether ``target`` is one this kind takes."""
        return target in self.targets or (bool(self.external) and bool(ENDPOINT_NAME.fullmatch(target))
                                          and target not in stack_targets())


_kinds: dict[str, FaultKind] = {}
_discovered: set[str] = set()
_lock = threading.RLock()


def fault_kind(name: str, *, targets: tuple[str, ...], params: type[FaultParams] = NoParams,
               random_params: Callable[[random.Random], dict[str, Any]] | None = None,
               stream: bool = False, external: str = "") -> Callable[[F], F]:
    """Class decorator: ``name`` is carried out by the decorated Fault class (stack one per kind).

    ``random_params`` may be left out when no parameter is required (generated entries then take none). Runs when
    the fault's module is imported (by :func:`kinds` on first use).
    """
    required = any(info.is_required() for info in params.model_fields.values())
    if random_params is None and not required:
        random_params = _no_random_params

    def register(cls: F) -> F:
        if not (isinstance(cls, type) and issubclass(cls, Fault)):
            raise TypeError(f"fault kind {name!r} must decorate a subclass of Fault, not {cls!r}")
        if not targets:
            raise ValueError(f"fault kind {name!r} needs at least one target")
        if external not in ("", *_OR_EXTERNAL):
            raise ValueError(f"fault kind {name!r}: external must be one of {sorted(_OR_EXTERNAL)} or empty")
        with _lock:
            known = _kinds.get(name)
            if known is not None and known.fault_class is not cls:
                raise ValueError(f"fault kind {name!r} is registered twice: by {_where(known.fault_class)} and "
                                 f"by {_where(cls)}")
            _kinds[name] = FaultKind(name, cls, tuple(targets), params, random_params, stream, external)
        return cls

    return register


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _discover(package: ModuleType) -> None:
    """Import every module of ``package`` once, so that their :func:`fault_kind` decorators run."""
    for module in pkgutil.iter_modules(package.__path__):
        qualified = f"{package.__name__}.{module.name}"
        if qualified not in _discovered:
            importlib.import_module(qualified)
            _discovered.add(qualified)


def kinds() -> dict[str, FaultKind]:
    """Every registered kind, by name (sorted); the package's modules are imported on the first call."""
    with _lock:
        _discover(importlib.import_module(_PACKAGE))
        return {name: _kinds[name] for name in sorted(_kinds)}


def kind(name: str) -> FaultKind:
    """The kind called ``name``; a ConfigurationError listing the known ones otherwise."""
    known = kinds()
    if name not in known:
        raise ConfigurationError(f"There is no fault kind {name!r}.", hint=f"Use one of: {', '.join(known)}.")
    return known[name]


def stack_targets() -> frozenset[str]:
    """Every target some fault kind names (``driver``, ``kafka``, ``executor``...): no external system's endpoint
    may be called like one."""
    return frozenset(target for found in kinds().values() for target in found.targets)


def build_fault(spec: FaultSpec, context: FaultContext) -> Fault:
    """The fault object that carries out ``spec`` in ``context``: the one dispatch from a spec to a fault.

    Called by whoever runs a schedule, before the run starts; a kind or target this registry does not know, or a
    context without what the fault acts on, is a ConfigurationError here rather than when the fault strikes.
    """
    found = kind(spec.fault)
    if not found.accepts(spec.target):
        raise ConfigurationError(f"Fault {spec.fault!r} cannot target {spec.target!r}.",
                                 hint=f"Targets for {spec.fault}: {found.targets_text()}.")
    return found.fault_class(spec, context)
