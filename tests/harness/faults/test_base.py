"""The Fault contract: start and stop are idempotent and each records one event with the spec's fields."""

from __future__ import annotations

import dataclasses

import pytest

from streamcert.harness.faults.base import Fault, FaultContext, wait_for_input_read, within
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.history import History


class _Counting(Fault):
    """Counts its injections and heals; ``fail`` makes the injection raise."""

    fail = False

    def __init__(self, spec, context) -> None:
        super().__init__(spec, context)
        self.injected = self.healed = 0

    def _inject(self):
        if self.fail:
            raise RuntimeError("the link is gone")
        self.injected += 1
        return {"link": "kafka"}

    def _heal(self):
        self.healed += 1
        return None


def _fault(tmp_path, spec=None) -> _Counting:
    spec = spec or FaultSpec("latency", "kafka", 1.0, 2.0, {"latency": 100}, "upstream")
    return _Counting(spec, FaultContext(history=History(), workdir=tmp_path))


def test_start_and_stop_are_idempotent_and_record_one_event_each(tmp_path):
    fault = _fault(tmp_path)
    fault.stop()  # before start: nothing
    fault.start()
    fault.start()
    fault.stop()
    fault.stop()
    assert (fault.injected, fault.healed) == (1, 1)
    start, stop = fault.history.events()
    assert {k: v for k, v in start.items() if k not in ("time", "elapsed_s")} == {
        "kind": "fault-start", "fault": "latency", "target": "kafka", "params": {"latency": 100},
        "stream": "upstream", "link": "kafka"}
    assert {k: v for k, v in stop.items() if k not in ("time", "elapsed_s")} == {
        "kind": "fault-stop", "fault": "latency", "target": "kafka"}


def test_a_fault_whose_injection_failed_is_not_active_and_not_recorded(tmp_path):
    fault = _fault(tmp_path)
    fault.fail = True
    with pytest.raises(RuntimeError):
        fault.start()
    fault.stop()
    assert fault.active is False and fault.history.events() == [] and fault.healed == 0


def test_params_are_typed_by_the_kinds_model_with_defaults(tmp_path):
    fault = _fault(tmp_path, FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 2}))
    assert (fault.params.min_batch, fault.params.delay_ms) == (2, 0)


def test_the_context_is_keyword_only_and_frozen(tmp_path):
    with pytest.raises(TypeError):
        FaultContext(History(), tmp_path)  # noqa: the order of the fields is not an interface
    context = FaultContext(history=History(), workdir=tmp_path)
    assert (context.environment, context.driver, context.input_topic) == (None, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.driver = object()


def test_within_returns_what_the_probe_found_or_none_on_timeout_or_abort():
    assert within(lambda: [3], what="a list", timeout=1) == [3]
    assert within(lambda: [], what="a list", timeout=0.1, interval=0.01) is None
    looks = []
    assert within(lambda: looks.append(1), what="never", timeout=30, abort=lambda: "gone" if looks else None) is None
    assert len(looks) == 1  # aborted at the next look, not after 30 s


class _Driver:
    """A driver whose current attempt reports the given progress events, running until ``stops_after`` looks."""

    def __init__(self, events, stops_after=None):
        self.attempt, self._events, self._looks, self._stops_after = 2, events, 0, stops_after

    def events(self, attempt):
        self._looks += 1
        return [e for e in self._events if e["attempt"] == attempt]

    def is_running(self):
        return self._stops_after is None or self._looks < self._stops_after


def _waiting(tmp_path, driver) -> _Counting:
    return _Counting(FaultSpec("latency", "kafka", 1.0, 2.0, {"latency": 100}, "upstream"),
                     FaultContext(history=History(), workdir=tmp_path, driver=driver))


def test_a_fault_waits_for_the_current_attempt_to_read_input_and_says_whether_it_did(tmp_path):
    read = {"event": "progress", "attempt": 2, "numInputRows": 60}
    assert wait_for_input_read(_waiting(tmp_path, _Driver([read])), 5.0)["attempt_read_input"] is True
    earlier = {"event": "progress", "attempt": 1, "numInputRows": 60}  # another attempt's reading does not count
    waited = wait_for_input_read(_waiting(tmp_path, _Driver([earlier, {**read, "numInputRows": 0}])), 0.5)
    assert waited["attempt_read_input"] is False and waited["waited_for_attempt"] == 2 and waited["waited_s"] >= 0.5
    stopped = wait_for_input_read(_waiting(tmp_path, _Driver([], stops_after=2)), 30.0)  # the driver stopped
    assert stopped["attempt_read_input"] is False and stopped["waited_s"] < 5
