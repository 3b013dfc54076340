"""Warm driver children that outlive one run: the first attempt of the next run takes one instead of starting cold.

A :class:`~streamcert.harness.run.driver.DriverProcess` keeps standbys for its own next attempts, but its first
attempt always started cold: a JVM and a SparkSession (4-18 s on two cores, the status API's warm-up included),
then a first batch that forks the Python data source runners and workers (12-47 s). In seed 2's certification
those came to ~11 of its 64 minutes, over 24 runs. A pool started beside the runs (``certify`` keeps one per stack)
waits with a child per Spark session it was asked for, started and warmed at a lowered priority as a standby is
(:mod:`~streamcert.harness.run.driver`), in a folder of its own; a driver whose attempt has no standby of its own
takes the pool's child of its settings (:meth:`DriverPool.take`). A run asks for the next one
(:meth:`DriverPool.prepare`) once its faults are over: earlier, the pooled child's warm-up would take the idle CPU the
run's own standbys warm on. The child is of the next run's session when the certification can tell it
(:attr:`DriverPool.upcoming`): in a quick certification the session changed between 10 of 12 pairs of consecutive
runs (the status API of kill runs, the task retries of task-failure runs, the cluster of zombie runs), and children
of the session that had just run served 3 of its 13 first attempts.

A pooled child knows its run only when it is told to go: its events move to the run's events file, its log is
linked into the run's folder (and copied there when the driver stops), and its fault points are a link in the
pool's folder that the adopting driver points at its own (the child's processes inherited the link's path).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

from streamcert.harness.run.driver import POOLED_ATTEMPT, QuerySpec, Standby, session_key, spawn_driver_child
from streamcert.harness.stack.spark import runs_in_driver

__all__ = ["POOL_SESSIONS", "DriverPool"]

#: Spark sessions (master and settings) the pool keeps a child for at once; the one used longest ago goes first. A
#: certification's runs mostly use two per connector (with and without the status API the moment kills read).
POOL_SESSIONS = 2


class DriverPool:
    """Pooled driver children, one per Spark session wanted lately; a context manager, ``stop()`` idempotent.

    Called from the harness's thread that runs the scenarios, one call at a time.
    """

    def __init__(self, folder: Path | None = None, run_token: str = "", sessions: int = POOL_SESSIONS) -> None:
        self.folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="streamcert-pool-"))
        self.run_token = run_token
        self.sessions = sessions
        #: waiting children by session key, the one wanted longest ago first
        self._waiting: dict[tuple, Standby] = {}
        #: how many attempts a pooled child served, and how many found none of their settings
        self.served = 0
        self.missed = 0
        #: runs that will follow the current one (None: unknown); with none, a take starts no child for the next
        self.runs_left: int | None = None
        #: the master and Spark settings of the next run's driver when the caller can tell (None: the current
        #: run's own are the best guess): runs in a plan change sessions often (a kill run's status API, a zombie
        #: run's cluster), and a child of the session that just ran would wait for a run that never comes
        self.upcoming: tuple[str, dict[str, str]] | None = None

    def __enter__(self) -> "DriverPool":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def take(self, spec: QuerySpec) -> Standby | None:
        """A waiting child whose Spark session is ``spec``'s, now the caller's to hand its go; None when there is
        none."""
        found = self._waiting.pop(session_key(spec), None)
        if found is not None and not found.process.is_running():
            found.discard()
            found = None
        if found is None:
            self.missed += 1
        else:
            self.served += 1
        return found

    def prepare(self, spec: QuerySpec) -> None:
        """Start a child for the run to come: with :attr:`upcoming`'s session when it is known, else ``spec``'s
        (none when one waits already, or when no run follows); the child waited for longest goes when
        :attr:`sessions` children wait."""
        if self.upcoming is not None:
            master, spark_conf = self.upcoming
            spec = spec.replace(master=master, spark_conf=dict(spark_conf))
        if not runs_in_driver(spec.master):  # executors of their own: no driver of that session takes a child
            return
        key = session_key(spec)
        if key in self._waiting:
            self._waiting[key] = self._waiting.pop(key)  # wanted lately: the last to go
            return
        if self.runs_left == 0:
            return
        while len(self._waiting) >= self.sessions:
            self._waiting.pop(next(iter(self._waiting))).discard()
        self._waiting[key] = self._spawn(spec, key)

    def waiting(self) -> list[tuple]:
        """The session keys a child waits for, the one wanted longest ago first."""
        return list(self._waiting)

    def _spawn(self, spec: QuerySpec, key: tuple) -> Standby:
        token = uuid.uuid4().hex
        home = self.folder / token
        (home / "no-points").mkdir(parents=True)
        points = home / "fault-points"
        points.symlink_to(home / "no-points", target_is_directory=True)
        session_file = home / "session.json"
        session_file.write_text(spec.to_json())
        go_file = home / "go"
        process = spawn_driver_child(
            f"pooled driver ({spec.master})", home / "driver.log", session_file, home / "events.jsonl",
            POOLED_ATTEMPT, go_file, run_token=self.run_token, driver_token=token, points_dir=points,
            scratch=home / "scratch")
        return Standby(process, token, POOLED_ATTEMPT, key, go_file, home / "scratch", points_link=points)

    def stop(self) -> None:
        """Kill every waiting child and remove the pool's folder (the logs of children that served a run were
        copied to its folder by its driver)."""
        waiting, self._waiting = list(self._waiting.values()), {}
        for standby in waiting:
            standby.discard()
        shutil.rmtree(self.folder, ignore_errors=True)
