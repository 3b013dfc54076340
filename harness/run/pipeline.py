"""The query of a scenario, composed from connector declarations: source -> [aggregator] -> sink.

:func:`build` is the query builder the :class:`~streamcert.harness.run.driver.DriverProcess` runs in the driver
process, once per attempt: it loads each connector, makes the :class:`~streamcert.spi.connector.QueryContext`
of this attempt (``parallelism`` may differ after a rescale) and returns the sink's writer with the
scenario's trigger.
"""

from __future__ import annotations

from typing import Any

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.connectors import load_connector
from streamcert.spi.connector import QueryContext

__all__ = ["BUILDER", "build", "query_params"]

#: The builder reference the scenario runner hands to its DriverProcess.
BUILDER = "streamcert.harness.run.pipeline:build"


def query_params(source: str, sink: str, aggregator: str | None, context: QueryContext,
                 trigger: str) -> dict[str, Any]:
    """The driver's params for :func:`build` (plain JSON data; ``parallelism`` is what a rescale changes)."""
    return {"source": source, "sink": sink, "aggregator": aggregator, "context": context.to_dict(),
            "parallelism": context.parallelism, "trigger": trigger}


def build(spark: Any, params: dict[str, Any]) -> Any:
    """Driver: the writer of this attempt's query (not started).

    ``params["connector_options"]`` reach only the connector of kind ``params["options_for"]`` (the GEN-2 probe);
    the others get none.
    """
    context_data = {**params["context"], "checkpoint": params["checkpoint"],
                    "parallelism": int(params.get("parallelism", params["context"]["parallelism"]))}
    plain = QueryContext.from_dict({**context_data, "connector_options": {}})
    probed = QueryContext.from_dict({**context_data, "connector_options": params.get("connector_options") or {}})

    def context(kind: str) -> QueryContext:
        return probed if params.get("options_for") == kind else plain

    frame = load_connector(params["source"], "source").read(spark, context("source"))
    if params.get("aggregator"):
        frame = load_connector(params["aggregator"], "aggregator").transform(frame, context("aggregator"))
    writer = load_connector(params["sink"], "sink").write(frame, context("sink"))
    return _with_trigger(writer, str(params.get("trigger") or "200 milliseconds"))


def _with_trigger(writer: Any, trigger: str) -> Any:
    if trigger == "available_now":
        return writer.trigger(availableNow=True)
    if not trigger.strip():
        raise ConfigurationError("The scenario's trigger is empty.",
                                 hint="Use an interval such as '200 milliseconds', or available_now.")
    return writer.trigger(processingTime=trigger)
