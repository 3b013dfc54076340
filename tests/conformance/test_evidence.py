"""The evidence checks read from a run's history and the driver's progress events: each one valid on good
evidence, and invalid or unknown on broken evidence (a check that cannot fail is not worth having)."""

from __future__ import annotations

import pandas as pd
import pytest

from streamcert.conformance.catalogue import requirement
from streamcert.conformance.evidence import (RunEvidence, admission, assignment, clean_stop, end_offsets,
                                             evidence_check, faults_happened, fencing, kills_struck, leftovers,
                                             option_errors, progress)


def _evidence(history=(), driver_events=(), options=None, kill_points=None, probe=None, output=None,
              option_cases=None) -> RunEvidence:
    return RunEvidence(list(history), list(driver_events), options or {}, kill_points or {}, probe, output,
                       option_cases)


def _kill(fault, time=1.0, **fields):
    return {"kind": "fault-start", "time": time, "fault": fault, **fields}


def _progress(batch, rows, time=0.0, attempt=1):
    return {"event": "progress", "batchId": batch, "numInputRows": rows, "durationMs": {"triggerExecution": 100},
            "time": time, "attempt": attempt}


def test_a_window_kill_that_struck_the_window_exercises_the_requirement():
    found = kills_struck(_evidence([_kill("driver_kill", in_window=True, pending_batch=2)]), "window")
    assert found.valid is True and found.counts["struck"] == 1


def test_kills_that_all_landed_between_batches_leave_the_verdict_unknown():
    history = [_kill("driver_kill_random", aimed=False, in_window=False, phase="between_batches"),
               _kill("driver_kill", in_window=False)]
    found = kills_struck(_evidence(history), "window")
    assert found.valid == "unknown" and found.counts == {"kills": 2, "struck": 0, "elsewhere": 2, "errors": 0}
    assert "not exercised" in found.error


def test_the_committing_moment_needs_a_kill_after_the_output_grew_or_at_a_committing_point():
    window_only = _evidence([_kill("driver_kill", in_window=True)])
    assert kills_struck(window_only, "committing").valid == "unknown"
    on_output = _evidence([_kill("driver_kill_on_output", reached=True, in_window=True)])
    assert kills_struck(on_output, "committing").valid is True
    points = {"sink.after-commit": "committing", "sink.after-write": "window"}
    at_point = _evidence([_kill("driver_kill_at", params={"point": "sink.after-commit"}, reached=True,
                                pending_batch=4)], kill_points=points)
    assert kills_struck(at_point, "committing").valid is True
    unreached = _evidence([_kill("driver_kill_at", params={"point": "sink.after-commit"}, reached=False,
                                 pending_batch=4)], kill_points=points)
    assert kills_struck(unreached, "committing").valid == "unknown"
    window_point = _evidence([_kill("driver_kill_at", params={"point": "sink.after-write"}, reached=True,
                                    pending_batch=4)], kill_points=points)
    assert kills_struck(window_point, "committing").valid == "unknown"
    assert kills_struck(window_point, "window").valid is True


def test_a_requirement_whose_fault_never_happened_or_failed_is_unknown():
    assert faults_happened(_evidence([]), ("rescale",)).valid == "unknown"
    failed = [_kill("rescale"), {"kind": "fault-error", "time": 2.0, "fault": "rescale", "phase": "start",
                                 "error": "StartupFailed: x"}]
    assert faults_happened(_evidence(failed), ("rescale",)).valid == "unknown"
    assert faults_happened(_evidence([_kill("rescale")]), ("rescale",)).valid is True


def test_a_task_kill_that_found_its_moment_absent_is_no_miss_but_one_that_missed_it_is():
    kinds = ("python_worker_kill_moment",)
    landed = _kill("python_worker_kill_moment", moment="writing", reached=True)
    absent = _kill("python_worker_kill_moment", moment="output_visible", reached=False, absent=True)
    missed = _kill("python_worker_kill_moment", moment="writing", reached=False)
    assert faults_happened(_evidence([absent, landed]), kinds).valid is True
    assert faults_happened(_evidence([absent]), kinds).valid == "unknown"  # no task failed at all
    assert faults_happened(_evidence([landed, missed]), kinds).valid == "unknown"


