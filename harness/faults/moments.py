"""Driver kills timed by what the query is observed doing: a moment of the batch lifecycle, in a class of batch.

:class:`DriverKillAtMoment` watches the driver's current attempt through Spark's status API and its checkpoint
(:mod:`streamcert.harness.run.query_status`) until a batch of the wanted class (``first`` after a start, ``steady``
after three commits of the same attempt, ``replay_of_replay``) shows the wanted moment (``planning``, ``reading``,
``read_done``, ``writing``, ``commit_in_flight``, ``output_visible``, ``just_committed``). Then it decides by
freezing, not by racing:
it SIGSTOPs the driver (its Python process and JVM, where local executors run too), reads the checkpoint again and
kills only when the checkpoint still agrees (the batch uncommitted; for ``just_committed`` the commit written and
the next batch not planned); otherwise it lets the driver go on and watches the next batch. Nothing of it needs the
connector's cooperation: a connector cannot tell it is being watched.

A moment the wanted batch passed unstruck (a first batch whose commit was faster than a look) is tried again on a
later batch; for a ``first`` or ``replay_of_replay`` batch that needs a new attempt: the fault kills the driver at
the moment it is in (a *positioning* kill, recorded like any other strike) and watches the next attempt's first
batch. A ``replay_of_replay`` is made that way when the attempt does not start with one: the first batch is killed
before it commits until two attempts in a row started with the same batch pending.

The ``fault-start`` event lists every strike (``strikes``: its observation, the moments and batch class the kill
reached, how long after the look the driver froze) and says whether the wanted cell was ``reached``; ``stop``
restarts the driver from its checkpoint. With ``slow_link`` the connector's own link carries a latency toxic (both
ways, or with ``slow_streams="downstream"`` on the answers only) from the first look at the wanted batch until the
kill, so a multi-step commit's steps are a round trip or more apart. A ``fraction`` aims into the moment by its length
learnt on the run's earlier batches slowed the same way; ``round_trips_before_end`` aims back from its end instead (a
commit's last step, wherever its earlier steps took it). Such a late commit kill also watches the run's output
(:class:`_CommitRows`): once the commits it watched ran on after their rows longer than its distance from the end
(the decision recorded after the rows, prepared transactions committed in turn), it strikes that far after the rows
of its own batch; otherwise only before the batch's rows show (a commit shorter than any learnt that already showed
them is let go on, its length learnt from where they showed).
:class:`PythonWorkerKillAtMoment` kills the Python workers running a steady batch's tasks instead of the driver,
:class:`ExecutorKillAtMoment` the executor JVM running one (Spark retries the tasks).
"""

from __future__ import annotations

import statistics
import time
import weakref
from typing import Any, Literal

import requests
from pydantic import Field

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import Fault, FaultCancelled
from streamcert.harness.faults.registry import FaultParams, fault_kind
from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.stack.spark import runs_in_driver
from streamcert.harness.run.query_status import (BATCH_CLASSES, MOMENTS, STATUS_SPARK_CONF, WRITING_MOMENTS,
                                                 Observation, SparkStatus, batch_class, moments_of, replay_depth)

__all__ = ["MomentKillParams", "DriverKillAtMoment", "TASK_MOMENTS", "WorkerKillParams", "PythonWorkerKillAtMoment",
           "ExecutorKillAtMoment"]

#: Seconds between two looks at the query (each look is one or two requests to the status API: ~15 ms here).
_LOOK_INTERVAL_S = 0.005
#: Seconds between two looks while nothing the fault may strike can show within them: an attempt's first batch that
#: is not the wanted one, or that is still planning while a later moment is wanted. Looks cost the driver CPU while
#: it starts its Python workers (a warm restart's first progress came 1.3-3 s later with looks every 5 ms than with
#: none), and a first batch's next moment (its read tasks, in workers just started) lasts far longer than this.
_IDLE_LOOK_INTERVAL_S = 0.05
#: The moment a sink's driver-side commit runs in.
_COMMIT_MOMENT = "commit_in_flight"
#: Seconds a server takes to show a commit it received (a Kafka transaction's markers, a PostgreSQL commit).
_SERVER_STEP_S = 0.03


class MomentKillParams(FaultParams):
    moment: Literal[MOMENTS] = Field(description="the moment of the batch to strike (see query_status.MOMENTS)")
    batch_class: Literal[BATCH_CLASSES] = Field("steady", description="the class of batch to strike: first after a "
                                                "start, steady (3 committed before it), replay_of_replay")
    tries: int = Field(6, ge=1, le=50, description="batches (attempts, for a first batch) to watch before giving up")
    fraction: float = Field(0.0, ge=0, lt=1, allow_inf_nan=False,
                            description="how far into the moment to strike, as a fraction of its median length on "
                                        "the batches this run's moment kills watched before with the link slowed the "
                                        "same way (0: as soon as seen)")
    round_trips_before_end: float | None = Field(
        None, ge=0.5, le=10, allow_inf_nan=False,
        description="with the link slowed: strike this many round trips of the slowed link before the moment's end, "
                    "as the shortest length learnt for it (slowed the same way) puts it, instead of at ``fraction``: "
                    "a multi-step commit's last step, where a record-then-commit bug lives, sits a round trip or two "
                    "before the end of every batch whatever the length of its earlier steps (without a slowed link "
                    "``fraction`` aims). Such a kill of ``commit_in_flight`` with an observer reads the run's output "
                    "at its looks: when the commits it watched ran on after their rows for longer than the round "
                    "trips it aims before the end, it strikes at the rows of its own batch plus that tail less the "
                    "round trips; otherwise only while the output has not grown since the commit's first look "
                    "(read with the driver frozen), a commit that already showed its rows let go on and its length "
                    "learnt from there")
    slow_link: str | None = Field(None, min_length=1, description="the connector's own link (kafka, postgres, or an "
                                                                  "endpoint of its external system), slowed by a "
                                                                  "latency toxic (slow_streams says which ways) from "
                                                                  "the first look at the wanted batch until the kill")
    latency_ms: int = Field(0, ge=0, le=2000, description="the slowed link's latency each way (jitter: a fifth)")
    slow_streams: Literal["both", "downstream"] = Field(
        "both", description="which way the slowed link's latency applies: both, or only the answers (downstream): a "
                            "request then reaches the server at once and its answer comes late, so what the server "
                            "did (a prepare, a commit) is done while the client still waits for it")
    timeout_s: float = Field(240.0, gt=0, le=3600, allow_inf_nan=False,
                             description="seconds to look for the moment before giving up")


