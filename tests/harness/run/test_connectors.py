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


def test_a_connector_module_that_raises_on_import_is_the_authors_error_with_its_own_frames(tmp_path, monkeypatch):
    from streamcert.harness.errors import ConfigurationError
    from streamcert.harness.run.connectors import load_connector

    (tmp_path / "raising_connector.py").write_text("def configure():\n    raise RuntimeError('no config file')\n"
                                                   "configure()\n")
    (tmp_path / "needs_missing_dependency.py").write_text("import not_a_real_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigurationError) as caught:
        load_connector("raising_connector:CONNECTOR")
    message = caught.value.message
    assert "RuntimeError: no config file" in message and "raising_connector.py:2 in configure" in message
    assert "references.py" not in message and "not in streamcert" in caught.value.hint
    with pytest.raises(ConfigurationError, match="not_a_real_dependency_xyz") as caught:
        load_connector("needs_missing_dependency:CONNECTOR")
    assert "needs_missing_dependency.py:1" in caught.value.message
    with pytest.raises(ConfigurationError, match="Cannot import 'no_such_module_at_all'"):
        load_connector("no_such_module_at_all:CONNECTOR")
