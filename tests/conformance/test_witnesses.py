"""Witnesses: each finder sees its event on evidence where the procedure happened, and says what was missing
(unknown, never valid) on evidence where it did not: a procedure that never happened cannot pass a requirement."""

from __future__ import annotations

import pandas as pd
import pytest

from streamcert.conformance.catalogue import CATALOGUE, WITNESSES, requirement
from streamcert.conformance.evidence import RunEvidence
from streamcert.conformance.witnesses import (WITNESS_FINDERS, added_partition_read, cut_in_flight,
                                              idle_reader_tasks_read, missing_witnesses, replay_after_commit_returned,
                                              rescaled_restart, witness)

_ADDED_AT = 100.0


def _ledger(rows):
    return pd.DataFrame(rows, columns=["id", "partition", "produced_at", "status"])


def _evidence(history=(), driver_events=(), scenario=None, ledger=None, output=None) -> RunEvidence:
    return RunEvidence(list(history), list(driver_events), {}, {}, output=output,
                       scenario=scenario or {"parallelism": 2, "workload": {"partitions": 3}}, ledger=ledger)


_GROW = {"kind": "fault-start", "time": _ADDED_AT + 1.5, "added_at": _ADDED_AT, "fault": "add_partitions",
         "written_before_found": {"3": 40}}
_GROW_UNHELD = {"kind": "fault-start", "time": _ADDED_AT, "fault": "add_partitions"}
_WRITTEN = _ledger([(1, 0, 90.0, "acked"), (2, 3, 101.0, "acked"), (3, 3, 102.0, "acked"), (4, 3, 103.0, "aborted")])


def test_records_written_into_an_added_partition_and_read_back_witness_it():
    found = added_partition_read(_evidence([_GROW], ledger=_WRITTEN, output=pd.DataFrame({"id": [1, 2, 3]})))
    assert found.valid is True and found.counts == {"partitions_added": 1, "written": 2, "before_found": 40,
                                                    "read": 2}
    assert found.data["partitions"] == [3]


@pytest.mark.parametrize("history, ledger, output, why", [
    ([], _WRITTEN, [1, 2, 3], "no partition was added"),
    ([_GROW], _ledger([(1, 0, 101.0, "acked"), (2, 1, 102.0, "acked")]), [1, 2], "never written into"),
    ([_GROW], _ledger([(2, 3, 99.0, "acked")]), [2], "never written into"),  # written before it was added
    ([_GROW], _ledger([(2, 3, 101.0, "indeterminate")]), [2], "never written into"),
    ([_GROW], _WRITTEN, [1], "was read back"),
    ([_GROW_UNHELD], _WRITTEN, [1, 2, 3], "when the query could first find them"),
    ([_GROW], None, [1, 2], "kept no ledger"),
])
def test_without_records_of_an_added_partition_read_back_the_witness_is_missing(history, ledger, output, why):
    found = added_partition_read(_evidence(history, ledger=ledger, output=pd.DataFrame({"id": output})))
    assert found.valid == "unknown" and why in found.error


def _rescaled(parallelism, attempt):
    return {"kind": "fault-stop", "time": 5.0, "fault": "rescale", "attempt": attempt, "parallelism": parallelism}


def _progress(attempt, rows):
    return {"event": "progress", "attempt": attempt, "batchId": 1, "numInputRows": rows}


def test_restarts_with_other_parallelism_whose_attempts_read_input_witness_a_rescale():
    found = rescaled_restart(_evidence([_rescaled(5, 2), _rescaled(1, 3)],
                                       [_progress(1, 60), _progress(2, 30), _progress(3, 40)]))
    assert found.valid is True and found.counts == {"rescales": 2, "witnessed": 2}
    assert [(r["from"], r["to"], r["rows_read"]) for r in found.data["rescales"]] == [(2, 5, 30), (5, 1, 40)]


