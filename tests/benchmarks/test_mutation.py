"""The mutation score: a pair is caught only on a real finding of a completed run (a stall's missing records are a
timeout, counted missed), the figures count pairs and seeds, and an interrupted score goes on where it stopped."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from streamcert.benchmarks.mutation import _earlier_pairs, _seeds, judge_pair, score
from streamcert.conformance.mutants import Mutant
from streamcert.harness.errors import ConfigurationError

MUTANT = Mutant("streamcert.conformance.mutants.sink_commit_before_decision:CONNECTOR", "a bug", frozenset({"SNK-1"}))


def _certification(verdict: str, checks: list[dict]) -> dict:
    return {"complete": True, "duration_s": 1.0, "verdicts": [
        {"requirement": "SNK-1", "verdict": verdict, "evidence": {"runs": [
            {"scenario": "driver-kills", "folder": "runs/x/driver-kills", "checks": checks}]}}]}


def _run_folder(tmp_path, history: list[dict], output: pd.DataFrame | None = None) -> None:
    folder = tmp_path / "runs" / "x" / "driver-kills"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"history": history}))
    if output is not None:
        output.to_parquet(folder / "output.parquet")


def _strike(time_s: float, moments: list[str], fault: str = "driver_kill_moment") -> dict:
    return {"kind": "fault-start", "fault": fault, "time": time_s,
            "strikes": [{"moments": moments, "batch_class": "steady", "batch": 3, "attempt": 2, "landed": True}]}


def test_a_duplicate_found_is_a_catch_by_the_kill_before_the_second_delivery(tmp_path):
    output = pd.DataFrame({"id": [1, 2, 1], "visible_at": [10.0, 11.0, 25.0]})
    _run_folder(tmp_path, [_strike(5.0, ["writing"]), _strike(20.0, ["commit_in_flight", "output_visible"]),
                           _strike(30.0, ["planning"])], output)
    checks = [{"name": "duplicate", "valid": False, "counts": {"duplicated_ids": 1}, "violations": [{"id": 1}]},
              {"name": "fault_reached", "valid": True}]
    pair = judge_pair(MUTANT, 1, _certification("fail", checks), tmp_path)
    assert pair["caught"] is True
    assert pair["requirements"]["SNK-1"]["killed_by"] == [
        {"fault": "driver_kill_moment", "moments": ["commit_in_flight", "output_visible"], "batch_class": "steady",
         "batch": 3, "attempt": 2}]
    assert pair["requirements"]["SNK-1"]["attribution"] == "preceding"


def test_a_duplicate_after_a_python_worker_kill_is_attributed_to_that_kill(tmp_path):
    output = pd.DataFrame({"id": [1, 1], "visible_at": [10.0, 25.0]})
    _run_folder(tmp_path, [_strike(20.0, ["output_visible", "writing"], fault="python_worker_kill_moment"),
                           {"kind": "fault-start", "fault": "task_zombie", "time": 30.0}], output)
    checks = [{"name": "duplicate", "valid": False, "counts": {"duplicated_ids": 1}, "violations": [{"id": 1}]}]
    [kill] = judge_pair(MUTANT, 1, _certification("fail", checks), tmp_path)["requirements"]["SNK-1"]["killed_by"]
    assert kill["fault"] == "python_worker_kill_moment" and kill["moments"] == ["output_visible", "writing"]


def test_lost_records_name_every_landed_kill_as_a_candidate(tmp_path):
    _run_folder(tmp_path, [_strike(5.0, ["writing"]), _strike(20.0, ["planning"]),
                           {"kind": "quiesced", "reason": "settled"}])
    checks = [{"name": "lost", "valid": False, "counts": {"lost": 40}, "violations": [{"id": 9}]}]
    entry = judge_pair(MUTANT, 1, _certification("fail", checks), tmp_path)["requirements"]["SNK-1"]
    assert entry["caught"] is True and entry["attribution"] == "candidates" and len(entry["killed_by"]) == 2


def test_records_missing_only_because_the_query_stalled_are_a_timeout_and_missed(tmp_path):
    _run_folder(tmp_path, [_strike(5.0, ["writing"]), {"kind": "quiesced", "reason": "quiet_timeout"},
                           {"kind": "driver-stop", "pending_batch": 7}])
    checks = [{"name": "lost", "valid": False, "counts": {"lost": 40}, "violations": []}]
    pair = judge_pair(MUTANT, 2, _certification("fail", checks), tmp_path)
    assert pair["caught"] is False and pair["requirements"]["SNK-1"]["timeout_only"] is True


def test_a_pass_or_an_unknown_is_missed_and_a_fault_that_missed_is_no_finding(tmp_path):
    _run_folder(tmp_path, [])
    assert judge_pair(MUTANT, 1, _certification("pass", []), tmp_path)["caught"] is False
    unknown = [{"name": "fault_reached", "valid": False, "counts": {}}]
    assert judge_pair(MUTANT, 1, _certification("fail", unknown), tmp_path)["caught"] is False


def test_the_score_counts_pairs_and_names_each_mutants_missed_seeds():
    pairs = [{"mutant": "a", "seed": 1, "caught": True}, {"mutant": "a", "seed": 2, "caught": False},
             {"mutant": "b", "seed": 1, "caught": True}, {"mutant": "b", "seed": 2, "caught": True}]
    figures = score(pairs)
    assert figures["detection_rate"] == 0.75 and figures["caught"] == 3
    assert figures["mutants"]["a"] == {"seeds": 2, "caught": 1, "missed_seeds": [2]}
    assert figures["in_plan"] == {"pairs": 4, "caught": 3, "detection_rate": 0.75, "left_out": []}


def test_a_mutant_whose_broken_requirement_no_run_of_the_plan_judges_is_left_out_of_the_rate_within_reach(tmp_path):
    """The quick plan leaves a rescale's and event-time alignment's requirements to the full plan: their mutants
    count as missed in the plain rate (what a quick gate catches) and are named apart from the rate within reach."""
    judged = {**_certification("fail", [{"name": "duplicate", "valid": False}]),
              "runs": [{"scenario": "driver-kills", "judges": ["SNK-1"]}]}
    _run_folder(tmp_path, [])
    assert judge_pair(MUTANT, 1, judged, tmp_path)["unplanned"] == []
    unjudged = {"complete": True, "runs": [], "verdicts": [{"requirement": "SNK-1", "verdict": "unknown"}]}
    left_out = judge_pair(MUTANT, 2, unjudged, tmp_path)
    assert left_out["unplanned"] == ["SNK-1"] and not left_out["caught"]
    figures = score([{**judge_pair(MUTANT, 1, judged, tmp_path)}, left_out])
    assert figures["detection_rate"] == 0.5
    assert figures["in_plan"] == {"pairs": 1, "caught": 1, "detection_rate": 1.0,
                                  "left_out": ["sink_commit_before_decision"]}


def test_seeds_are_a_range_or_a_list_and_anything_else_is_refused():
    import argparse

    assert _seeds("1-5") == [1, 2, 3, 4, 5] and _seeds("2,4") == [2, 4]
    for bad in ("x", "3-", ","):
        with pytest.raises(argparse.ArgumentTypeError):
            _seeds(bad)


def test_an_interrupted_score_keeps_its_pairs_even_where_their_evidence_is_gone_and_another_file_is_not_overwritten(
        tmp_path):
    """A score is measured over several sittings, each in a fresh checkout: the committed judgements are kept even
    though the run folders (not in git) are not there."""
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir()
    out = tmp_path / "mutants.json"
    out.write_text(json.dumps({"kind": "mutation-score", "pairs": [
        {"mutant": "a", "seed": 1, "folder": str(kept)}, {"mutant": "a", "seed": 2, "folder": str(gone)},
        {"not": "a pair"}]}))
    assert [pair["seed"] for pair in _earlier_pairs(out)] == [1, 2]
    assert _earlier_pairs(tmp_path / "absent.json") == []
    (tmp_path / "bench.json").write_text(json.dumps({"kind": "bench"}))
    with pytest.raises(ConfigurationError, match="not a mutation score"):
        _earlier_pairs(tmp_path / "bench.json")


def test_a_score_of_one_plan_does_not_go_on_from_a_score_of_the_other(tmp_path):
    """The quick plan's pairs are not the full plan's: a score measured on one refuses to resume from the other's file
    (a file without a plan is the full plan's: every score before the quick plan's was)."""
    out = tmp_path / "mutants.json"
    out.write_text(json.dumps({"kind": "mutation-score", "pairs": [{"mutant": "a", "seed": 1}]}))
    assert len(_earlier_pairs(out, "full")) == 1
    with pytest.raises(ConfigurationError, match="full plan") as refused:
        _earlier_pairs(out, "quick")
    assert "mutants-quick.json" in refused.value.hint


def test_going_on_from_another_plan_s_score_is_refused_before_the_stack_starts(tmp_path, monkeypatch, capsys):
    import streamcert.harness.interrupts as interrupts
    import streamcert.harness.stack.environment as environment_module
    from streamcert.benchmarks.mutation import main

    def no_stack(*args, **kwargs):
        raise AssertionError("the stack was started")

    monkeypatch.setattr(environment_module, "Environment", no_stack)
    monkeypatch.setattr(interrupts, "terminate_as_interrupt", lambda: None)  # the test process keeps its SIGTERM
    out = tmp_path / "mutants.json"
    out.write_text(json.dumps({"kind": "mutation-score", "plan": "full", "pairs": []}))
    assert main(["--plan", "quick", "--out", str(out), "--seeds", "1"]) == 2
    assert "full plan" in capsys.readouterr().err


def test_the_quick_plan_s_score_certifies_each_pair_on_the_quick_plan_and_says_so(tmp_path, monkeypatch):
    """``--plan quick`` prepares each pair's certification with ``quick`` (what ``certify --quick`` runs) and the
    report names its plan; the default stays the full plan."""
    import streamcert.conformance.certify as certify_module
    from streamcert.benchmarks.mutation import run_mutation_score

    asked = []

    class _Result:
        def model_dump(self, mode):
            return _certification("fail", [{"name": "duplicate", "valid": False}])

    monkeypatch.setattr(certify_module, "prepare", lambda *args, **kwargs: asked.append(kwargs["quick"]))
    monkeypatch.setattr(certify_module, "certify", lambda *args, **kwargs: _Result())
    quick = run_mutation_score([MUTANT], [1], tmp_path / "quick.json", plan="quick")
    full = run_mutation_score([MUTANT], [1], tmp_path / "full.json")
    assert asked == [True, False]
    assert (quick["plan"], full["plan"]) == ("quick", "full")
    assert json.loads((tmp_path / "quick.json").read_text())["plan"] == "quick"


def test_the_pair_names_the_runs_whose_schedule_ended_at_their_first_finding(tmp_path):
    from streamcert.benchmarks.mutation import _cut_runs

    _run_folder(tmp_path, [{"kind": "first-finding", "check": "duplicate", "time": 5.0}])
    runs = [{"folder": "runs/x/driver-kills"}, {"folder": "runs/x/absent"}]
    assert _cut_runs({"runs": runs}, tmp_path) == ["runs/x/driver-kills"]


@pytest.mark.slow
@pytest.mark.integration
def test_a_mutant_s_kill_run_stops_its_schedule_at_the_first_duplicate_and_still_fails_on_it(stack, tmp_path):
    from streamcert.conformance.plans import plan
    from streamcert.harness.run.connectors import load_connector
    from streamcert.harness.scenario import run_scenario

    reference = "streamcert.conformance.mutants.source_offsets_in_memory:CONNECTOR"
    planned = next(run for run in plan(reference, load_connector(reference), 1, cooperative=False)
                   if run.name == "driver-kills")
    result = run_scenario(stack, planned.scenario.model_copy(update={"stop_at_first_finding": True}), tmp_path / "r")
    kinds = [event["kind"] for event in result.history]
    assert kinds.count("first-finding") == 1 and kinds.count("fault-cancelled") >= 1
    assert kinds.count("fault-start") + kinds.count("fault-cancelled") == len(planned.scenario.schedule)
    assert {check["name"]: check["valid"] for check in result.checks}["duplicate"] is False


@pytest.mark.integration
def test_a_terminated_mutation_score_stops_its_stack_and_says_where_its_pairs_are(tmp_path):
    """`tox -e mutants` cancelled (CI, `kill`) in the middle of a kill run: SIGTERM ends it as Ctrl-C does, exit
    130, and nothing it started is left: not its stack, and not a driver attempt or standby (session 27: a driver
    kill's heal, in the fault timeline's thread, restarted the driver after the teardown had stopped it; a race
    this test meets only by chance, which tests/harness/test_scenario.py makes certain)."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    import psutil

    out = tmp_path / "mutants.json"
    process = subprocess.Popen([sys.executable, "-m", "streamcert.benchmarks.mutation", "--mutants",
                                "source_offsets_in_memory", "--seeds", "1", "--out", str(out)],
                               stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(process.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 240
        # the first kill restarted the driver and its second attempt's query runs: the next kill is watching it
        while not _second_attempt_started(tmp_path):
            assert time.monotonic() < deadline and process.poll() is None, "".join(said)
            time.sleep(0.2)
        time.sleep(1.0)
        started = psutil.Process(process.pid).children(recursive=True)
        assert started, "".join(said)
        process.send_signal(signal.SIGTERM)
        assert process.wait(180) == 130, "".join(said)
        reader.join(10)
        rest = "".join(said)
        assert "interrupted" in rest and str(out) in rest, rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    left = [child for child in started if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
    assert not left, [child.cmdline()[:3] for child in left]
    time.sleep(2)  # a heal after the teardown would start its attempt within a moment
    runs = [p for p in psutil.process_iter(["cmdline", "status"]) if p.info["status"] != psutil.STATUS_ZOMBIE
            and any(str(tmp_path) in part for part in p.info["cmdline"] or ())]
    assert not runs, [p.info["cmdline"][:4] for p in runs]


def _second_attempt_started(folder) -> bool:
    import json

    for events in folder.glob("mutants/*/seed-1/runs/*/driver-kills/driver/driver-events.jsonl"):
        lines = [line for line in events.read_text().splitlines() if line.strip()]
        try:
            if any(e.get("event") == "started" and e.get("attempt", 0) >= 2 for e in map(json.loads, lines)):
                return True
        except json.JSONDecodeError:  # a line being written
            return False
    return False