#: driver -> (moment, in an attempt's first batch, how the link was slowed) -> lengths (s) of that moment in the
#: batches the run's moment kills watched: how long a moment lasts is learnt while watching, so that ``fraction`` can
#: aim inside it (a multi-step commit's later steps, a task's last round trip).
_LENGTHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _MomentClock:
    """When each (batch, moment) was first seen by the looks of one fault; the lengths of the moments that ended go
    to :data:`_LENGTHS`, apart for an attempt's first batch (it starts Python workers: many times longer) and for
    each way the link was slowed while the moment lasted (a slowed write takes many times longer)."""

    def __init__(self, driver: Any) -> None:
        self.lengths: dict[tuple[str, bool, Any], list[float]] = _LENGTHS.setdefault(driver, {})
        self._open: dict[tuple[int, str], tuple[float, bool, Any]] = {}
        #: moments already under way at this clock's first look: their start was not seen, their length is not learnt
        self._partial: set[tuple[int, str]] | None = None
        self._last_look: float | None = None
        #: seconds between two looks, as measured (a look is one or two requests: more than the sleep between them)
        self.look_s = _LOOK_INTERVAL_S

    def saw(self, seen: Observation, now: float, slowed: Any = None,
            idled: float = 0.0) -> list[tuple[int, str, float]]:
        """Record a look; ``slowed`` says how the link is slowed now (None: not at all); ``idled`` how much longer
        than :data:`_LOOK_INTERVAL_S` the watcher waited before it (a gap the looks near the wanted moment do not
        have, so not one :meth:`due` should plan for). Returns the (batch, moment, length) of the moments whose
        length this look learnt."""
        if self._last_look is not None:
            self.look_s = 0.8 * self.look_s + 0.2 * (now - self._last_look - idled)
        self._last_look = now
        first = seen.batch_class in ("first", "replay_of_replay")
        current = {(seen.batch, moment) for moment in seen.moments}
        if self._partial is None:
            self._partial = set(current)
        ended = []
        for key in [key for key in self._open if key not in current]:
            began, was_first, was_slowed = self._open.pop(key)
            # a moment the toxic came or went in lasted neither way; one whose start was not seen, less than it did
            if was_slowed == slowed and key not in self._partial:
                self.lengths.setdefault((key[1], was_first, slowed), []).append(now - began)
                ended.append((key[0], key[1], now - began))
        for key in current:
            self._open.setdefault(key, (now, first, slowed))
        return ended

    def learn(self, moment: str, slowed: Any, length: float) -> None:
        """Learn a steady batch's ``moment`` as ``length`` seconds long with the link slowed as ``slowed`` says (a
        length worked out, not watched to its end)."""
        self.lengths.setdefault((moment, False, slowed), []).append(length)

    def shortest(self, moment: str) -> float | None:
        """The shortest length of ``moment`` learnt on this driver's batches, of any kind (None: none learnt)."""
        return min((length for (name, _, _), lengths in self.lengths.items() if name == moment for length in lengths),
                   default=None)

    def since(self, batch: int, moment: str, now: float) -> float:
        return now - self._open.get((batch, moment), (now, False, None))[0]

    def due(self, batch: int, moment: str, now: float, aim: float) -> bool:
        """Whether a strike aimed ``aim`` seconds into the moment is due at this look: the next look may come too late
        (a moment shorter than a look or two shows in one look only, and must be struck there)."""
        return self.since(batch, moment, now) + self.look_s >= aim

    def aim(self, moment: str, batch_class: str, fraction: float, slowed: Any = None,
            round_trips_before_end: float | None = None) -> float | None:
        """Seconds into ``moment`` to strike: ``fraction`` of its median length so far in batches of that kind with
        the link slowed the same way; 0 for ``fraction`` 0. With ``round_trips_before_end`` and the link slowed
        (``slowed``: link, latency each way, streams), that many round trips before the end of the shortest such
        length instead: an aim measured back from the end stays inside a commit's last step in a batch whose
        earlier steps ran shorter (the length of an idempotent producer's first connection varies by half a second
        from batch to batch; its median put a late aim past the last step of the shorter ones). For a steady batch,
        None while no such batch was seen (watch one first: an aim taken from an unslowed batch would strike a
        slowed one early). An attempt's first batch is one chance: without a length of its own class it takes the
        steady batches' (a commit lasts as long in either; a first batch's reading and writing longer, so the aim
        stays inside them), else strikes at once."""
        from_end = round_trips_before_end is not None and slowed is not None
        if not fraction and not from_end:
            return 0.0
        first = batch_class in ("first", "replay_of_replay")
        known = self.lengths.get((moment, first, slowed)) or (self.lengths.get((moment, False, slowed))
                                                               if first else None)
        if not known:
            return 0.0 if first else None
        if from_end:
            return max(0.0, min(known) - round_trips_before_end * _round_trip_s(slowed))
        length = statistics.median(known)
        return fraction * length if length > 2 * self.look_s else 0.0