def test_a_raise_ended_by_the_next_rescale_before_it_read_leaves_the_rescale_unwitnessed():
    found = rescaled_restart(_evidence([_rescaled(5, 2), _rescaled(1, 3)],
                                       [_progress(1, 60), _progress(2, 0), _progress(3, 40)]))
    assert found.valid == "unknown" and found.counts == {"rescales": 2, "witnessed": 1}
    assert "parallelism 5 read no input before the next restart" in found.error


@pytest.mark.parametrize("history, events, why", [
    ([], [_progress(1, 60)], "never restarted with another parallelism"),
    ([_rescaled(2, 2)], [_progress(2, 60)], "never restarted with another parallelism"),
    ([_rescaled(5, 2)], [_progress(1, 60), _progress(2, 0)], "read input"),
])
def test_a_restart_with_the_same_parallelism_or_that_read_nothing_is_no_rescale(history, events, why):
    found = rescaled_restart(_evidence(history, events))
    assert found.valid == "unknown" and why in found.error


def test_every_witness_of_the_catalogue_has_a_finder_and_every_finder_a_description():
    assert set(WITNESS_FINDERS) == set(WITNESSES)
    named = {name for req in CATALOGUE for name in req.witnesses}
    assert named == set(WITNESSES), "a witness no requirement names is never asked for"
    assert witness("rescaled_restart", _evidence()).valid == "unknown"


def test_a_missing_witness_is_named_with_each_runs_reason():
    seen = rescaled_restart(_evidence([_rescaled(5, 2)], [_progress(2, 9)]))
    absent = rescaled_restart(_evidence())
    req = requirement("SRC-4")
    assert missing_witnesses(req, {"rescaled_restart": [("a", absent), ("b", seen)]}) == []
    [line] = missing_witnesses(req, {"rescaled_restart": [("rescale", absent)]})
    assert line.startswith("witness rescaled_restart missing (") and "rescale: the query was never" in line
    assert "no run of it completed" in missing_witnesses(req, {})[0]


def _held(batch, time=10.0, log="commits", reached=True):
    return {"kind": "fault-start", "time": time, "fault": "driver_kill_log_held", "log": log, "reached": reached,
            **({"held_batch": batch} if reached else {})}


def _batch(batch, time, attempt=2):
    return {"event": "progress", "attempt": attempt, "batchId": batch, "numInputRows": 5, "time": time}


def test_a_batch_killed_with_its_commit_log_held_and_run_again_witnesses_a_replay_after_the_commit():
    found = replay_after_commit_returned(_evidence([_held(4)], [_batch(4, 5.0, attempt=1), _batch(4, 12.0)]))
    assert found.valid is True and found.counts == {"held_kills": 1, "held": 1, "replayed": 1}
    assert found.data["replays"] == [{"batch": 4, "batch_class": None, "replayed_by_attempt": 2}]


@pytest.mark.parametrize("history, events, why", [
    ([], [_batch(4, 12.0)], "no driver kill held"),
    ([_held(4, log="offsets")], [_batch(4, 12.0)], "no driver kill held"),
    ([_held(None, reached=False)], [_batch(4, 12.0)], "no held write"),
    ([{**_held(4), "reached": False}], [_batch(5, 12.0)], "ran the held batch again"),  # held in another class
    ([_held(4)], [_batch(4, 5.0, attempt=1), _batch(5, 12.0)], "ran the held batch again"),
])
def test_without_a_held_commit_log_and_its_replay_the_witness_is_missing(history, events, why):
    found = replay_after_commit_returned(_evidence(history, events))
    assert found.valid == "unknown" and why in found.error


def _aimed(moment="commit_in_flight", landed=True, wanted=True, **strike):
    return {"kind": "fault-start", "time": 1.0, "fault": "network_moment", "struck_fault": "reset_peer",
            "moment": moment, "strikes": [{"batch": 7, "landed": landed, "wanted": wanted, **strike}]}


_AWAITING = [{"process": "java", "awaiting_answer": True}]
_COMMIT_PREPARED = [{"state": "active", "kind": "COMMIT PREPARED"}, {"state": "idle in transaction", "kind": "COPY"}]


