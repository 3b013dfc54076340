"""The scenario runner: workload + connector + fault schedule + checkers + observer -> a RunResult.

A :class:`Scenario` is data. :func:`run_scenario` creates the input and output
topics, starts the observer on the output, starts the connector's query in a
:class:`~streamcert.harness.run.driver.DriverProcess`, loads the workload, carries out the
schedule (each fault started and stopped at its time, recorded in the
history), waits until every acknowledged record is visible (or a quiet
timeout), then runs the checkers and the metrics. The result is saved as
``results.json`` even when the run is interrupted or fails, marked incomplete.
"""

from __future__ import annotations

import json
import platform
import threading
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streamcert.harness.verify.checkers import combined_valid, exactly_once_checkers, run_checks
from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.executor import executor_fault_for
from streamcert.harness.faults.nemeses import DriverKillFault, DriverPointFault, Fault, RescaleFault, TaskPointFault, fault_for
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic
from streamcert.harness.verify.metrics import summarize
from streamcert.harness.run.observers.kafka import KafkaObserver
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec, load_topic

__all__ = ["SCHEMA_VERSION", "Scenario", "RunResult", "run_scenario"]

SCHEMA_VERSION = 1


@dataclass
class Scenario:
    """What to run. The connector's builder gets params plus input_topic, output_topic, bootstrap, checkpoint
    and fault_trigger_dir (for :func:`streamcert.harness.faults.executor.failure_point`)."""

    name: str
    builder: str
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    schedule: list[FaultSpec] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    master: str = "local[2,3]"
    output_partitions: int = 1
    quiet_timeout_s: float = 60.0
    #: "bulk" (as fast as the broker takes it) or "open_loop" (locust at workload.rate for load_duration_s)
    load: str = "bulk"
    load_duration_s: float = 10.0
    load_users: int = 2

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schedule"] = [spec.as_dict() for spec in self.schedule]
        return data


@dataclass
class RunResult:
    scenario: dict[str, Any]
    seed: int
    complete: bool = False
    valid: bool | str = "unknown"
    checks: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    ledger_counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    machine: dict[str, Any] = field(default_factory=lambda: {
        "platform": platform.platform(), "python": platform.python_version(), "processor": platform.machine()})

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, default=str))
        return path


def run_scenario(env: Any, scenario: Scenario, workdir: Path) -> RunResult:
    """Run ``scenario`` on the started environment ``env``; always writes ``workdir/results.json``."""
    workdir = Path(workdir)
    result = RunResult(scenario=scenario.as_dict(), seed=scenario.workload.seed, started_at=time.time())
    history = History()
    suffix = uuid.uuid4().hex[:8]
    bootstrap = env.endpoints.bootstrap_servers
    input_topic, output_topic = f"{scenario.name}-in-{suffix}", f"{scenario.name}-out-{suffix}"
    driver = observer = None
    faults: list[Fault] = []
    try:
        create_topic(bootstrap, input_topic, scenario.workload.partitions)
        create_topic(bootstrap, output_topic, scenario.output_partitions)
        observer = KafkaObserver(bootstrap, output_topic)
        observer.start()
        params = {**scenario.params, "input_topic": input_topic, "output_topic": output_topic,
                  "bootstrap": bootstrap, "fault_trigger_dir": str(workdir / "triggers")}
        driver = DriverProcess(QuerySpec(scenario.builder, str(workdir / "checkpoint"), params, scenario.master),
                               workdir / "driver", run_token=getattr(env, "run_token", ""))
        driver.start()
        history.record("driver-start", attempt=driver.attempt)
        timers = _schedule(scenario.schedule, env, driver, history, faults, input_topic, workdir / "triggers")
        ledger = _load(scenario, bootstrap, input_topic, workdir, result)
        history.record("load-done", **ledger.counts())
        result.ledger_counts = ledger.counts()
        for timer in timers:
            timer.join()
        expected = set(ledger.frame.loc[ledger.frame["status"] == "acked", "id"])
        _wait_until_seen(observer, expected, scenario.quiet_timeout_s)
        history.record("quiesced", seen=observer.count())
        output = observer.frame()
        results = run_checks(exactly_once_checkers(), ledger.for_checkers(), output)
        result.checks = [check.to_dict() for check in results]
        result.valid = combined_valid(results)
        result.metrics.update(summarize(output, ledger.frame, history.events(), history_origin(history)))
        if observer.error:
            result.error = f"observer: {observer.error}"
        result.complete = True
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        if not isinstance(exc, Exception):
            raise
    finally:
        for fault in faults:
            _safely(fault.stop)
        if driver is not None:
            _safely(driver.stop)
        if observer is not None:
            _safely(observer.stop)
        result.history = history.events()
        result.duration_s = round(time.time() - result.started_at, 3)
        result.save(workdir / "results.json")
    return result


