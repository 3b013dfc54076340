"""The fault timeline: chained faults one after the other, and a timeline cut short starting no further fault."""

from __future__ import annotations

import threading

from streamcert.harness.faults.base import FaultCancelled
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.faults.timeline import FaultTimeline
from streamcert.harness.run.history import History


class _Fault:
    """Records its start and stop in the history; ``on_start`` runs inside its start."""

    def __init__(self, history: History, name: str, on_start=None) -> None:
        self.history, self.name, self.on_start = history, name, on_start

    def start(self) -> None:
        self.history.record("fault-start", fault=self.name)
        if self.on_start is not None:
            self.on_start()

    def stop(self) -> None:
        self.history.record("fault-stop", fault=self.name)

    def cancel(self) -> None:
        """Acts at once: nothing to give up."""


def _chain(names: list[str], gap_s: float = 0.0) -> list[FaultSpec]:
    """Driver kills (a registry fault; what runs is the test's own :class:`_Fault` named after each), ``gap_s``
    apart."""
    return [FaultSpec("driver_kill", "driver", gap_s if index else 0.0, 0.0, after=index - 1 if index else None)
            for index in range(len(names))]


def test_chained_faults_start_one_after_the_other_once_each_stopped():
    history = History()
    specs = _chain(["a", "b", "c"])
    timeline = FaultTimeline(specs, [_Fault(history, name) for name in "abc"], history).start()
    timeline.join(10)
    assert timeline.done()
    assert [(e["kind"], e["fault"]) for e in history.events()] == [
        ("fault-start", "a"), ("fault-stop", "a"), ("fault-start", "b"), ("fault-stop", "b"),
        ("fault-start", "c"), ("fault-stop", "c")]


def test_a_timeline_cut_short_finishes_the_fault_under_way_and_cancels_the_rest_with_the_reason():
    history = History()
    specs = _chain(["a", "b", "c"], gap_s=30.0)  # cancelled faults do not wait out their gaps
    holder: dict[str, FaultTimeline] = {}
    started = threading.Event()

    def cut() -> None:
        holder["timeline"].cut_short("a finding")
        holder["timeline"].cut_short("another reason")  # the first reason stays
        started.set()

    faults = [_Fault(history, "a", on_start=cut), _Fault(history, "b"), _Fault(history, "c")]
    holder["timeline"] = FaultTimeline(specs, faults, history)
    holder["timeline"].start().join(10)
    assert started.is_set() and holder["timeline"].done()  # well within the 60 s of gaps
    assert [(e["kind"], e["fault"]) for e in history.events()] == [
        ("fault-start", "a"), ("fault-stop", "a"), ("fault-cancelled", "driver_kill"),
        ("fault-cancelled", "driver_kill")]
    assert {e["reason"] for e in history.events("fault-cancelled")} == {"a finding"}


def test_an_abandoned_timeline_stops_a_fault_held_for_its_duration_at_once_and_starts_no_other():
    """A run interrupted mid-schedule (Ctrl-C, SIGTERM): a cut alone would hold the fault under way for its whole
    duration, then heal it after the teardown stopped what it acts on."""
    history = History()
    specs = [FaultSpec("driver_kill", "driver", 0.0, 600.0), FaultSpec("driver_kill", "driver", 0.0, 0.0, after=0)]
    started = threading.Event()
    timeline = FaultTimeline(specs, [_Fault(history, "held", on_start=started.set), _Fault(history, "next")],
                             history).start()
    assert started.wait(10)
    timeline.abandon("interrupted")
    timeline.join(10)
    assert timeline.done()  # well within the held fault's 600 s
    assert [(e["kind"], e["fault"]) for e in history.events()] == [
        ("fault-start", "held"), ("fault-stop", "held"), ("fault-cancelled", "driver_kill")]
    assert not timeline.may_still_act_on("driver")


def test_a_fault_still_waiting_for_its_moment_gives_up_when_the_timeline_is_cut_short():
    """A moment kill waits (it watches the query) inside its start: cut short, the timeline cancels it too, and it
    injects nothing, so it has nothing to heal; the faults after it are cancelled as before."""
    history = History()
    waiting, cancelled = threading.Event(), threading.Event()

    class _Waiting(_Fault):
        active = False

        def start(self) -> None:
            waiting.set()
            if not cancelled.wait(10):
                self.active = True
                super().start()
                return
            raise FaultCancelled("cancelled before it struck")

        def stop(self) -> None:
            if self.active:
                super().stop()

        def cancel(self) -> None:
            cancelled.set()

    timeline = FaultTimeline(_chain(["w", "b"]), [_Waiting(history, "w"), _Fault(history, "b")], history).start()
    assert waiting.wait(5)
    timeline.cut_short("a finding")
    timeline.join(5)
    assert timeline.done() and cancelled.is_set()
    assert [(e["kind"], e["fault"]) for e in history.events()] == [("fault-cancelled", "driver_kill"),
                                                                   ("fault-cancelled", "driver_kill")]
    assert history.events("fault-cancelled")[0]["phase"] == "start"


def test_a_driver_learns_its_last_restart_when_the_last_fault_on_it_begins_to_stop():
    """A driver warms standbys only for attempts a fault may still restart it into: while the last fault on the
    driver starts (a moment kill may restart it several times) more may follow; once it stops, its heal's restart is
    the last. A fault on another target after it changes nothing."""
    history = History()
    specs = [*_chain(["a", "b"]), FaultSpec("task_zombie", "executor", 0.0, 0.0, after=1)]
    holder: dict[str, FaultTimeline] = {}
    seen: list[tuple[str, str, bool]] = []

    class _Watching(_Fault):
        def start(self) -> None:
            seen.append((self.name, "start", holder["timeline"].may_still_act_on("driver")))
            super().start()

        def stop(self) -> None:
            seen.append((self.name, "stop", holder["timeline"].may_still_act_on("driver")))
            super().stop()

    holder["timeline"] = FaultTimeline(specs, [_Watching(history, name) for name in "abz"], history)
    assert holder["timeline"].may_still_act_on("driver") and not holder["timeline"].may_still_act_on("kafka")
    holder["timeline"].start().join(10)
    assert seen == [("a", "start", True), ("a", "stop", True), ("b", "start", True), ("b", "stop", False),
                    ("z", "start", False), ("z", "stop", False)]
    cut = FaultTimeline(_chain(["a"]), [_Fault(history, "a")], history)
    cut.cut_short("a finding")
    assert not cut.may_still_act_on("driver")