def test_cuts_struck_in_their_moment_with_something_in_flight_witness_the_network_requirements():
    found = cut_in_flight(_evidence([_aimed(in_flight=_AWAITING), _aimed("writing", statements=_COMMIT_PREPARED)]))
    assert found.valid is True and found.counts == {"aimed": 2, "struck_in_flight": 2}
    assert [cell["in_flight"] for cell in found.data["cells"]] == [["request of java"], ["statement COMMIT PREPARED"]]
    # a statement done on the server in an open transaction, with a client awaiting an answer: its answer in flight
    both = cut_in_flight(_evidence([_aimed(in_flight=_AWAITING, statements=_COMMIT_PREPARED)]))
    assert both.data["cells"][0]["in_flight"] == ["answer to COPY (done, transaction open)", "request of java",
                                                  "statement COMMIT PREPARED"]


@pytest.mark.parametrize("history, why", [
    ([], "no network cut, server kill or failover was aimed"),
    ([_aimed(landed=False, in_flight=_AWAITING)], "reset_peer at commit_in_flight: the moment was not reached"),
    ([_aimed(wanted=False, in_flight=_AWAITING)], "the moment was not reached"),
    ([_aimed(in_flight=[], statements=[{"state": "idle in transaction", "kind": "COPY"}])],
     "nothing was in flight on the link"),
    ([_aimed(in_flight=None, in_flight_unknown="ss (iproute2) is not installed")], "ss (iproute2) is not installed"),
])
def test_a_cut_that_missed_its_moment_or_found_nothing_in_flight_is_unknown_naming_it(history, why):
    found = cut_in_flight(_evidence(history))
    assert found.valid == "unknown" and why in found.error


def _rescale_stop(attempt, parallelism, at):
    return {"kind": "fault-stop", "time": at, "fault": "rescale", "attempt": attempt, "parallelism": parallelism}


def _read_by(attempt, rows, at):
    return {"event": "progress", "attempt": attempt, "numInputRows": rows, "time": at, "batchId": int(at)}


_GROWN = {"kind": "fault-start", "time": 20.0, "added_at": 20.0, "fault": "add_partitions", "params": {"count": 6}}


def test_an_attempt_with_more_reader_tasks_than_partitions_that_read_input_witnesses_src10():
    found = idle_reader_tasks_read(_evidence([_rescale_stop(2, 5, 10.0), _GROWN, _rescale_stop(3, 1, 30.0)],
                                             [_read_by(1, 60, 5.0), _read_by(2, 60, 15.0), _read_by(3, 60, 35.0)]))
    assert found.valid is True and found.counts == {"attempts_with_idle_tasks": 1, "witnessed": 1}
    assert found.data["attempts"][1] == {"attempt": 2, "reader_tasks": 5, "partitions": 3, "rows_read": 60}


@pytest.mark.parametrize("history, events, why", [
    # the attempt with 5 tasks read nothing: only the one with 1 task did
    ([_rescale_stop(2, 5, 10.0), _rescale_stop(3, 1, 30.0)], [_read_by(2, 0, 15.0), _read_by(3, 60, 35.0)],
     "no attempt with more reader tasks than partitions read input"),
    # it read only once the topic had grown past its task count
    ([_rescale_stop(2, 5, 10.0), _GROWN], [_read_by(2, 60, 25.0)], "no attempt that reported progress ran with more"),
    ([], [_read_by(1, 60, 5.0)], "no attempt that reported progress ran with more"),
])
def test_without_an_attempt_that_read_with_idle_tasks_src10_is_unwitnessed(history, events, why):
    found = idle_reader_tasks_read(_evidence(history, events))
    assert found.valid == "unknown" and why in found.error


def test_a_cut_where_the_connector_did_not_use_the_link_is_recorded_but_one_in_flight_is_enough():
    found = cut_in_flight(_evidence([_aimed(in_flight=_AWAITING), _aimed("writing", in_flight=[])]))
    assert found.valid is True and found.counts == {"aimed": 2, "struck_in_flight": 1}
    assert [cell["in_flight"] for cell in found.data["cells"]] == [["request of java"], []]
