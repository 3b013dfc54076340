"""The driver process: a query in a child process, killed in the exactly-once window and restarted."""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest

from streamcert.harness.run.checkpoint import checkpoint_state, read_offsets
from streamcert.harness.run.driver import (DRIVER_TOKEN_VAR, DriverProcess, QuerySpec, _lower_priority,
                                          _restore_priority, _restore_priority_when_told, Standby, load_builder,
                                          session_key)
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.process import processes_with_token


@pytest.mark.parametrize("reference, needle", [
    ("no_colon", "module:function"),
    ("no.such.module:f", "Cannot import"),
    ("tests.harness.queries:nothing_here", "has no 'nothing_here'"),
])
def test_bad_builder_references_fail_fast_in_the_parent(reference, needle, tmp_path):
    with pytest.raises(ConfigurationError, match=needle):
        load_builder(reference)
    with pytest.raises(ConfigurationError):
        DriverProcess(QuerySpec(reference, str(tmp_path / "ck")), tmp_path)


def test_spec_round_trips_through_json(tmp_path):
    spec = QuerySpec("a:b", str(tmp_path), {"x": 1}, "local[1,2]", {"k": "v"}, ("g:a:1",))
    assert QuerySpec.from_json(spec.to_json()) == spec


@pytest.mark.integration
@pytest.mark.slow  # the mutants and the certification cover it too; tox -e long runs it
def test_kill_between_offsets_and_commit_then_restart_is_exactly_once_with_the_file_sink(stack, tmp_path):
    rows, per_batch = 40, 5
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(checkpoint),
                     {"rows": rows, "rows_per_batch": per_batch, "read_delay_ms": 400, "path": str(out)},
                     master="local[1,2]")
    token = "driver-test"
    driver = DriverProcess(spec, tmp_path / "driver", run_token=token)
    with driver:
        driver.wait_for(lambda d: (d.checkpoint().pending or 0) >= 2, "batch 2 planned but not committed",
                        timeout=180)
        driver.kill()
        killed_at = driver.checkpoint()
        assert killed_at.pending is not None and killed_at.pending >= 2
        assert processes_with_token(token) == []  # the JVM and workers died with the driver
        pending = killed_at.pending
        planned = read_offsets(checkpoint, pending)
        assert planned == [{"next": min(rows, (pending + 1) * per_batch)}]

        driver.restart()
        last_batch = rows // per_batch - 1
        driver.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= last_batch, "every batch committed",
                        timeout=180)
        first_after = next(e for e in driver.events(driver.attempt) if e["event"] == "progress")
        assert first_after["batchId"] == pending  # the pending batch is replayed, not skipped
    assert checkpoint_state(checkpoint).pending is None
    values = [row.value for row in stack.spark.read.parquet(str(out)).collect()]
    assert sorted(values) == list(range(rows))


@pytest.mark.integration
def test_a_failing_query_reports_its_error_and_exits(tmp_path):
    driver = DriverProcess(QuerySpec("tests.harness.queries:failing_query", str(tmp_path / "ck"),
                                     master="local[1,1]"), tmp_path / "driver")
    with driver:
        terminated = driver.wait_until_terminated(timeout=180)
    assert "injected failure" in (terminated["error"] or "")


@pytest.mark.integration
def test_a_query_that_cannot_be_built_reports_why_and_exits(tmp_path):
    driver = DriverProcess(QuerySpec("tests.harness.queries:unbuildable", str(tmp_path / "ck"), master="local[1,1]"),
                           tmp_path / "driver")
    with driver:
        driver.wait_for(lambda d: not d.is_running(), "the driver to exit", timeout=120)
    assert driver.exit_code() == 1
    assert driver.query_error() == "ModuleNotFoundError: No module named 'pyspark.sql.streaming.not_here'"
    [failed] = [e for e in driver.events() if e["event"] == "failed"]
    assert "queries.py" in failed["error"]  # where it was raised: the author's own frames


