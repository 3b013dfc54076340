"""The zombie task attempt (streamcert.harness.faults.zombie): what it reads from Spark's log and its parameters.
Its run end to end is the SNK-6 certification (tests/conformance/test_mutants.py: a sink committing in write() is
caught duplicating what its zombie wrote)."""

from __future__ import annotations

import os
import time

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.zombie import TaskZombie, lost_tasks
from streamcert.harness.run.history import History


def test_the_zombie_reads_the_task_attempts_spark_lost_with_the_frozen_executor_from_its_log():
    log = ("11:02:03 ERROR TaskSchedulerImpl: Lost executor 1 on 192.0.2.2: Executor heartbeat timed out after "
           "6374 ms\n"
           "11:02:03 WARN TaskSetManager: Lost task 0.0 in stage 8.0 (TID 17) (192.0.2.2 executor 1): "
           "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: Executor heartbeat "
           "timed out after 6374 ms\n"
           "11:02:04 WARN TaskSetManager: Lost task 1.0 in stage 8.0 (TID 18) (192.0.2.2 executor 11): boom\n")
    assert lost_tasks(log, "1") == ["0.0 in stage 8.0 (TID 17)"]
    assert lost_tasks(log, "11") == ["1.0 in stage 8.0 (TID 18)"]
    assert lost_tasks(log, "2") == []


def test_zombie_parameters_are_checked():
    with pytest.raises(ConfigurationError, match=r"tries=0 must be a int >= 1 and <= 10"):
        FaultSpec("task_zombie", "executor", 0.0, 0.0, {"tries": 0})
    assert FaultSpec("task_zombie", "executor", 0.0, 0.0, {}).typed_params().hold_s == 90.0


def _zombie(tmp_path, history: History) -> TaskZombie:
    context = FaultContext(driver=object(), history=history, workdir=tmp_path)
    return build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {}), context)


def test_a_zombie_watches_the_output_until_a_watch_of_the_run_saw_no_row_appear_mid_task(tmp_path):
    history = History()
    zombie = _zombie(tmp_path, history)
    assert zombie._worth_watching_output([])
    # a try that froze at an output moment and missed: the next try goes for a running task
    assert not zombie._worth_watching_output([{"moment": "output_grew", "watched_output": True}])
    # an earlier zombie of the run saw rows appear mid-task: worth watching again
    history.record("fault-start", fault="task_zombie", moment="task_running", watched_output=False,
                   missed=[{"moment": "output_grew", "watched_output": True}])
    assert zombie._worth_watching_output([])
    # a watch (in this zombie or an earlier one) that timed out: this sink shows rows only in its commit
    assert not zombie._worth_watching_output([{"moment": "task_running", "watched_output": True}])
    history.record("fault-start", fault="task_zombie", moment="task_running", watched_output=True, missed=[])
    assert not _zombie(tmp_path, history)._worth_watching_output([])
    history = History()
    history.record("fault-start", fault="driver_kill", moment="task_running", watched_output=True)
    assert _zombie(tmp_path, history)._worth_watching_output([])


class _Checkpoint:
    def __init__(self, pending):
        self.pending = pending


class _Driver:
    def __init__(self):
        self.pending = 4
        self.running = True

    def checkpoint(self):
        return _Checkpoint(self.pending)

    def is_running(self):
        return self.running


class _Output:
    def __init__(self):
        self.mark = 0

    def visible_mark(self):
        return self.mark


def test_rows_that_show_while_no_task_runs_are_no_moment_to_freeze(tmp_path, monkeypatch):
    from streamcert.harness.faults import zombie as module

    driver, output = _Driver(), _Output()
    fault = build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {}),
                        FaultContext(driver=driver, history=History(), workdir=tmp_path, observer=output))
    busy, waiting = {"1": [101]}, {101, 202}
    monkeypatch.setattr(module, "busy_workers_by_executor", lambda _driver: dict(busy))
    monkeypatch.setattr(module, "blocked_elsewhere", lambda pid: pid in waiting)
    look = {"mark": 0, "batch": None, "busy": {}, "batches": set()}
    assert fault._grew_mid_task(output, look) is None  # nothing new yet; executor 1 busy in batch 4
    busy.clear()
    output.mark = 10  # a two-phase sink's driver commit: the rows show after every task finished
    assert fault._grew_mid_task(output, look) is None
    busy["3"] = [303]
    output.mark = 15  # the same, with a worker still in its post-task gc.collect(): off its socket, waiting on nothing
    assert fault._grew_mid_task(output, look) is None
    del busy["3"]
    busy["2"] = [202]
    output.mark = 20  # a task's own write: it still runs (its commit's answer on its way)
    # every executor busy during the batch is frozen: the task that wrote may have been busy between two looks only
    assert fault._grew_mid_task(output, look) == {"1": [101], "2": [202], "3": [303]}
    driver.pending = None
    output.mark = 30  # no batch pending: nothing to lose
    assert fault._grew_mid_task(output, look) is None


