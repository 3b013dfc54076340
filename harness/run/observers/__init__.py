"""Observers: read back what a connector wrote while a run goes on. The stack's systems
(:mod:`streamcert.harness.systems`) read through the kind's native observer here (Kafka, PostgreSQL, files); any
other system through its SPI reader (:mod:`.reader`).

Every module of this package is imported on first use and each :class:`~.base.Observer` subclass with a
``kind`` is registered under it (:func:`observer_for`: what the benchmarks' raw ceiling reads with).
"""

from __future__ import annotations

import importlib
import pkgutil

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.observers.base import OUTPUT_COLUMNS, Observer, OutputTarget

__all__ = ["OUTPUT_COLUMNS", "Observer", "OutputTarget", "observer_classes", "observer_class", "observer_for"]


def observer_classes() -> dict[str, type[Observer]]:
    """Output kind -> observer class, from every module of this package."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    found: dict[str, type[Observer]] = {}
    pending = list(Observer.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.kind and cls.__module__.startswith(__name__ + "."):
            found[cls.kind] = cls
    return found


def observer_class(kind: str) -> type[Observer]:
    """The observer class of output ``kind``; a ConfigurationError listing the known kinds otherwise."""
    classes = observer_classes()
    if kind not in classes:
        raise ConfigurationError(f"No observer reads output of kind {kind!r}.",
                                 hint=f"Output kinds streamcert can read back: {', '.join(sorted(classes))}.")
    return classes[kind]


def observer_for(target: OutputTarget, unpack=None) -> Observer:
    """A new (not started) observer of ``target`` by its kind."""
    return observer_class(target.kind)(target, unpack)
