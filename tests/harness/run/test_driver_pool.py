"""The pool of warm driver children that outlive a run (harness/run/driver_pool.py)."""

from __future__ import annotations

import json
import time

import pytest

import streamcert.harness.run.driver_pool as pool_module
from streamcert.harness.faults.executor import TASK_EXCEPTION_POINT
from streamcert.harness.run.checkpoint import checkpoint_state
from streamcert.harness.run.driver import DriverProcess, QuerySpec, session_key
from streamcert.harness.run.driver_pool import DriverPool
from streamcert.harness.stack.process import processes_with_token
from streamcert.spi.fault_points import arm, claims


class _Process:
    def __init__(self, log_path) -> None:
        self.log_path, self.killed = log_path, False

    def is_running(self) -> bool:
        return not self.killed

    def kill(self) -> None:
        self.killed = True

    stop = kill


@pytest.fixture
def spawned(monkeypatch):
    """Pooled children as fake processes: what the pool spawned, in order."""
    children = []

    def spawn(label, log_path, spec_file, events_file, attempt, go_file=None, **settings):
        children.append(_Process(log_path))
        return children[-1]

    monkeypatch.setattr(pool_module, "spawn_driver_child", spawn)
    monkeypatch.setattr("streamcert.harness.run.driver.reap", lambda token, var=None: None)
    return children


def test_a_run_asks_for_a_child_of_its_settings_and_the_next_run_with_them_takes_it(tmp_path, spawned):
    plain = QuerySpec("a:b", "ck", master="local[2,3]")
    with_ui = plain.replace(spark_conf={"spark.ui.enabled": "true"})
    pool = DriverPool(tmp_path / "pool", sessions=2)
    assert pool.take(plain) is None and spawned == []  # the first run starts cold
    pool.prepare(plain)
    pool.prepare(plain)  # one waits already
    assert len(spawned) == 1 and pool.waiting() == [session_key(plain)]
    taken = pool.take(plain.replace(params={"rows": 5}, checkpoint="other"))  # another run, the same session
    assert taken is not None and taken.process is spawned[0] and not spawned[0].killed
    assert taken.points_link.is_symlink() and taken.scratch.parent.parent == tmp_path / "pool"
    assert pool.waiting() == [] and pool.take(plain) is None
    pool.prepare(plain)
    pool.prepare(with_ui)
    pool.prepare(plain)  # wanted again: now the last to go
    assert pool.waiting() == [session_key(with_ui), session_key(plain)]
    third = plain.replace(master="local[2,8]")
    pool.prepare(third)  # a third session: the one wanted longest ago goes
    assert spawned[2].killed and pool.waiting() == [session_key(plain), session_key(third)]
    assert (pool.served, pool.missed) == (1, 2)
    pool.runs_left = 0  # the last run: it asks for nothing more
    pool.prepare(with_ui)
    assert len(spawned) == 4 and pool.take(third).process is spawned[3]
    pool.stop()
    pool.stop()  # idempotent
    assert spawned[1].killed and not spawned[3].killed  # a child handed out is its taker's to stop
    assert not (tmp_path / "pool").exists()


def test_a_child_is_of_the_next_runs_session_when_the_caller_tells_it_else_of_the_run_that_asks(tmp_path, spawned):
    kills = QuerySpec("a:b", "ck", master="local[2,3]", spark_conf={"spark.ui.enabled": "true"})
    retries = ("local[2,7]", {"spark.ui.enabled": "true"})
    with DriverPool(tmp_path / "pool") as pool:
        pool.upcoming = retries
        pool.prepare(kills)  # a kill run ends; a task-failure run is next
        written = QuerySpec.from_json((spawned[0].log_path.parent / "session.json").read_text())
        assert (written.master, written.spark_conf) == retries and written.builder == "a:b"
        assert pool.take(kills) is None  # a guess for another session does not serve this one
        task_failures = kills.replace(master=retries[0], spark_conf=dict(retries[1]), checkpoint="tasks")
        assert pool.take(task_failures).process is spawned[0]
        pool.upcoming = None  # the caller cannot tell: the asking run's own session is the guess
        pool.prepare(kills)
        assert pool.take(kills).process is spawned[1]
        # a cluster's executors are JVMs of their own: no driver of it takes a child, so none is started
        pool.upcoming = ("local-cluster[3,1,1024]", {})
        pool.prepare(kills)
        pool.upcoming = None
        pool.prepare(kills.replace(master="spark://127.0.0.1:7077"))
        assert len(spawned) == 2 and pool.waiting() == []


def test_a_child_that_died_while_it_waited_is_not_handed_out(tmp_path, spawned):
    spec = QuerySpec("a:b", "ck")
    with DriverPool(tmp_path / "pool") as pool:
        pool.prepare(spec)
        spawned[0].kill()
        assert pool.take(spec) is None and pool.missed == 1 and pool.waiting() == []