def _load(scenario: Scenario, bootstrap: str, topic: str, workdir: Path, result: RunResult):
    if scenario.load == "bulk":
        return load_topic(bootstrap, topic, scenario.workload)
    if scenario.load != "open_loop":
        raise ConfigurationError(f"Scenario load {scenario.load!r} is not known.", hint="Use bulk or open_loop.")
    from streamcert.harness.run.load import run_open_loop

    loaded = run_open_loop(bootstrap, topic, scenario.workload, scenario.load_duration_s, scenario.load_users,
                           workdir / "load")
    result.metrics["load"] = loaded.to_dict()
    return loaded.ledger


def history_origin(history: History) -> float:
    events = history.events()
    return events[0]["time"] if events else time.time()


def _fault(spec: FaultSpec, env: Any, driver: DriverProcess, history: History, topic: str,
           trigger_dir: Path) -> Fault:
    driver_faults = {"driver_kill": DriverKillFault, "driver_kill_at": DriverPointFault, "rescale": RescaleFault,
                     "task_fail_at": TaskPointFault}
    if spec.fault in driver_faults:
        return driver_faults[spec.fault](spec, driver, history)
    if spec.target == "executor":
        return executor_fault_for(spec, driver, history, trigger_dir=trigger_dir)
    return fault_for(spec, env, history, topic=topic)


def _schedule(schedule: list[FaultSpec], env: Any, driver: DriverProcess, history: History,
              faults: list[Fault], topic: str, trigger_dir: Path) -> list[threading.Thread]:
    """Start one thread per fault: wait until its time, start it, hold it, stop it."""
    began = time.monotonic()
    threads = []
    for spec in schedule:
        fault = _fault(spec, env, driver, history, topic, trigger_dir)
        faults.append(fault)

        def carry_out(fault: Fault = fault, spec: FaultSpec = spec) -> None:
            time.sleep(max(0.0, began + spec.at_s - time.monotonic()))
            try:
                fault.start()
                time.sleep(spec.duration_s)
            except Exception as exc:  # recorded; the run goes on and the checkers judge the outcome
                history.record("fault-error", fault=spec.fault, error=f"{type(exc).__name__}: {exc}")
            finally:
                _safely(fault.stop)

        thread = threading.Thread(target=carry_out, name=f"fault-{spec.fault}", daemon=True)
        thread.start()
        threads.append(thread)
    return threads


def _wait_until_seen(observer: KafkaObserver, expected: set[int], timeout: float) -> None:
    """Wait until every expected id was seen, or no new delivery arrived for ``timeout`` seconds."""
    last_count, last_change = -1, time.monotonic()
    while time.monotonic() - last_change < timeout:
        frame = observer.frame()
        if expected <= set(frame["id"]):
            time.sleep(1.0)  # let late duplicates arrive: they are findings too
            return
        if len(frame) != last_count:
            last_count, last_change = len(frame), time.monotonic()
        time.sleep(0.2)


def _safely(action) -> None:
    try:
        action()
    except Exception:  # teardown continues; the error, if it matters, shows in the checks
        pass