def test_the_output_watch_ends_with_the_first_whole_batch_whose_rows_showed_after_its_tasks(tmp_path, monkeypatch):
    """A two-phase sink's rows show in the driver's commit, after every task of the batch: no batch of it will ever
    have the moment, so one batch seen whole is enough (three of them took a PostgreSQL 2PC zombie run ~36 s under
    the slowed link). The first batch seen does not count: it may have begun before the watch, unslowed."""
    from streamcert.harness.faults import zombie as module

    driver, output = _Driver(), _Output()
    fault = build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {}),
                        FaultContext(driver=driver, history=History(), workdir=tmp_path, observer=output))
    busy = {"1": [101]}
    monkeypatch.setattr(module, "busy_workers_by_executor", lambda _driver: dict(busy))
    monkeypatch.setattr(module, "blocked_elsewhere", lambda pid: True)
    look = {"mark": 0, "batch": None, "busy": {}, "batches": set()}
    assert fault._grew_mid_task(output, look) is None  # batch 4, seen from its middle
    busy.clear()
    output.mark = 10  # batch 4's commit
    assert fault._grew_mid_task(output, look) is None and fault._watched_enough(look) is None
    driver.pending = 5
    busy["2"] = [202]
    assert fault._grew_mid_task(output, look) is None and fault._watched_enough(look) is None  # its tasks run
    busy.clear()
    output.mark = 20  # batch 5's commit: every task had finished
    assert fault._grew_mid_task(output, look) is None
    assert fault._watched_enough(look) == "the rows of batch 5 showed while none of its tasks ran"
    # a sink that shows rows from its tasks has its moment in its first whole batch instead
    look = {"mark": 20, "batch": None, "busy": {}, "batches": set()}
    driver.pending, busy["2"] = 6, [202]
    assert fault._grew_mid_task(output, look) is None
    driver.pending = 7
    output.mark = 30  # a task of batch 7 still waits on its server's answer
    assert fault._grew_mid_task(output, look) == {"2": [202]} and fault._watched_enough(look) is None


def test_the_output_watch_lasts_whole_batches_however_long_the_slowed_link_makes_them(tmp_path, monkeypatch):
    """Six batches' time measured before the watch ended it before the first slowed batch's tasks even began
    (the commit-in-write mutant then froze a task that could not write, and passed SNK-6): the watch ends after
    three whole batches, or when the driver stops."""
    from streamcert.harness.faults import zombie as module

    driver, output = _Driver(), _Output()
    fault = build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {}),
                        FaultContext(driver=driver, history=History(), workdir=tmp_path, observer=output))
    monkeypatch.setattr(module, "busy_workers_by_executor", lambda _driver: {"1": [101]})
    look = {"mark": 0, "batch": None, "busy": {}, "batches": set()}
    for pending in (4, None, 5, 6, None, 7):
        driver.pending = pending
        assert fault._grew_mid_task(output, look) is None and fault._watched_enough(look) is None
    driver.pending = 8  # batch 4 may have begun before the watch: 5, 6 and 7 ran whole under it
    fault._grew_mid_task(output, look)
    assert "3 batches ran without the moment" in fault._watched_enough(look)
    driver.running = False
    assert fault._watched_enough({"batches": set()}) == "the driver is not running"
    # no row ever appears mid-task: the moment falls back to a running task, found after the watched batches
    driver.running, driver.pending = True, 9
    monkeypatch.setattr(fault, "_running_task", lambda: {"1": [101]})
    batches = iter(range(10, 100))
    monkeypatch.setattr(driver, "checkpoint", lambda: _Checkpoint(next(batches)))
    assert fault._moment(output_moment=True) == ("task_running", {"1": [101]})