def test_a_pool_never_asked_starts_nothing_and_stops_safely(tmp_path, spawned):
    DriverPool(tmp_path / "pool").stop()
    DriverPool().stop()  # a folder of its own, removed
    assert spawned == []


def test_an_adopted_child_takes_the_drivers_fault_points_and_attempt_and_leaves_its_log_in_the_run(tmp_path,
                                                                                                 spawned):
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "ck"), master="local[2,3]")
    pool = DriverPool(tmp_path / "pool")
    pool.prepare(spec)
    log = spawned[0].log_path
    log.write_text("the pooled child's log\n")
    cluster = DriverProcess(spec.replace(master="local-cluster[2,1,1024]"), tmp_path / "run" / "driver", pool=pool)
    assert cluster.pool is None  # its executors are JVMs of their own: local masters only, as standbys
    driver = DriverProcess(spec, tmp_path / "run" / "driver", standby=True, pool=pool)
    driver._spawn_standby = lambda attempt: pool_module.Standby(  # no standbys of its own in this test
        _Process(tmp_path / "x.log"), f"own-{attempt}", attempt, session_key(spec), tmp_path / f"go-{attempt}",
        tmp_path / f"scratch-{attempt}")
    from unittest import mock

    with mock.patch("streamcert.harness.run.driver.ensure_class_archive"), \
            mock.patch.object(DriverProcess, "checkpoint", lambda self: None):
        driver.start()
    go = json.loads((spawned[0].log_path.parent / "go").read_text())
    assert go == {"spec": str(driver.workdir / "driver-spec-1.json"), "events": str(driver.events_file), "attempt": 1}
    link = spawned[0].log_path.parent / "fault-points"
    assert link.resolve() == driver.fault_points_dir.resolve()
    assert driver.log_file.is_symlink() and driver.log_file.read_text() == "the pooled child's log\n"
    driver.stop()
    assert not driver.log_file.is_symlink() and driver.log_file.read_text() == "the pooled child's log\n"
    pool.stop()
    assert driver.log_file.read_text() == "the pooled child's log\n"  # kept after the pool's folder went


@pytest.mark.integration
def test_the_next_runs_first_attempt_is_a_warm_pooled_child_whose_fault_points_are_the_runs(tmp_path):
    """Two runs one after the other, as a certification makes them: the first finds no pooled child and starts
    cold; the second's first attempt is the pooled child (its session up before the run began), writes the run's
    events as attempt 1, claims a trigger armed in the run's fault-points folder (its processes know only the pool's
    link) and commits every batch; stopping the run and the pool leaves no process and no scratch behind."""
    token = "pool-test"
    rows, per_batch = 20, 5

    def spec(name: str) -> QuerySpec:
        return QuerySpec("tests.harness.executor_queries:counting_through_failure_point", str(tmp_path / name / "ck"),
                         {"rows": rows, "rows_per_batch": per_batch, "read_delay_ms": 200,
                          "path": str(tmp_path / name / "out")}, master="local[1,2]")

    with DriverPool(tmp_path / "pool", run_token=token) as pool:
        first = DriverProcess(spec("first"), tmp_path / "first" / "driver", run_token=token, pool=pool)
        with first:
            first.wait_for_batches(1, timeout=240)
            assert not first.session(1).get("pooled")  # a cold start
            pool.prepare(first.spec)  # as a run does when its faults are over
            [waiting] = pool._waiting.values()
            events = waiting.process.log_path.parent / "events.jsonl"
            first.wait_for(lambda _d: events.exists() and '"standby"' in events.read_text(),
                           "the pooled child ready", timeout=240)
        began = time.time()
        second = DriverProcess(spec("second"), tmp_path / "second" / "driver", run_token=token, pool=pool)
        arm(second.fault_points_dir, TASK_EXCEPTION_POINT, "fail")
        with second:
            second.wait_for(lambda d: d.session(1) is not None, "the pooled child's session", timeout=60)
            session = second.session(1)
            assert session["pooled"] is True and session["time"] - began < 5.0, session
            second.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= rows // per_batch - 1,
                            "every batch committed", timeout=240)
            assert len(claims(second.fault_points_dir, TASK_EXCEPTION_POINT)) == 1
            assert second.log_file.is_symlink()
        assert checkpoint_state(tmp_path / "second" / "ck").pending is None
        assert not second.log_file.is_symlink() and second.log_file.stat().st_size > 0
        assert not second.scratch_dir.exists()
        assert (pool.served, pool.missed) == (1, 1)
    assert processes_with_token(token) == [] and not (tmp_path / "pool").exists()