@pytest.mark.integration
def test_a_stop_lands_between_batches_that_run_back_to_back(tmp_path):
    """Batches of 0.4 s with a "0 seconds" trigger leave no gap to find: the stop makes one (a poll for a gap
    finds none, or stops "while idle" by luck, leaving a planned batch when its luck fails)."""
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "checkpoint"),
                     {"rows": 100_000, "rows_per_batch": 5, "read_delay_ms": 400, "path": str(tmp_path / "out")},
                     master="local[1,2]")
    driver = DriverProcess(spec, tmp_path / "driver")
    with driver:
        driver.wait_for_batches(2, timeout=180)
        report = driver.stop_gracefully(timeout=60)
    assert report["exited"] and report["exit_code"] == 0, report
    assert report["pending_batch"] is None, report  # the batch in flight committed; none was planned after
    assert report["how"] == "between batches", report
    assert report["seconds"] < 30 and report["latest_commit"] >= 1, report
    # every committed batch's progress reached the events file before the child exited
    reported = {e["batchId"] for e in driver.events() if e["event"] == "progress"}
    assert set(range(report["latest_commit"] + 1)) <= reported, (reported, report)
    assert any(e["event"] == "terminated" for e in driver.events())


def test_a_standby_is_kept_on_local_masters_only(tmp_path):
    def wants(master: str) -> bool:
        spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "ck"), master=master)
        return DriverProcess(spec, tmp_path, standby=True).standby

    assert wants("local[2,3]") and wants("local")
    assert not wants("local-cluster[3,1,1024]") and not wants("spark://127.0.0.1:7077")


def test_a_standby_serves_only_the_next_attempt_with_the_same_spark_session(tmp_path):
    class _Running:
        def is_running(self) -> bool:
            return True

    spec = QuerySpec("a:b", str(tmp_path), {"parallelism": 2}, "local[2,3]", {"k": "v"})
    standby = Standby(_Running(), "t", 4, session_key(spec), tmp_path / "go", tmp_path / "scratch")
    assert standby.serves(spec.replace(params={"parallelism": 5}), 4)  # a rescale builds another query
    assert not standby.serves(spec, 5)
    assert not standby.serves(spec.replace(master="local-cluster[2,1,1024]"), 4)
    assert not standby.serves(spec.replace(spark_conf={"k": "w"}), 4)
    standby.go(tmp_path / "spec-4.json", tmp_path / "events.jsonl", 4)
    assert json.loads((tmp_path / "go").read_text()) == {"spec": str(tmp_path / "spec-4.json"),
                                                         "events": str(tmp_path / "events.jsonl"), "attempt": 4}


def test_standbys_wait_two_attempts_ahead_and_a_changed_session_discards_them_all(tmp_path, monkeypatch):
    """The attempt after next has a standby too (kills may come faster than one starts); a restart with other
    Spark settings fits none of them: all are discarded and the attempt starts cold; a standby that died costs its
    own attempt a cold start, not the next one's standby."""
    import streamcert.harness.run.driver as driver_module

    class _Process:
        def __init__(self) -> None:
            self.killed = False

        def is_running(self) -> bool:
            return not self.killed

        def kill(self) -> None:
            self.killed = True

        stop = kill

    cold = []

    def spawn(self, spec_file, attempt, go_file=None):
        cold.append(attempt)
        return _Process(), f"token-{attempt}"

    def spawn_standby(self, attempt):
        return Standby(_Process(), f"standby-{attempt}", attempt, session_key(self.spec), tmp_path / f"go-{attempt}",
                       tmp_path / f"scratch-{attempt}")

    monkeypatch.setattr(driver_module, "ensure_class_archive", lambda: None)
    monkeypatch.setattr(driver_module, "reap", lambda token, var=None: None)
    monkeypatch.setattr(DriverProcess, "_spawn", spawn)
    monkeypatch.setattr(DriverProcess, "_spawn_standby", spawn_standby)
    monkeypatch.setattr(DriverProcess, "checkpoint", lambda self: None)
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "ck"), master="local[2,3]")
    driver = DriverProcess(spec, tmp_path / "driver", standby=True)

    driver.start()
    assert cold == [1] and [s.attempt for s in driver._standbys] == [2, 3]
    driver._process.kill()
    driver.start()  # attempt 2: its standby takes over, one more waits for attempt 4
    assert cold == [1] and (tmp_path / "go-2").exists()
    assert [s.attempt for s in driver._standbys] == [3, 4]
    waiting = list(driver._standbys)
    driver._process.kill()
    driver.spec = spec.replace(spark_conf={"spark.sql.shuffle.partitions": "3"})
    driver.start()  # attempt 3 wants another session: every standby discarded, a cold start, new standbys
    assert cold == [1, 3] and all(standby.process.killed for standby in waiting)
    assert [s.attempt for s in driver._standbys] == [4, 5]
    dead, fifth = driver._standbys
    dead.process.kill()  # attempt 4's standby died: a cold start, the next one still waits
    driver._process.kill()
    driver.start()
    assert cold == [1, 3, 4] and driver._standbys[0] is fifth and not fifth.process.killed
    assert [s.attempt for s in driver._standbys] == [5, 6]
    # the run's last restart (no fault will restart it again): its own standby serves, none waits for more
    driver.restarts_may_follow = lambda: False
    sixth = driver._standbys[1]
    driver._process.kill()
    driver.start()
    assert cold == [1, 3, 4] and (tmp_path / "go-5").exists()
    assert driver._standbys == [] and sixth.process.killed
    driver.stop()
    assert driver._standbys == []