def test_a_sink_zombie_freezes_a_lone_writer_waiting_on_the_output_link(tmp_path, monkeypatch):
    """Frozen while its task still read (its JVM stays frozen after the thaw), a zombie never writes: the moment is
    an executor whose one busy worker waits on a connection to the output's link after its reader ran in that
    batch and finished, its rows taken from its JVM socket."""
    from streamcert.harness.faults import zombie as module

    driver = _Driver()
    fault = build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {}),
                        FaultContext(driver=driver, history=History(), workdir=tmp_path))
    busy: dict[str, list[int]] = {"1": [101], "2": [201]}
    waiting, connected, unread = {101, 201}, {101}, {}
    monkeypatch.setattr(module, "busy_workers_by_executor", lambda _driver: {k: list(v) for k, v in busy.items()})
    monkeypatch.setattr(module, "blocked_elsewhere", lambda pid: pid in waiting)
    monkeypatch.setattr(module, "_connected_to", lambda pid, ports: pid in connected and ports == {5432})
    monkeypatch.setattr(module, "unread_from_jvm", lambda pid: unread.get(pid, 0))
    look: dict = {"batches": set()}
    # executor 1's writer waits on the link before its reader ran (a decision lookup); executor 2 waits elsewhere
    assert fault._writing_task({5432}, look) is None
    busy["1"] = [101, 102]  # the reader runs
    assert fault._writing_task({5432}, look) is None
    busy["1"] = [101]  # and is done; its rows are queued on the writer's socket
    unread[101] = 4096
    assert fault._writing_task({5432}, look) is None
    unread[101] = 0
    waiting.discard(101)  # the writer takes them
    assert fault._writing_task({5432}, look) is None
    waiting.add(101)  # ... and now waits for its server's answer
    assert fault._writing_task({5432}, look) == {"1": [101]}
    driver.pending = 5  # a new batch: its reader has not been seen yet
    assert fault._writing_task({5432}, look) is None
    driver.pending = None  # no batch pending: nothing Spark would lose
    assert fault._writing_task({5432}, look) is None
    assert look["batches"] == {4, 5}


def test_a_link_connection_is_seen_on_a_real_socket():
    import socket

    from streamcert.harness.faults.zombie import _connected_to, _listen_ports

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert not _connected_to(os.getpid(), {port})
        with socket.create_connection(("127.0.0.1", port)):
            assert _connected_to(os.getpid(), {port})
            assert not _connected_to(os.getpid(), {port + 1})
    assert _listen_ports(None) == set()


def test_the_writer_moment_is_tried_before_any_running_task_and_only_where_the_output_has_a_link(tmp_path,
                                                                                                monkeypatch):
    driver = _Driver()
    fault = build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {}),
                        FaultContext(driver=driver, history=History(), workdir=tmp_path))
    monkeypatch.setattr(fault, "_running_task", lambda: {"2": [202]})
    monkeypatch.setattr(fault, "_writing_task", lambda ports, look: {"1": [101]})
    assert fault._moment(output_moment=False) == ("task_running", {"2": [202]})  # no link: files
    monkeypatch.setattr(fault, "_output_link", lambda: type("L", (), {"listen_port": 5432})())
    assert fault._moment(output_moment=False) == ("task_writing", {"1": [101]})
    # a sink whose writer never waits on the link: three whole batches, then any running task
    batches = iter(range(10, 100))
    monkeypatch.setattr(driver, "checkpoint", lambda: _Checkpoint(next(batches)))
    monkeypatch.setattr(fault, "_writing_task", lambda ports, look: look["batches"].add(driver.checkpoint().pending))
    assert fault._moment(output_moment=False) == ("task_running", {"2": [202]})


def test_the_task_attempts_spark_logs_just_after_it_declared_an_executor_lost_are_waited_for(tmp_path):
    """Spark logs ``Lost executor`` first and the task attempts lost with it milliseconds later: read at once, the
    log showed none and the zombie let a good freeze go (and held the next one ~10 s)."""
    import threading

    from streamcert.harness.faults.zombie import _Frozen

    log = tmp_path / "driver.log"
    log.write_text("12:00:00 INFO earlier\n")

    class _Logging(_Driver):
        log_file = log

    fault = build_fault(FaultSpec("task_zombie", "executor", 0.0, 0.0, {"hold_s": 5.0}),
                        FaultContext(driver=_Logging(), history=History(), workdir=tmp_path))
    fault._frozen = [_Frozen("1", [object()], [101], log.stat().st_size)]

    def spark_logs() -> None:
        with open(log, "a") as handle:
            handle.write("12:00:07 ERROR TaskSchedulerImpl: Lost executor 1 on 192.0.2.2: Executor heartbeat timed "
                         "out after 6234 ms\n")
            handle.flush()
            time.sleep(0.3)
            handle.write("12:00:07 WARN TaskSetManager: Lost task 0.0 in stage 8.0 (TID 16) (192.0.2.2 executor 1): "
                         "ExecutorLostFailure\n")

    writer = threading.Thread(target=spark_logs)
    writer.start()
    found = fault._wait_lost()
    writer.join()
    assert found == {"declared_lost": True, "lost_tasks": ["0.0 in stage 8.0 (TID 16)"]}