def test_a_failover_aimed_at_a_moment_needs_its_moment_and_its_effect_in_metadata():
    kinds = ("node_moment",)
    moved = _kill("node_moment", moment="reading", reached=True, struck={"leader_moved": True, "reached": True})
    unmoved = _kill("node_moment", moment="reading", reached=True, struck={"leader_moved": False, "reached": False})
    missed = _kill("node_moment", moment="reading", reached=False, struck=None)
    assert faults_happened(_evidence([moved]), kinds).valid is True
    assert faults_happened(_evidence([unmoved]), kinds).valid == "unknown"
    assert faults_happened(_evidence([missed]), kinds).valid == "unknown"


def test_fault_reached_picks_the_aim_of_the_requirement():
    evidence = _evidence([_kill("driver_kill", in_window=True)])
    assert evidence_check("fault_reached", evidence, requirement("SNK-1")).valid is True
    assert evidence_check("fault_reached", evidence, requirement("SNK-4")).valid == "unknown"


def test_progress_is_valid_when_batches_report_rows_and_the_query_went_on_after_each_fault():
    history = [{"kind": "fault-stop", "time": 5.0, "fault": "latency"}]
    good = _evidence(history, [_progress(0, 10, 1.0), _progress(1, 10, 6.0)])
    assert progress(good).valid is True
    stalled = _evidence(history, [_progress(0, 10, 1.0)])
    assert progress(stalled).valid is False and progress(stalled).counts["stalls"] == 1
    import pandas as pd

    done_before = RunEvidence(history, [_progress(0, 10, 1.0)], {}, {}, output=pd.DataFrame({"id": [1, 2]}),
                              acknowledged={1, 2})
    assert progress(done_before).valid is True  # nothing left to read after the fault: no batch is not a stall
    assert progress(_evidence([], [])).valid is False
    malformed = _evidence([], [{"event": "progress", "batchId": 0, "time": 1.0}, _progress(1, 5)])
    assert progress(malformed).valid is False


def test_admission_fails_a_batch_over_the_limit_and_is_unknown_when_the_limit_was_never_tested():
    over = _evidence([], [_progress(0, 100), _progress(1, 101)], {"max_records_per_batch": 100})
    assert admission(over).valid is False and admission(over).violations[0]["numInputRows"] == 101
    within = _evidence([], [_progress(0, 100), _progress(1, 40)], {"max_records_per_batch": 100})
    assert admission(within).valid is True
    one_batch = _evidence([], [_progress(0, 40)], {"max_records_per_batch": 100})
    assert admission(one_batch).valid == "unknown"
    assert admission(_evidence([], [_progress(0, 40)])).valid == "unknown"


@pytest.mark.parametrize("stop, problem", [
    ({"exited": False, "seconds": 60.0}, "did not exit"),
    ({"exited": True, "seconds": 45.0, "exit_code": 0}, "slow"),
    ({"exited": True, "seconds": 1.0, "exit_code": 1}, "exit code"),
    ({"exited": True, "seconds": 1.0, "exit_code": 0, "pending_batch": 7}, "batch left uncommitted"),
    ({"exited": True, "seconds": 1.0, "exit_code": 0, "leftover_processes": 2}, "processes left"),
])
def test_a_stop_that_is_slow_unclean_or_leaves_processes_is_not_clean(stop, problem):
    found = clean_stop(_evidence([{"kind": "driver-stop", "time": 1.0, "running": True, **stop}]))
    assert found.valid is False and found.violations[0]["problem"] == problem


def test_a_clean_stop_and_a_stop_never_asked():
    clean = {"kind": "driver-stop", "time": 1.0, "running": True, "exited": True, "seconds": 2.0, "exit_code": 0,
             "pending_batch": None, "leftover_processes": 0}
    assert clean_stop(_evidence([clean])).valid is True
    assert clean_stop(_evidence([{"kind": "driver-stop", "time": 1.0, "running": False}])).valid == "unknown"


def test_leftovers_without_a_probe_decide_nothing():
    assert leftovers(_evidence()).valid == "unknown"


def _read(rows):
    """Output rows (batch, file, source_partition), one per record."""
    import pandas as pd

    return pd.DataFrame(rows, columns=["batch", "file", "source_partition"])


