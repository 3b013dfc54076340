"""Finding a connector under test by entry point name or module:attr, and every way that can go wrong."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.connectors import available_connectors, load_connector
from streamcert.spi.connector import SinkConnector


def test_the_reference_connectors_are_installed_entry_points():
    assert {"streamcert-kafka", "streamcert-kafka-2pc", "streamcert-pg-2pc", "streamcert-batch-aggregator",
            "spark-files"} <= set(available_connectors())


def test_by_entry_point_name_and_by_module_attr_give_the_same_declaration():
    by_name = load_connector("streamcert-pg-2pc", "sink")
    by_path = load_connector("streamcert.connectors.declarations:PostgresTwoPhaseSinkUnderTest", "sink")
    assert type(by_name) is type(by_path) and by_name.output_kind == "postgres"


def test_an_instance_is_taken_as_it_is():
    assert isinstance(load_connector("tests.harness.run.test_connectors:INSTANCE"), SinkConnector)


@pytest.mark.parametrize(("reference", "kind", "message"), [
    ("no-such-connector", None, "neither an installed connector nor of the form module:attr"),
    ("tests.harness.run.no_such_module:X", None, "Cannot import 'tests.harness.run.no_such_module'"),
    ("tests.harness.scenario_connectors:nothing", None, "has no 'nothing'"),
    ("tests.harness.scenario_connectors:NotAConnector", None, "not a connector declaration"),
    ("streamcert-kafka", "sink", "is a source connector; a sink is needed"),
])
def test_a_bad_reference_is_a_configuration_error_naming_it(reference, kind, message):
    with pytest.raises(ConfigurationError, match=message) as caught:
        load_connector(reference, kind)
    assert reference in str(caught.value) and caught.value.hint


class _Instance(SinkConnector):
    name = "instance"

    def write(self, frame, context):
        return frame


INSTANCE = _Instance()