def _answer_s(slowed: tuple[str, int, str]) -> float:
    """Seconds a commit's answer takes back over the link slowed as ``slowed`` says (its latency one way: the answers
    are slowed either way): how long after the server made the rows visible the commit can end."""
    return slowed[1] / 1000


def _round_trip_s(slowed: tuple[str, int, str]) -> float:
    """Seconds a request and its answer take on the link slowed as ``slowed`` says (the latency both ways, or on
    the answers only), beyond what they take unslowed."""
    _link, latency_ms, streams = slowed
    return latency_ms * (2 if streams == "both" else 1) / 1000


class _CommitRows:
    """Where in each commit a late commit kill watched the batch's rows showed (the output's visible mark, read from
    the system directly at each look, first changed), and how long those commits ran on after them: the kill's
    anchor. A commit that shows its rows at its last step (a Kafka transaction's) runs on a round trip at most; one
    that shows them first and records its decision after (or commits several prepared transactions in turn) longer.
    At-least-once output, shown by the tasks, does not change in the commit: nothing is learnt from it."""

    def __init__(self, observer: Any) -> None:
        self._observer = observer
        #: (attempt, batch) -> the output's visible mark at the first look at the batch's commit
        self._marks: dict[tuple[int, int], Any] = {}
        #: (attempt, batch) -> seconds into its commit its rows were first seen
        self.shown: dict[tuple[int, int], float] = {}
        #: seconds each commit seen to its end ran after its rows showed
        self.tails: list[float] = []

    def look(self, seen: Observation, age: float) -> None:
        """A look saw the commit of ``seen``'s batch ``age`` seconds after its first look."""
        key = (seen.attempt, seen.batch)
        if key in self.shown:
            return
        mark = self._observer.visible_mark()
        if key not in self._marks:
            self._marks[key] = mark
        elif mark != self._marks[key]:
            self.shown[key] = age

    def ended(self, attempt: int, ended: list[tuple[int, str, float]], moment: str) -> None:
        """The looks saw these moments end (:meth:`_MomentClock.saw`): learn the tail of each commit whose rows
        showed."""
        for batch, name, length in ended:
            if name == moment and (attempt, batch) in self.shown:
                self.tails.append(max(0.0, length - self.shown[(attempt, batch)]))

    def grown(self, seen: Observation) -> bool:
        """Whether the output has grown since the first look at this batch's commit (asked with the driver frozen)."""
        key = (seen.attempt, seen.batch)
        return key in self._marks and self._observer.visible_mark() != self._marks[key]

    def tail(self) -> float | None:
        """The shortest time a commit watched ran on after its rows showed (None: none watched to its end)."""
        return min(self.tails) if self.tails else None


class _Reach:
    """How late into the wanted moment the looks got in batches that passed unstruck with an aim they never reached.
    A moment a look sees in one or two places only (a fast write on a link that cannot be slowed) may end before an
    aim late in it comes due, batch after batch: the aim is then brought back to the latest age every such batch's
    looks reached, so the next batch's looks reach it too (the strike says where it aimed). A batch watched without
    an aim yet (its moment's length still being learnt, a link being slowed in it) teaches nothing."""

    def __init__(self) -> None:
        self._looked: dict[int, tuple[float, float]] = {}
        #: the latest age the looks reached in each batch that passed short of its aim
        self.reached: list[float] = []

    def saw(self, batch: int, age: float, aim: float) -> None:
        """A look saw the wanted moment of ``batch`` ``age`` seconds after it was first seen, aiming at ``aim``."""
        latest, _ = self._looked.get(batch, (0.0, aim))
        self._looked[batch] = (max(age, latest), aim)

    def passed(self, batch: int) -> None:
        """``batch`` is over (a later one is seen) and was not struck."""
        if batch in self._looked:
            latest, aim = self._looked.pop(batch)
            if latest < aim:
                self.reached.append(latest)

    def capped(self, aim: float | None) -> float | None:
        """``aim``, or a little before the latest age every batch that fell short reached (:data:`_REACH_MARGIN`),
        when that is earlier."""
        return min(aim, _REACH_MARGIN * min(self.reached)) if aim is not None and self.reached else aim


#: Where a capped aim strikes, as a share of the shortest reach: a moment may be a little shorter in the next batch
#: than in the last (batches shrink while a backlog drains after a fault). Aimed at the last batch's reach exactly,
#: an executor kill in a zombie run missed batch after batch (reaches 0.537, 0.496, 0.489 s) until its input ended.
_REACH_MARGIN = 0.9


