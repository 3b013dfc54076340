"""The external-system SPI is general: a system streamcert does not ship (a commit-log server started by the test's
own :class:`~streamcert.spi.external.ExternalSystem`, reached through a Toxiproxy link, read back by commit) certifies
end to end, and the same checks that judge the shipped outputs find a replay written twice in it."""

from __future__ import annotations

import json

import pytest

from streamcert.conformance.certify import certify, prepare
from streamcert.spi.external import ExternalSystem, OutputReader
from tests.external_system.ledger import SYSTEM, LedgerReader, LedgerSystem


def test_the_ledger_declares_a_system_that_satisfies_the_spi():
    assert isinstance(SYSTEM, ExternalSystem) and issubclass(LedgerReader, OutputReader)
    assert LedgerSystem().faults() == ("kill", "restart", "pause", "resume")
    assert LedgerSystem().endpoints().keys() == {"ledger"}


def _run(connector: str, stack, tmp_path, requirement: str = "SNK-1", quick: bool = True,
         fail_fast: bool = False, seed: int = 1) -> tuple:
    result = certify(prepare([f"tests.external_system.ledger:{connector}"], [requirement], seed=seed, quick=quick,
                             fail_fast=fail_fast), tmp_path, environment=stack)
    [verdict] = result.verdicts
    checks = {check["name"]: check for run in verdict.evidence["runs"] for check in run["checks"]}
    return verdict, checks


@pytest.mark.integration
def test_an_idempotent_sink_to_a_system_of_its_own_passes_snk_1_across_kills(stack, tmp_path):
    verdict, checks = _run("SINK", stack, tmp_path)
    assert verdict.verdict == "pass", verdict.reason
    assert checks["lost"]["valid"] is True and checks["duplicate"]["valid"] is True
    assert checks["fault_reached"]["valid"] is True  # the kills struck; the reader read through the restarts
    # a foreachBatch sink shows its output before Spark commits the batch: a kill lands in that window too
    kills = [f for run in verdict.evidence["runs"] for f in run["faults"]
             if f.get("fault") == "driver_kill_moment" and f["kind"] == "fault-start"]
    assert any(f["params"]["moment"] == "output_visible" and f.get("reached") for f in kills), kills


@pytest.mark.integration
def test_a_sink_that_writes_a_replay_again_fails_snk_1_with_duplicates_read_back_by_its_system(stack, tmp_path):
    # seed 6's first kill strikes at output_visible (seed 1's sixth did): the run ends at its first finding in ~50 s
    verdict, checks = _run("AT_LEAST_ONCE_SINK", stack, tmp_path, seed=6, fail_fast=True)
    assert verdict.verdict == "fail", verdict.reason
    assert checks["duplicate"]["valid"] is False and checks["duplicate"]["counts"]["duplicated_ids"] > 0


def test_the_system_faults_kill_and_restart_the_ledger_server_by_its_name(tmp_path):
    from types import SimpleNamespace

    from streamcert.harness.faults.base import FaultContext, FaultNotApplicable
    from streamcert.harness.faults.registry import build_fault
    from streamcert.harness.faults.schedule import FaultSpec
    from streamcert.harness.run.history import History
    from streamcert.harness.stack.external import ExternalSystems
    from tests.external_system.ledger import request

    class Unpausable(LedgerSystem):
        pause, resume = ExternalSystem.pause, ExternalSystem.resume

    with ExternalSystems(tmp_path) as systems:
        address = systems.started(Unpausable()).direct["ledger"]
        context = FaultContext(environment=SimpleNamespace(systems=systems), history=History(),
                               workdir=tmp_path / "faults")
        kill = build_fault(FaultSpec("system_kill", "test-ledger", 0, 0), context)
        kill.start()
        with pytest.raises(OSError):
            request(address, {"op": "count", "table": "t"}, timeout=1)
        kill.stop()
        assert request(address, {"op": "count", "table": "t"}) == {"records": 0, "commits": 0, "staged": 0}
        pause = build_fault(FaultSpec("system_pause", "test-ledger", 0, 0), context)
        with pytest.raises(FaultNotApplicable, match="does not take 'pause'"):  # the run records it as a skip
            pause.start()
        assert request(address, {"op": "count", "table": "t"})["records"] == 0  # and nothing was done


def test_the_system_pause_freezes_the_ledger_server_and_its_end_lets_it_answer(tmp_path):
    from types import SimpleNamespace

    from streamcert.harness.faults.base import FaultContext
    from streamcert.harness.faults.registry import build_fault
    from streamcert.harness.faults.schedule import FaultSpec
    from streamcert.harness.run.history import History
    from streamcert.harness.stack.external import ExternalSystems
    from tests.external_system.ledger import request

    with ExternalSystems(tmp_path) as systems:
        address = systems.started(LedgerSystem()).direct["ledger"]
        pause = build_fault(FaultSpec("system_pause", "test-ledger", 0, 0), FaultContext(
            environment=SimpleNamespace(systems=systems), history=History(), workdir=tmp_path / "faults"))
        pause.start()
        with pytest.raises(OSError):  # a frozen server accepts the connection and answers nothing
            request(address, {"op": "count", "table": "t"}, timeout=1)
        pause.stop()
        assert request(address, {"op": "count", "table": "t"})["records"] == 0


def _struck(folder) -> set[str]:
    """The faults that started in the certification's runs (their results.json), and what those aimed at a moment
    struck."""
    events = [event for path in folder.glob("runs/*/*/results.json")
              for event in json.loads(path.read_text())["history"] if event.get("kind") == "fault-start"]
    # a fault aimed at a moment names what it struck (a cut of the link)
    return {event["fault"] for event in events} | {event["struck_fault"] for event in events
                                                   if event.get("struck_fault")}


@pytest.mark.integration
def test_a_source_reading_a_system_of_its_own_passes_src_8_through_its_link_s_toxics_and_the_system_s_kill(
        stack, tmp_path):
    verdict, checks = _run("SOURCE", stack, tmp_path, "SRC-8", quick=False)
    assert verdict.verdict == "pass", verdict.reason
    assert checks["lost"]["valid"] is True and checks["duplicate"]["valid"] is True
    assert {"system_kill", "system_pause", "down"} <= _struck(tmp_path)


@pytest.mark.integration
def test_a_source_that_skips_ahead_when_its_system_is_away_fails_src_8_with_lost_records(stack, tmp_path):
    verdict, checks = _run("SKIPPING_SOURCE", stack, tmp_path, "SRC-8", quick=False)
    assert verdict.verdict == "fail", verdict.reason
    assert checks["lost"]["valid"] is False and checks["lost"]["counts"]["lost"] > 0