def test_assignment_is_valid_when_each_partition_has_one_task_loads_are_balanced_and_it_stays_the_same():
    rows = [(b, f"b{b}-t0", 0) for b in range(3)] + [(b, f"b{b}-t0", 2) for b in range(3)] \
        + [(b, f"b{b}-t1", 1) for b in range(3)]
    found = assignment(_evidence(output=_read(rows)))
    assert found.valid is True and found.counts["full_batches"] == 3


def test_a_partition_read_by_two_tasks_in_one_batch_fails_assignment():
    rows = [(0, "t0", 0), (0, "t1", 0), (0, "t1", 1)]
    found = assignment(_evidence(output=_read(rows)))
    assert found.valid is False and found.violations[0] == {"batch": 0, "partition": 0, "tasks": 2}


def test_unbalanced_tasks_fail_assignment():
    rows = [(0, "t0", p) for p in (0, 1, 2)] + [(0, "t1", 3)]
    assert assignment(_evidence(output=_read(rows))).violations[0]["partitions_per_task"] == [1, 3]


def test_another_grouping_with_the_same_parallelism_after_a_restart_fails_assignment():
    """Seed 000: restored offsets split evenly instead of by the assignment rule."""
    rows = [(0, "a0", 0), (0, "a0", 2), (0, "a1", 1), (5, "b0", 0), (5, "b0", 1), (5, "b1", 2)]
    found = assignment(_evidence(output=_read(rows)))
    assert found.valid is False and found.counts["changed_assignments"] == 1


def test_assignment_is_unknown_without_partitions_in_the_output_or_without_a_full_batch():
    assert assignment(_evidence()).valid == "unknown"
    assert assignment(_evidence(output=_read([(0, "t0", 0), (1, "t0", 1)]))).valid == "unknown"


_AFTER = {"kind": "load-after-start", "time": 2.0, "first_id": 1 << 40, "count": 10, "acknowledged": 10}
_ENDED = {"kind": "driver-ended", "time": 9.0, "ended_by_itself": True, "seconds": 3.0, "exit_code": 0,
          "terminated": True, "error": None}


def _ids(*ids):
    import pandas as pd

    return pd.DataFrame({"id": list(ids)})


def test_a_bounded_run_that_ends_by_itself_and_reads_nothing_after_its_start_meets_its_end_offsets():
    assert end_offsets(_evidence([_AFTER, _ENDED], output=_ids(1, 2, 3))).valid is True


@pytest.mark.parametrize("ended, ids, problem", [
    ({"ended_by_itself": False}, (1, 2), "did not end by itself"),
    ({"error": "StreamingQueryException: boom", "exit_code": 1}, (1,), "ended with an error"),
    ({}, (1, (1 << 40) + 3), "read records produced after the start"),
])
def test_a_bounded_run_that_reads_past_its_end_or_does_not_end_fails_end_offsets(ended, ids, problem):
    found = end_offsets(_evidence([_AFTER, {**_ENDED, **ended}], output=_ids(*ids)))
    assert found.valid is False and problem in found.violations[0]["problem"]


def test_end_offsets_are_unknown_when_the_run_produced_nothing_after_its_start():
    assert end_offsets(_evidence([_ENDED], output=_ids(1))).valid == "unknown"


def test_fencing_without_a_zombie_in_the_evidence_is_unknown_never_pass():
    assert evidence_check("fencing", _evidence(), requirement("SRC-3")).valid == "unknown"


def _case(name, value, refused, message, stage="build"):
    return {"case": {name: value}, "refused": refused, "stage": stage if refused else None, "message": message,
            "seconds": 1.0}


def test_options_refused_by_errors_that_name_them_meet_gen_2():
    cases = [_case("maxRecordsPerBatch", "0", True, "Option maxRecordsPerBatch='0' is not valid. Hint: ..."),
             _case("kafka.key.serializer", "x", True, "Kafka option 'key.serializer' is not supported", "query"),
             _case("streamcertNoSuchOption", "1", True, "Unknown option(s): streamcertnosuchoption")]
    found = option_errors(_evidence(option_cases=cases))
    assert found.valid is True and found.counts["refused_clearly"] == 3


def test_an_option_accepted_or_refused_without_its_name_fails_gen_2():
    cases = [_case("compression", "bogus", True, "Codec [bogus] is not available"),
             _case("streamcertNoSuchOption", "1", False, "the query committed a batch with the option set")]
    found = option_errors(_evidence(option_cases=cases))
    assert found.valid is False and [v["option"] for v in found.violations] == ["compression",
                                                                               "streamcertNoSuchOption"]