class _WatchLog:
    """What the looks saw of each batch of the wanted class, for the ``fault-start`` event: a moment kill that never
    struck says why (the moment never seen, seen but never as late as the aim, no length learnt to aim with)."""

    def __init__(self, limit: int = 12) -> None:
        self._limit = limit
        self._batches: dict[tuple[int, int], dict[str, Any]] = {}

    def saw(self, seen: Observation, wanted: bool, age: float | None, aim: float | None) -> None:
        key = (seen.attempt, seen.batch)
        entry = self._batches.get(key)
        if entry is None:
            entry = self._batches[key] = {"attempt": seen.attempt, "batch": seen.batch, "looks": 0, "moments": set(),
                                          "wanted_looks": 0, "latest_age_s": None, "aim_s": None}
            while len(self._batches) > self._limit:
                self._batches.pop(next(iter(self._batches)))
        entry["looks"] += 1
        entry["moments"] |= seen.moments
        if wanted:
            entry["wanted_looks"] += 1
            entry["latest_age_s"] = round(max(age or 0.0, entry["latest_age_s"] or 0.0), 3)
        if aim is not None:
            entry["aim_s"] = round(aim, 3)

    def as_list(self) -> list[dict[str, Any]]:
        return [{**entry, "moments": sorted(entry["moments"])} for entry in self._batches.values()]


def _learnt(lengths: dict[tuple[str, bool, Any], list[float]]) -> list[dict[str, Any]]:
    """The moment lengths learnt so far, summarised for the ``fault-start`` event."""
    return [{"moment": moment, "first": first, "slowed": slowed is not None, "n": len(found),
             "median_s": round(statistics.median(found), 3), "shortest_s": round(min(found), 3)}
            for (moment, first, slowed), found in sorted(lengths.items(), key=lambda item: repr(item[0])) if found]


class _Missed(Exception):
    """The wanted batch passed its moment unstruck (a first batch needs a new attempt)."""


