"""The composed query's parameters and trigger (the query itself runs in the scenario and connector tests)."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.pipeline import _with_trigger, query_params
from streamcert.spi.connector import QueryContext


class _Writer:
    def trigger(self, **how):
        self.how = how
        return self


def test_params_are_plain_data_with_the_parallelism_a_rescale_changes():
    context = QueryContext("b:1", "in", "out", "/ck", "r1", parallelism=3, options={"sink_id": "x"})
    params = query_params("src", "snk", None, context, "1 second")
    assert params["parallelism"] == 3 and params["context"]["options"] == {"sink_id": "x"}
    assert QueryContext.from_dict(params["context"]) == context


@pytest.mark.parametrize(("trigger", "expected"), [
    ("200 milliseconds", {"processingTime": "200 milliseconds"}),
    ("available_now", {"availableNow": True}),
])
def test_the_trigger_reaches_the_writer(trigger, expected):
    assert _with_trigger(_Writer(), trigger).how == expected


def test_an_empty_trigger_is_refused():
    with pytest.raises(ConfigurationError, match="trigger"):
        _with_trigger(_Writer(), " ")
