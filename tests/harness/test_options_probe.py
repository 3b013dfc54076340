"""GEN-2's option probe as a procedure of the one scenario runner: the query built and started with each bad option
its connector declares, and with an option nobody declares; each outcome says at which stage it was refused."""

from __future__ import annotations

import json

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.options_probe import UNKNOWN_OPTION, OptionsProbe, cases_of
from streamcert.harness.run.connectors import load_connector
from streamcert.harness.scenario import Scenario, run_scenario


def test_the_cases_are_the_declared_bad_options_then_an_unknown_one():
    connector = load_connector("streamcert-pg-2pc", "sink")
    assert cases_of(connector) == [{"sinkId": "no spaces allowed"}, {"table": " "}, dict([UNKNOWN_OPTION])]


def test_a_probe_names_which_of_the_scenario_s_connectors_it_probes():
    with pytest.raises(ConfigurationError, match="options_of"):
        Scenario(name="x", procedure={"kind": "options_probe", "options_of": "driver"})
    scenario = Scenario(name="x", procedure=OptionsProbe(options_of="sink"))
    assert Scenario.from_dict(scenario.as_dict()).procedure == OptionsProbe(options_of="sink")


@pytest.mark.integration
def test_each_bad_option_of_a_sink_is_refused_and_the_run_writes_the_results_every_run_writes(stack, tmp_path):
    scenario = Scenario(name="pg-options", sink="streamcert-pg-2pc", procedure=OptionsProbe(options_of="sink"))
    result = run_scenario(stack, scenario, tmp_path / "run")
    assert result.complete, result.error
    outcomes = result.metrics["option_cases"]
    assert [outcome["case"] for outcome in outcomes] == cases_of(load_connector("streamcert-pg-2pc", "sink"))
    assert all(outcome["refused"] is True and outcome["stage"] in ("build", "start", "query") for outcome in outcomes)
    assert "streamcertnosuchoption" in outcomes[-1]["message"].lower()
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["scenario"]["procedure"] == {"kind": "options_probe", "options_of": "sink", "case_timeout_s": 40.0}
    assert written["connectors"]["sink"]["name"] == "streamcert-pg-2pc"
