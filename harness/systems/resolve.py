"""Which system a run's input and output are in: the one a connector declares, else the stack's.

A source that declares no ``input_system`` reads a topic of the stack's Kafka; a sink that declares no
``output_system`` writes to the stack's system its ``output_kind`` names. Runs in the harness's process.
"""

from __future__ import annotations

from typing import Any

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.network import LINKS
from streamcert.harness.faults.registry import ENDPOINT_NAME, stack_targets
from streamcert.harness.systems.file_sink import SparkFileSink
from streamcert.harness.systems.kafka_topics import KafkaTopics
from streamcert.harness.systems.postgres_tables import PostgresTables
from streamcert.harness.systems.stack_system import StackAddresses, StackSystem
from streamcert.spi.external import ExternalSystem

__all__ = ["STACK_SYSTEMS", "declared_input_system", "declared_output_system", "input_system_of", "output_system_of",
           "addresses", "stack_addresses"]

#: The stack's systems by the name a sink's ``output_kind`` gives.
STACK_SYSTEMS: dict[str, type[StackSystem]] = {system.name: system
                                               for system in (KafkaTopics, PostgresTables, SparkFileSink)}


def declared_input_system(source: Any) -> ExternalSystem:
    """The system ``source`` reads (unbound when it is the stack's): what plans need before a stack starts."""
    return getattr(source, "input_system", None) or KafkaTopics()


def declared_output_system(sink: Any) -> ExternalSystem:
    """The system ``sink`` writes (unbound when it is the stack's); a ConfigurationError for an unknown kind."""
    system = getattr(sink, "output_system", None)
    if system is not None:
        return system
    kind = getattr(sink, "output_kind", "")
    if kind not in STACK_SYSTEMS:
        raise ConfigurationError(f"Sink {getattr(sink, 'name', sink)!r} writes output of kind {kind!r}, which no "
                                 "system of the stack holds.", hint=f"Output kinds the stack reads back: "
                                 f"{', '.join(sorted(STACK_SYSTEMS))}; for any other system, declare its "
                                 "ExternalSystem as the sink's output_system.")
    return STACK_SYSTEMS[kind]()


def stack_addresses(env: Any, bootstrap: str | None, topics: Any = None, since: float | None = None) -> StackAddresses:
    """One run's :class:`StackAddresses` on the started stack ``env``; ``bootstrap`` is the run's Kafka path."""
    endpoints = env.endpoints
    return StackAddresses(bootstrap_servers=bootstrap, kafka_direct=endpoints.kafka_direct_bootstrap,
                          postgres_dsn=endpoints.postgres_dsn, postgres_direct_dsn=endpoints.postgres_direct_dsn,
                          topics=topics, since=since)


def input_system_of(source: Any, at: StackAddresses) -> ExternalSystem:
    """The system a run of ``source`` reads, the stack's bound to ``at``."""
    return _bound(declared_input_system(source), at)


def output_system_of(sink: Any, at: StackAddresses) -> ExternalSystem:
    """The system a run of ``sink`` writes, the stack's bound to ``at``."""
    return _bound(declared_output_system(sink), at)


def addresses(env: Any, system: ExternalSystem) -> tuple[dict[str, str], dict[str, str]]:
    """``system``'s endpoints as ``(direct, proxied)``: a connector's own system is started (once per stack) and
    proxied here; the stack's are already."""
    if isinstance(system, StackSystem):
        return system.direct(), system.proxied()
    _check_endpoint_names(system)
    started = env.systems.started(system)
    return dict(started.direct), started.proxied


def _check_endpoint_names(system: ExternalSystem) -> None:
    """Refuse, before it starts, a system whose endpoint names a fault could not tell from the stack's own targets
    (network faults aim at an endpoint by its name)."""
    bad = [name for name in system.endpoint_names
           if not ENDPOINT_NAME.fullmatch(name) or name in stack_targets() and name not in LINKS]
    if bad:
        raise ConfigurationError(f"The external system {system.name!r} names endpoint(s) {bad}, which faults could "
                                 "not tell from the stack's own targets.", hint="Call each endpoint a name of its "
                                 "own: a letter, then letters, digits, '_', '.' or '-' (not driver, executor...).")


def _bound(system: ExternalSystem, at: StackAddresses) -> ExternalSystem:
    return system.bound(at) if isinstance(system, StackSystem) else system
