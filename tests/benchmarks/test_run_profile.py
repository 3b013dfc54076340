"""Where a run's seconds go, read from a run's folder: each attempt's start, query start and first batch."""

from __future__ import annotations

import json

from streamcert.benchmarks.run_profile import main, profile_run


def _run_folder(tmp_path, cpu=None):
    history = [{"kind": "driver-start", "time": 100.0, "attempt": 1},
               {"kind": "fault-start", "time": 120.0, "fault": "driver_kill_moment"},
               {"kind": "fault-stop", "time": 121.0, "attempt": 2}]
    events = [{"event": "session", "attempt": 1, "time": 104.0}, {"event": "started", "attempt": 1, "time": 106.5},
              {"event": "progress", "attempt": 1, "time": 111.5, "durationMs": {"addBatch": 4000,
                                                                               "triggerExecution": 4800}},
              {"event": "progress", "attempt": 1, "time": 112.0, "durationMs": {"triggerExecution": 400}},
              {"event": "session", "attempt": 2, "time": 126.0, "standby_ready_s": 3.5,
               "warm_up": {"steps": {"data_source": 2.0, "python_sink": 1.5}, "cut_short": True, "error": None}},
              {"event": "built", "attempt": 2, "time": 127.25}, {"event": "started", "attempt": 2, "time": 128.0},
              {"event": "progress", "attempt": 2, "time": 131.0, "durationMs": {"addBatch": 2500,
                                                                               "triggerExecution": 2900}},
              {"event": "progress", "attempt": 2, "time": 131.5, "durationMs": {"triggerExecution": 600}}]
    (tmp_path / "driver").mkdir()
    (tmp_path / "results.json").write_text(json.dumps({"scenario": {"name": "x-kills"}, "duration_s": 40.0,
                                                       "history": history, "cpu": cpu}))
    (tmp_path / "driver" / "driver-events.jsonl").write_text(
        "\n".join(json.dumps(event) for event in events) + "\n{\"event\": \"progr")  # a line cut by a kill
    return tmp_path


def test_each_attempt_s_start_query_and_first_batch_are_timed_from_the_run_s_files(tmp_path):
    profile = profile_run(_run_folder(tmp_path))
    assert [(a["attempt"], a["session_s"], a["query_s"], a["first_batch_s"], a["first_add_batch_ms"])
            for a in profile["attempts"]] == [(1, 4.0, 2.5, 5.0, 4000), (2, 5.0, 2.0, 3.0, 2500)]
    assert [(a["build_s"], a["standby_ready_s"], a["warmed"]) for a in profile["attempts"]] == [
        (None, None, None), (1.25, 3.5, "data_source,python_sink+")]
    assert profile["restart_overhead_s"] == 21.5 and profile["steady_batch_ms"] == 500
    assert profile["steady_phases_ms"] == {"triggerExecution": 500}  # a first batch is no steady one


def test_the_command_prints_a_table_and_refuses_a_folder_without_a_run(tmp_path, capsys):
    assert main([str(_run_folder(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "| 2 | 5.0 | 3.5 | data_source,python_sink+ | 2.0 | 1.25 | 3.0 | 2500 | 2 |" in out
    assert "steady batch median 500.0 ms (triggerExecution 500)" in out
    assert main([str(tmp_path / "nothing")]) == 2
    assert "Hint" in capsys.readouterr().err


def test_first_batches_after_restarts_are_counted_against_the_bar_and_split_by_the_standby_s_warm_up(tmp_path,
                                                                                                      capsys):
    from streamcert.benchmarks.run_profile import first_batches_after_restarts

    profile = profile_run(_run_folder(tmp_path))
    figures = first_batches_after_restarts([profile])  # attempt 1 is no restart; attempt 2's standby was cut short
    assert (figures["count"], figures["median_s"], figures["within_bar"], figures["bar_s"]) == (1, 3.0, 1, 3.0)
    assert figures["warm_up_done"]["count"] == 0 and figures["warm_up_not_done"]["count"] == 1
    warmed = {**profile, "attempts": [{**attempt, "warm_up_done": True, "first_batch_s": 3.5}
                                       for attempt in profile["attempts"]]}
    both = first_batches_after_restarts([profile, warmed])
    assert (both["count"], both["within_bar"], both["max_s"], both["warm_up_done"]["median_s"]) == (2, 1, 3.5, 3.5)
    assert main([str(tmp_path)]) == 0
    assert "first batch after a restart: all 1 (median 3.0 s, longest 3.0 s, 1 within 3 s)" in capsys.readouterr().out


def test_a_run_with_a_cpu_window_says_how_busy_the_cores_were(tmp_path, capsys):
    cpu = {"wall_s": 40.0, "busy_s": 70.4, "nice_s": 21.0, "idle_s": 9.6, "cores": 2, "busy_share": 0.88,
           "floor_s": 35.2}
    assert main([str(_run_folder(tmp_path, cpu))]) == 0
    assert "; the machine's 2 cores 88% busy (70.4 s, 21 s of it at a lowered priority)" in capsys.readouterr().out
    assert profile_run(tmp_path)["cpu"] == cpu