def test_options_never_probed_or_a_probe_that_did_not_finish_are_unknown():
    assert option_errors(_evidence()).valid == "unknown"
    assert option_errors(_evidence(option_cases=[_case("x", "1", None, "the probe did not finish")])).valid == "unknown"


def _zombie(busy=(4242,), replaced=True, alive=(4242, 4243), lost_tasks=("0.0 in stage 3.0 (TID 7)",)):
    return [_kill("task_zombie", executor_ids=["1"], busy_workers=list(busy), pending_batch=3, declared_lost=True,
                  lost_tasks=list(lost_tasks)),
            {"kind": "fault-stop", "time": 9.0, "fault": "task_zombie", "replaced": replaced,
             "lost_tasks": list(lost_tasks), "alive_at_thaw": list(alive), "zombie_ran_s": 0.2}]


def test_fencing_is_exercised_only_by_a_frozen_task_that_spark_replaced_and_that_ran_again():
    made = fencing(_evidence(_zombie()))
    assert made.valid is True and made.counts == {"freezes": 1, "zombies": 1, "missed": 0}
    for broken in (_zombie(busy=()), _zombie(replaced=False), _zombie(alive=())):
        found = fencing(_evidence(broken))
        assert found.valid == "unknown" and found.counts["zombies"] == 0 and "not exercised" in found.error
    assert fencing(_evidence([])).valid == "unknown"
    one_of_two = fencing(_evidence(_zombie(replaced=False) + _zombie()))
    assert one_of_two.valid is True and one_of_two.counts == {"freezes": 2, "zombies": 1, "missed": 1}


def test_a_failover_fault_whose_effect_was_not_seen_in_metadata_leaves_the_requirement_unknown():
    seen = _kill("node_kill", node=2, reached=True)
    unseen = _kill("node_isolate", node=3, reached=False, after=None)
    assert faults_happened(_evidence([seen]), ("node_kill", "node_isolate")).valid is True
    found = faults_happened(_evidence([seen, unseen]), ("node_kill", "node_isolate"))
    assert found.valid == "unknown" and found.counts["unseen"] == 1 and "not seen in metadata" in found.error


def test_loss_seen_passes_only_when_the_unsafe_run_lost_acknowledged_records():
    from streamcert.conformance.evidence import loss_seen

    def run(lost):
        return RunEvidence([], [], {}, {}, acked_writes={"acknowledged": 900, "lost": lost})

    assert loss_seen(run(412)).valid is True
    nothing = loss_seen(run(0))
    assert nothing.valid is False and "did not see the loss" in nothing.error
    assert loss_seen(run(None)).valid == "unknown"
    assert loss_seen(RunEvidence([], [], {}, {})).valid == "unknown"


def test_a_kill_point_that_was_not_reached_does_not_spoil_a_requirement_that_judges_the_output_whatever_the_moment():
    missed_point = _kill("driver_kill_at", params={"point": "sink.after-commit"}, reached=False)
    found = faults_happened(_evidence([_kill("driver_kill"), missed_point]), ("driver_kill", "driver_kill_at"))
    assert found.valid is True


def _waited(read_input: bool, waited_s: float = 60.0, added_at: float = 100.0):
    return _kill("add_partitions", time=added_at, added_at=added_at, attempt_read_input=read_input,
                 waited_s=waited_s, waited_for_attempt=2)


def _acked_before(count: int, at: float = 30.0) -> pd.DataFrame:
    return pd.DataFrame({"id": range(count), "status": "acked", "produced_at": at})


def test_an_attempt_that_read_nothing_while_records_waited_is_a_stall():
    events = [_progress(0, 60, time=20.0)]
    stalled = RunEvidence([_waited(False)], events, {}, {}, ledger=_acked_before(200))
    assert progress(stalled).valid is False
    assert "140 acknowledged records were unread" in str(progress(stalled).violations)
    # it read: no stall; nothing was left to read: no stall either
    assert progress(RunEvidence([_waited(True)], events, {}, {}, ledger=_acked_before(200))).valid is True
    assert progress(RunEvidence([_waited(False)], events, {}, {}, ledger=_acked_before(60))).valid is True