@fault_kind("driver_kill_moment", targets=("driver",), params=MomentKillParams)
class DriverKillAtMoment(Fault):
    """SIGKILL the driver at an observed moment of a batch of a given class (see the module's docstring); ``stop``
    restarts it."""

    needs = ("driver",)
    #: what the driver's Spark settings need for this fault to watch it (the status API)
    spark_conf = STATUS_SPARK_CONF
    #: whether a strike kills the driver (a new attempt follows) or only a task
    kills_driver = True

    def __init__(self, spec, context) -> None:
        super().__init__(spec, context)
        if self.params.moment == "output_visible" and context.observer is None:
            raise ConfigurationError("A driver_kill_moment at output_visible watches the run's output, and its fault "
                                     "context has no observer.", hint="Build the fault with FaultContext(observer="
                                     "<the Observer>, ...), as the scenario runner does.")
        if self.params.slow_link and context.environment is None:
            raise ConfigurationError("A driver_kill_moment that slows a link acts on the stack's Toxiproxy links, and "
                                     "its fault context has no environment.",
                                     hint="Build the fault with FaultContext(environment=<the started Environment>).")
        #: (attempt, batch) -> the output's visible mark when the batch was first seen pending (output_visible)
        self._marks: dict[tuple[int, int], Any] = {}
        #: (link, toxic names) while the link is slowed
        self._toxics: tuple[Any, list[str]] | None = None
        self._slowed: dict[str, Any] | None = None
        #: cancelled after a positioning kill's restart: the query runs on, and the heal restarts nothing
        self._left_running = False
        #: a late commit kill's view of where each watched commit showed its rows (None: not such a kill, or no
        #: observer to read the output with)
        self._rows = (_CommitRows(context.observer) if self.params.moment == _COMMIT_MOMENT
                      and self.params.round_trips_before_end is not None and context.observer is not None else None)
        #: whether the strike being decided must come before the batch's rows show
        self._before_rows = False
        #: the batches let go on because their commit had shown their rows before the strike was due (one entry
        #: each: the rest of such a batch is not struck)
        self._overshot: list[dict[str, Any]] = []

    def _inject(self) -> dict[str, Any]:
        params, driver = self.params, self.driver
        deadline = time.monotonic() + params.timeout_s
        strikes: list[dict[str, Any]] = []
        self._let_go = 0
        self._watched = 0  # batches of the wanted class seen through
        self._seen_wanted = False  # whether the wanted moment ever showed in a batch of the wanted class
        self._reach = _Reach()
        self._log = _WatchLog()
        try:
            for _ in range(params.tries + 1):
                try:
                    strike = self._watch_attempt(deadline)
                except _Missed as miss:
                    if self.cancelled:
                        break
                    strikes.append(self._position(str(miss), deadline))
                    continue
                if strike is not None:
                    strikes.append(strike)
                break
        finally:
            self._unslow()
        reached = any(strike["landed"] and strike["wanted"] for strike in strikes)
        # cancelled while it watched (the run's first finding ended its schedule): the query goes on as it is
        self._left_running = self.cancelled and not reached and driver.is_running()
        if self._left_running and not strikes:
            raise FaultCancelled("cancelled before it struck: the run's schedule was cut short")
        # output seen while the tasks ran is the connector's doing: a correct sink never shows it (its tasks stage or
        # prepare); a task kill that watched its batches and never saw it found the moment absent, not missed
        absent = (not self.kills_driver and params.moment == "output_visible" and not self._seen_wanted
                  and self._watched > params.tries)
        if self.kills_driver and driver.is_running() and not self._left_running:  # nothing struck: kill anyway
            strikes.append(self._kill_now("gave up: killed where the query was"))
        final = driver.checkpoint()
        return {"aimed": True, "moment": params.moment, "batch_class": params.batch_class, "reached": reached,
                **({"absent": True} if absent else {}),
                "strikes": strikes, "let_go": self._let_go, "slowed": self._slowed,
                **({"overshot": self._overshot} if self._overshot else {}),
                **({} if reached else {"watched": self._log.as_list()}),
                # what a miss, or an aim taken back from the end, was aimed with
                **({"learnt": _learnt(_LENGTHS.get(driver, {}))}
                   if not reached or params.round_trips_before_end is not None else {}),
                **({"cancelled": True} if self._left_running else {}),
                "in_window": reached and params.moment != "just_committed",
                "pending_batch": final.pending, "latest_commit": final.latest_commit}

    def _heal(self) -> dict[str, Any]:
        self._unslow()
        if self._left_running:  # cancelled after a positioning kill's restart: the attempt running is the last
            return {"attempt": self.driver.attempt, "restarted": False}
        self.driver.restart()
        return {"attempt": self.driver.attempt}

    # -- the slowed link -------------------------------------------------------------------------

    def _slow(self) -> None:
        """Put the latency toxic on the connector's link (once): from the first look at the wanted batch, so its
        writes and its commit run slowed while the batches before it ran at full speed (Toxiproxy delays every
        chunk in turn: a whole run on a slowed link would take many times longer)."""
        params = self.params
        if not params.slow_link or self._toxics is not None:
            return
        environment = self.environment
        link = environment.link(params.slow_link)
        if link is None:
            raise ConfigurationError(f"There is no Toxiproxy link to {params.slow_link} to slow in this stack.",
                                     hint="Moment kills that slow a link need the local or testcontainers provider.")
        toxic = {"latency": params.latency_ms, "jitter": params.latency_ms // 5}
        streams = ("upstream", "downstream") if params.slow_streams == "both" else ("downstream",)
        names = [link.add_toxic("latency", stream=stream, **toxic) for stream in streams]
        self._toxics = (link, names)
        self._slowed = {"link": params.slow_link, **toxic, "streams": params.slow_streams, "at": time.time()}

    def _slowing(self) -> tuple[str, int, str] | None:
        """How the link is slowed now (None: it is not): the key moment lengths are learnt under."""
        params = self.params
        return (params.slow_link, params.latency_ms, params.slow_streams) if self._toxics is not None else None

    def _unslow(self) -> None:
        if self._toxics is None:
            return
        link, names = self._toxics
        self._toxics = None
        for name in names:
            try:
                link.remove_toxic(name)
            except Exception:  # noqa: BLE001 - the stack may be going down; teardown clears links anyway
                pass

    # -- watching one attempt ------------------------------------------------------------------

    def _watch_attempt(self, deadline: float) -> dict[str, Any] | None:
        """Look at the current attempt until the wanted moment shows in a batch of the wanted class: strike, and
        return the strike once a kill landed; :class:`_Missed` when the wanted batch can no longer show it in this
        attempt; None when time ran out, the driver stopped, or ``tries`` steady batches passed unstruck."""
        driver, params = self.driver, self.params
        attempt = driver.attempt
        status = self._status(attempt, deadline)
        if status is None:
            return None
        start = driver.start_states.get(attempt, CheckpointState(None, None))
        passed: set[int] = set()
        clock = _MomentClock(driver)
        reach = self._reach
        self._status_api = status
        idled = 0.0  # the waits longer than _LOOK_INTERVAL_S since the clock's last look
        try:
            while time.monotonic() < deadline and driver.is_running() and not self.cancelled:
                seen = self._look(status, attempt, start)
                if seen is not None:
                    now = time.monotonic()
                    if seen.batch_class == params.batch_class and seen.checkpoint.pending is not None:
                        self._slow()
                    ended = clock.saw(seen, now, self._slowing(), idled=idled)
                    idled = 0.0
                    if self._rows is not None:
                        self._rows.ended(attempt, ended, params.moment)
                    for earlier in [batch for batch in passed if batch < seen.batch]:
                        reach.passed(earlier)
                    aim = reach.capped(clock.aim(params.moment, params.batch_class, params.fraction,
                                                 self._slowing(), params.round_trips_before_end))
                    wanted = seen.batch_class == params.batch_class and params.moment in seen.moments
                    if seen.batch_class == params.batch_class:
                        self._log.saw(seen, wanted, clock.since(seen.batch, params.moment, now), aim)
                    if wanted:
                        self._seen_wanted = True
                        aim = self._aim_by_rows(seen, clock.since(seen.batch, params.moment, now), aim)
                        if aim is not None:
                            reach.saw(seen.batch, clock.since(seen.batch, params.moment, now), aim)
                    if (wanted and aim is not None and clock.due(seen.batch, params.moment, now, aim)
                            and not self._rows_were_shown(seen)):
                        strike = self._freeze_and_decide(seen)
                        if strike["landed"]:
                            return {**strike, "aim_s": round(aim, 3), **self._rows_note(seen)}
                        if not strike.get("quiet"):  # quiet: nothing it strikes at was under way yet
                            self._let_go += 1  # the checkpoint moved on between the look and the freeze
                        if strike.get("rows_shown"):
                            self._learn_overshoot(clock, seen, now, aim)
                    self._before_rows = False
                    if seen.batch_class == params.batch_class:
                        passed.add(seen.batch)
                        self._watched = max(self._watched, len(passed))
                    if self._hopeless(seen, passed):
                        return None
                pause = self._pause_after(seen, clock)
                idled += pause - _LOOK_INTERVAL_S
                time.sleep(pause)
        finally:
            status.close()
        return None

    def _pause_after(self, seen: Observation | None, clock: _MomentClock) -> float:
        """Seconds until the next look: longer (up to :data:`_IDLE_LOOK_INTERVAL_S`) while the query is in an
        attempt's first batch and nothing this fault may strike can show before the next look: the batch is not of
        the wanted class, or it is still planning and the wanted moment, when it comes, lasts three such waits or
        more by the lengths learnt on this driver's batches (the shortest of any kind: a first batch's moment is
        rarely shorter than a steady one's). Otherwise, and while no length of the wanted moment was learnt,
        :data:`_LOOK_INTERVAL_S`."""
        if seen is None or seen.batch_class not in ("first", "replay_of_replay"):
            return _LOOK_INTERVAL_S
        params = self.params
        if seen.batch_class != params.batch_class:
            return _IDLE_LOOK_INTERVAL_S
        if seen.moments != {"planning"} or params.moment == "planning":
            return _LOOK_INTERVAL_S
        shortest = clock.shortest(params.moment)
        return _LOOK_INTERVAL_S if shortest is None else min(_IDLE_LOOK_INTERVAL_S, max(_LOOK_INTERVAL_S, shortest / 3))

    def _hopeless(self, seen: Observation, passed: set[int]) -> bool:
        """True once ``tries`` steady batches passed; :class:`_Missed` once this attempt's first batch is over (or,
        for a replay of a replay, it is not one)."""
        wanted = self.params.batch_class
        if wanted == "steady":
            return len(passed) > self.params.tries
        if seen.batch_class in ("warming", "steady"):
            raise _Missed(f"the attempt's first batch passed the {self.params.moment} moment unstruck")
        if wanted == "replay_of_replay" and seen.batch_class == "first":
            raise _Missed("the attempt's first batch is not a replay of a replay yet")
        return False

    def _status(self, attempt: int, deadline: float) -> SparkStatus | None:
        """The status API of ``attempt`` once its query started (a batch a killed attempt left pending shows in the
        checkpoint at once: striking before the query even started would hit start-up, not a batch)."""
        driver = self.driver
        while (time.monotonic() < deadline and driver.is_running() and driver.attempt == attempt
               and not self.cancelled):
            events = driver.events(attempt)
            session = next((e for e in events if e.get("event") == "session"), None)
            if session is not None and any(e.get("event") == "started" for e in events):
                if not session.get("ui"):
                    raise RuntimeError("the driver runs without Spark's UI, whose status API this fault reads "
                                       "(the scenario's Spark settings must include query_status.STATUS_SPARK_CONF)")
                return SparkStatus(session["ui"], session["app_id"])
            time.sleep(0.02)
        return None

    def _look(self, status: SparkStatus, attempt: int, start: CheckpointState) -> Observation | None:
        """One look: the checkpoint, then (a batch pending) that batch's jobs."""
        state = self.driver.checkpoint()
        batch = state.pending if state.pending is not None else state.latest_commit
        if batch is None:
            return None
        if state.pending is None and (start.latest_commit is not None and batch <= start.latest_commit):
            return None  # the latest commit is an earlier attempt's: this one committed nothing yet
        try:
            jobs = status.jobs_of(batch) if state.pending is not None else ()
        except requests.RequestException:
            return None  # the driver is stopping, or busy: look again
        if self.driver.checkpoint() != state:
            return None  # the checkpoint moved while the jobs were read: the two do not describe one moment
        depth = replay_depth(batch, attempt, self.driver.start_states)
        seen = Observation(attempt, batch, moments_of(state, jobs, next_planned=False),
                           batch_class(batch, start, depth), depth, state, jobs)
        return self._with_output(seen) if state.pending is not None else seen

    def _with_output(self, seen: Observation) -> Observation:
        """``seen``, plus ``output_visible`` when this fault aims at it and the output grew since the batch was
        first seen pending (asked of the observer only then: a look stays one request otherwise)."""
        if self.params.moment != "output_visible":
            return seen
        key = (seen.attempt, seen.batch)
        if key not in self._marks:
            self._marks[key] = self.observer.visible_mark()
            return seen
        if seen.moments & set(WRITING_MOMENTS) and self.observer.visible_mark() != self._marks[key]:
            return seen.with_moment("output_visible")
        return seen

    # -- striking ----------------------------------------------------------------------------

    def _freeze_and_decide(self, seen: Observation) -> dict[str, Any]:
        """SIGSTOP the driver, read the checkpoint: kill when it still agrees with the look (and, for a late commit
        kill held before the rows, the output has not grown since the commit's first look, nor while the requests
        the driver sent before the freeze crossed the slowed link), else let it go on."""
        driver = self.driver
        looked = time.monotonic()
        driver.pause()
        frozen_ms = round(1000 * (time.monotonic() - looked), 1)
        state = driver.checkpoint()
        if _agrees(seen, state):
            if not (self._before_rows and self._rows_grown_while_frozen(seen)):
                driver.kill()
                return self._strike(seen, landed=True, frozen_ms=frozen_ms)
            driver.resume()
            return self._strike(seen, landed=False, frozen_ms=frozen_ms, rows_shown=True)
        driver.resume()
        return self._strike(seen, landed=False, frozen_ms=frozen_ms, checkpoint_moved_to=state.latest_commit)

    # -- a late commit kill and the batch's rows ---------------------------------------------------

    def _aim_by_rows(self, seen: Observation, age: float, aim: float | None) -> float | None:
        """A late commit kill's aim in this batch's commit, ``age`` seconds in: from where its rows show when the
        commits watched ran on after their rows longer than the aim's distance from the end (the rows show first,
        then the decision is recorded or more prepared transactions commit): the rows' age in this batch plus the
        shortest such tail, less the round trips before the end (None until this batch's rows show), which no
        variation of the steps before the rows moves. Otherwise (the rows show last, or nothing learnt yet) ``aim``,
        struck only before the rows show. Any other kill: ``aim``."""
        rows = self._rows
        if rows is None:
            return aim
        rows.look(seen, age)
        slowed = self._slowing()
        tail = rows.tail()
        before = self.params.round_trips_before_end * _round_trip_s(slowed) if slowed is not None else None
        if tail is None or before is None or before >= tail:
            self._before_rows = True
            return aim
        shown = rows.shown.get((seen.attempt, seen.batch))
        return None if shown is None else shown + tail - before

    def _rows_grown_while_frozen(self, seen: Observation) -> bool:
        """Whether the batch's rows showed before the kill could strike: already, or once the requests the frozen
        driver sent before it froze crossed the slowed link (the proxy delivers a request a dying client sent: a
        commit's last request on its way shows its rows after the kill, and the strike would have come after the
        step it is aimed before). The driver stays frozen meanwhile: nothing it does moves the strike."""
        if self._rows.grown(seen):
            return True
        time.sleep(self._in_flight_s())
        return self._rows.grown(seen)

    def _in_flight_s(self) -> float:
        """How long a request the driver sent may take to cross the slowed link and show its effect: the latency
        on the way there and its jitter, plus the server's own steps (a transaction's markers)."""
        slowed = self._slowing()
        towards_server_s = slowed[1] * 1.2 / 1000 if slowed is not None and slowed[2] == "both" else 0.0
        return towards_server_s + _SERVER_STEP_S

    def _rows_note(self, seen: Observation) -> dict[str, Any]:
        """What a late commit kill's strike knew of the rows: where they showed in this commit (if before it), the
        shortest tail after them, and whether it had to strike before them."""
        if self._rows is None:
            return {}
        shown, tail = self._rows.shown.get((seen.attempt, seen.batch)), self._rows.tail()
        return {"rows_shown_s": None if shown is None else round(shown, 3),
                "tail_after_rows_s": None if tail is None else round(tail, 3), "before_rows": self._before_rows}

    def _rows_were_shown(self, seen: Observation) -> bool:
        """Whether this batch was let go on already because its commit had shown its rows (a commit that shows them
        in several steps shows more at each later look: one let-go, one length learnt, per batch)."""
        return any(entry["attempt"] == seen.attempt and entry["batch"] == seen.batch for entry in self._overshot)

    def _learn_overshoot(self, clock: _MomentClock, seen: Observation, now: float, aim: float) -> None:
        """A commit showed its rows before the aim: shorter than every one learnt. What it ran until its rows
        showed (seen by an earlier look, else by this one), plus what the commits watched ran after their rows (the
        answer's way back while none was watched to its end), is learnt as a length, so the next batch's aim comes
        before its rows."""
        slowed = self._slowing()
        shown_s = self._rows.shown.get((seen.attempt, seen.batch), clock.since(seen.batch, self.params.moment, now))
        tail = self._rows.tail()
        if tail is None:
            tail = _answer_s(slowed) if slowed is not None else 0.0
        clock.learn(self.params.moment, slowed, shown_s + tail)
        self._overshot.append({"attempt": seen.attempt, "batch": seen.batch, "rows_shown_by_s": round(shown_s, 3),
                               "aim_s": round(aim, 3)})

    def _strike(self, seen: Observation, landed: bool, **details: Any) -> dict[str, Any]:
        return {**seen.as_dict(), "landed": landed, "wanted": self.params.moment in seen.moments
                and seen.batch_class == self.params.batch_class, **details}

    def _position(self, why: str, deadline: float) -> dict[str, Any]:
        """A kill that brings a new attempt (and with it a first batch): at the moment the query is in, preferring a
        moment before the commit, so that the next attempt replays the batch."""
        driver = self.driver
        attempt = driver.attempt
        status = self._status(attempt, deadline)
        start = driver.start_states.get(attempt, CheckpointState(None, None))
        try:
            while status is not None and time.monotonic() < deadline and driver.is_running() and not self.cancelled:
                seen = self._look(status, attempt, start)
                if seen is not None and seen.moments and "just_committed" not in seen.moments:
                    strike = self._freeze_and_decide(seen)
                    if strike["landed"]:
                        driver.restart()
                        return {**strike, "positioning": why}
                time.sleep(_LOOK_INTERVAL_S)
        finally:
            if status is not None:
                status.close()
        if self.cancelled:
            return {"attempt": attempt, "batch": None, "moments": [], "batch_class": None, "landed": False,
                    "wanted": False, "positioning": why, "cancelled": True}
        strike = self._kill_now(why)
        driver.restart()
        return strike

    def _kill_now(self, why: str) -> dict[str, Any]:
        state = self.driver.checkpoint()
        self.driver.kill()
        return {"attempt": self.driver.attempt, "batch": state.pending, "moments": [], "batch_class": None,
                "landed": False, "wanted": False, "positioning": why}


def _agrees(seen: Observation, state: CheckpointState) -> bool:
    """Whether the checkpoint read with the driver frozen still shows the batch ``seen`` looked at, in the same
    place: uncommitted for a moment before the commit; committed, and the next batch not planned, after it."""
    if "just_committed" in seen.moments:
        return state.pending is None and state.latest_commit == seen.batch
    return state.pending == seen.batch


#: The moments in which a batch's Python workers run its tasks.
TASK_MOMENTS = ("reading", "read_done", "writing", "output_visible")


class WorkerKillParams(MomentKillParams):
    moment: Literal[TASK_MOMENTS] = Field(description="the moment of a steady batch whose running task to kill: "
                                                      "reading, read_done, writing or output_visible")
    batch_class: Literal["steady"] = Field("steady", description="steady: a task kill needs no new attempt")


@fault_kind("python_worker_kill_moment", targets=("executor",), params=WorkerKillParams)
class PythonWorkerKillAtMoment(DriverKillAtMoment):
    """SIGKILL the Python workers running the batch's tasks at an observed moment of a steady batch: each task
    attempt dies where the look found it (its rows read, staged, prepared or visible, but not reported), and Spark
    retries it (``local[N,F]``, ``F`` > 1). The driver is not touched: a kill lands when a busy worker was killed
    while the checkpoint still showed the batch uncommitted. ``stop`` has nothing to heal.

    A task's last step is the one a failed attempt leaves behind (prepared, staged, written but not reported): with
    the link slowed one way (``slow_streams="downstream"``) that step is done on the server a whole latency before
    the task hears of it, and a ``fraction`` near 1 of the learnt ``writing`` moment strikes inside it."""

    kills_driver = False

    def _with_output(self, seen: Observation) -> Observation:
        """As for the driver, but only while the batch's tasks run (``writing``): output that grows during the
        driver's commit is no task's doing."""
        return super()._with_output(seen) if "writing" in seen.moments else seen

    def _freeze_and_decide(self, seen: Observation) -> dict[str, Any]:
        from streamcert.harness.faults.executor import busy_workers, sigkill

        looked = time.monotonic()
        busy = busy_workers(self.driver)
        state = self.driver.checkpoint()
        if not busy or state.pending != seen.batch:
            return self._strike(seen, landed=False, frozen_ms=round(1000 * (time.monotonic() - looked), 1))
        # every busy worker: the task in its last step may be any of them (a reader, a writer, another task's)
        killed = [pid for pid in busy if sigkill(pid)]
        return self._strike(seen, landed=bool(killed), frozen_ms=round(1000 * (time.monotonic() - looked), 1),
                            pids=killed, busy_workers=len(busy))

    def _position(self, why: str, deadline: float) -> dict[str, Any]:
        return {"attempt": self.driver.attempt, "batch": None, "moments": [], "batch_class": None, "landed": False,
                "wanted": False, "gave_up": why}

    def _kill_now(self, why: str) -> dict[str, Any]:
        return {"attempt": self.driver.attempt, "batch": None, "moments": [], "batch_class": None, "landed": False,
                "wanted": False, "gave_up": why}

    def _heal(self) -> dict[str, Any]:
        self._unslow()
        return {}


@fault_kind("executor_kill_moment", targets=("executor",), params=WorkerKillParams)
class ExecutorKillAtMoment(PythonWorkerKillAtMoment):
    """SIGKILL the executor JVM (``local-cluster`` or a cluster on this machine) running one of a steady batch's
    tasks, at an observed task moment: one whose Python workers run a task, else one the status API shows running a
    task (a JVM sink's write, after the Python reader finished). The attempts it ran die with it, their writes done
    but not reported, its workers orphaned; Spark's standalone master launches a replacement and the tasks are
    retried on another executor. The driver is not touched; a kill lands when an executor running a task was killed
    while the checkpoint still showed the batch uncommitted."""

    def __init__(self, spec, context) -> None:
        super().__init__(spec, context)
        master = str(getattr(getattr(context.driver, "spec", None), "master", "") or "")
        if runs_in_driver(master):
            raise ConfigurationError(f"An executor_kill_moment kills an executor JVM, and master {master} runs tasks "
                                     "inside the driver.", hint="Run it on local-cluster[W,C,MB] (e.g. "
                                     "local-cluster[2,1,1024]) or a cluster whose executors run on this machine.")

    def _freeze_and_decide(self, seen: Observation) -> dict[str, Any]:
        from streamcert.harness.faults.executor import busy_workers_by_executor, executor_jvms, executor_order, sigkill

        looked = time.monotonic()
        running = busy_workers_by_executor(self.driver)
        busy = set(running) | set(self._busy_executors())
        executors = executor_jvms(self.driver)
        state = self.driver.checkpoint()
        # an executor whose Python workers run a task first; else one running a JVM task (a JVM sink's write)
        victims = [eid for eid in sorted(busy, key=lambda e: (e not in running, executor_order(e))) if eid in executors]
        if not victims or state.pending != seen.batch:
            return self._strike(seen, landed=False, frozen_ms=round(1000 * (time.monotonic() - looked), 1))
        victim = victims[0]
        killed = sigkill(executors[victim])
        return self._strike(seen, landed=killed, frozen_ms=round(1000 * (time.monotonic() - looked), 1),
                            executor_id=victim, pid=executors[victim], busy_workers=len(running.get(victim, [])),
                            running_seen_by="python_workers" if running.get(victim) else "status_api")

    def _busy_executors(self) -> dict[str, int]:
        """Executors running tasks now, by Spark's status API (none when it does not answer)."""
        status = getattr(self, "_status_api", None)
        try:
            return status.busy_executors() if status is not None else {}
        except requests.RequestException:
            return {}
