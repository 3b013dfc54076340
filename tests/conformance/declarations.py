"""Connector declarations for the conformance tests: broken ones the certification must refuse."""

from __future__ import annotations

from streamcert.spi.connector import SinkConnector, SourceConnector

_GENERAL = frozenset({"GEN-1", "GEN-2", "GEN-3"})


class UndeclaredSink(SinkConnector):
    """Claims SNK-1 and the general requirements, and says nothing of SNK-2..8."""

    name = "undeclared-sink"
    claims = frozenset({"SNK-1"}) | _GENERAL

    def write(self, frame, context):
        raise NotImplementedError


class BadMomentSink(SinkConnector):
    """Marks a kill point with a moment that does not exist."""

    name = "bad-moment-sink"
    claims = frozenset({f"SNK-{n}" for n in range(1, 9)}) | _GENERAL
    kill_points = {"mine.after-write": "sometime"}

    def write(self, frame, context):
        raise NotImplementedError


class SameNameSource(SourceConnector):
    name = "streamcert-kafka"
    claims = frozenset({f"SRC-{n}" for n in range(1, 11)}) | _GENERAL
    unclaimed = {"SRC-11": "no event-time alignment"}

    def read(self, spark, context):
        raise NotImplementedError