def test_a_standby_lowers_its_priority_and_gives_it_back_to_its_threads_and_children_where_the_os_allows():
    """In a child (nice values and scheduling policies are per thread): lowered by STANDBY_NICE and made SCHED_IDLE
    before it starts a thread and a process of its own (as the JVM and the worker daemon are), then restored in all
    three, or said not to be."""
    import multiprocessing
    import subprocess
    import threading

    from streamcert.harness.run.driver import STANDBY_NICE

    def child(queue) -> None:
        before = _lower_priority()
        lowered = os.getpriority(os.PRIO_PROCESS, 0)
        grandchild = subprocess.Popen(["sleep", "30"], start_new_session=True)  # leaves the group, as the daemon
        ready, done, seen = threading.Event(), threading.Event(), {}

        def thread() -> None:
            seen["thread_id"] = threading.get_native_id()
            ready.set()
            done.wait(30)

        threading.Thread(target=thread, daemon=True).start()
        ready.wait(10)
        idle = os.sched_getscheduler(0) == os.SCHED_IDLE
        restored = _restore_priority(before)
        priorities = [os.getpriority(os.PRIO_PROCESS, pid) for pid in (0, seen["thread_id"], grandchild.pid)]
        policies = {os.sched_getscheduler(pid) for pid in (0, seen["thread_id"], grandchild.pid)}
        done.set()
        grandchild.kill()
        queue.put((before, lowered, restored, priorities, idle, policies))

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    before, lowered, restored, priorities, idle, policies = queue.get(timeout=30)
    process.join(30)
    assert lowered == min(before + STANDBY_NICE, 19)
    assert priorities == ([before] * 3 if restored else [lowered] * 3)
    if os.geteuid() == 0:  # others may lack CAP_SYS_NICE: told so by False, not raised at
        assert restored and idle and policies == {os.SCHED_OTHER}


def test_a_standby_told_to_go_while_starting_gets_its_priority_back_at_once(tmp_path):
    """In a child: lowered, then the go-file appears while it is still busy starting: the watcher restores it."""
    import multiprocessing

    def child(queue) -> None:
        normal = _lower_priority()
        lowered = os.getpriority(os.PRIO_PROCESS, 0)
        go = tmp_path / "go"
        watcher = _restore_priority_when_told(go, normal)
        time.sleep(0.1)
        still = os.getpriority(os.PRIO_PROCESS, 0)
        go.write_text("spec")
        watcher.join(10)
        queue.put((normal, lowered, still, os.getpriority(os.PRIO_PROCESS, 0), watcher.is_alive()))

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    normal, lowered, still, after, alive = queue.get(timeout=30)
    process.join(30)
    assert still == lowered > normal and not alive
    if os.geteuid() == 0:
        assert after == normal


@pytest.mark.integration
def test_a_warm_standby_takes_over_a_killed_attempt_in_a_moment_and_replays_its_batch(stack, tmp_path):
    """The standby had its session up before the kill: the restart costs the query's start only, and the query
    goes on from the checkpoint exactly once; stopping the driver leaves no standby behind."""
    rows, per_batch = 30, 5
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(checkpoint),
                     {"rows": rows, "rows_per_batch": per_batch, "read_delay_ms": 300, "path": str(out)},
                     master="local[1,2]")
    token = "standby-test"
    driver = DriverProcess(spec, tmp_path / "driver", run_token=token, standby=True)
    with driver:
        driver.wait_for(lambda d: any(e["event"] == "standby" for e in d.events(2)), "the standby ready",
                        timeout=180)
        killed_scratch = _spark_scratch_of(driver._driver_token, driver)
        driver.kill()
        assert not killed_scratch.exists()  # a SIGKILLed JVM leaves its scratch: the harness removes it
        killed_at = time.time()
        driver.restart()
        driver.wait_for(lambda d: d.session(2) is not None, "the standby's session", timeout=60)
        session = driver.session(2)
        assert "standby_ready_s" in session and session["time"] - killed_at < 2.0, session
        assert isinstance(session["warm_up"]["cut_short"], bool) and session["warm_up"]["error"] is None, session
        assert session["priority_restored"] or os.geteuid() != 0, session  # root lowers a nice value
        driver.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= rows // per_batch - 1,
                        "every batch committed", timeout=180)
        _spark_scratch_of(driver._driver_token, driver)
    assert processes_with_token(token) == []
    assert not driver.scratch_dir.exists()
    values = [row.value for row in stack.spark.read.parquet(str(out)).collect()]
    assert sorted(values) == list(range(rows))


def _spark_scratch_of(driver_token: str, driver: DriverProcess):
    """The running child's scratch folder, checked to be where its Spark keeps its files and its JVM its temp."""
    scratch = driver.scratch_dir / driver_token
    assert list(scratch.glob("blockmgr-*")), sorted(p.name for p in scratch.glob("*"))  # spark.local.dir
    jvms = [(name, line) for name, line, _env in _alive_with_token(driver_token) if name == "java"]
    assert jvms and all(f"-Djava.io.tmpdir={scratch}" in line for _name, line in jvms), jvms
    # the Python side's temporary folders too (a standby's warm-up output): a killed standby left them in /tmp
    children = [env for name, _line, env in _alive_with_token(driver_token) if name.startswith("python")]
    assert children and all(env.get("TMPDIR") == str(scratch) for env in children)
    return scratch


def _alive_with_token(driver_token: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """Name, command line and environment of each process carrying the driver's token that is still alive when
    read (a short-lived Python worker may end between the listing and the look)."""
    found = []
    for pid in processes_with_token(driver_token, var=DRIVER_TOKEN_VAR):
        try:
            process = psutil.Process(pid)
            found.append((process.name(), process.cmdline(), process.environ()))
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return found


def test_a_driver_child_keeps_a_spark_local_dir_its_spec_sets_and_quotes_its_scratch_for_the_jvm():
    from streamcert.harness.run.driver import _scratch_settings

    conf, options = _scratch_settings({"spark.local.dir": "/mine", "k": "v"}, "/runs/a b/scratch/t")
    assert conf == {"spark.local.dir": "/mine", "k": "v"} and options == '"-Djava.io.tmpdir=/runs/a b/scratch/t"'
    assert _scratch_settings({"k": "v"}, "/s/t")[0] == {"k": "v", "spark.local.dir": "/s/t"}
    assert _scratch_settings({"k": "v"}, None) == ({"k": "v"}, "")


def test_only_spark_failing_to_start_its_python_process_makes_the_driver_start_the_query_again():
    from streamcert.harness.run.driver import SPARK_START_RETRIES, is_spark_start_failure

    assert is_spark_start_failure("[STREAM_FAILED] Query [id = 1] terminated with exception: Python worker failed "
                                  "to connect back.")
    assert not is_spark_start_failure("java.lang.IllegalStateException: offsets went back")
    assert not is_spark_start_failure("Python worker exited unexpectedly (crashed)")
    assert 1 <= SPARK_START_RETRIES <= 3
