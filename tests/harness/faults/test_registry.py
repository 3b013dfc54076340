"""The registry: every kind of fault is registered once, with its targets and bounded parameters; build_fault is
the one dispatch; a fault module dropped into the package is found without editing anything else."""

from __future__ import annotations

import inspect
import random
import sys
import textwrap
from types import SimpleNamespace

import pytest

import streamcert.harness.faults as faults_package
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults import registry
from streamcert.harness.faults.base import Fault, FaultContext
from streamcert.harness.faults.driver import DriverKillFault, RescaleFault
from streamcert.harness.faults.executor import ExecutorKill, PythonWorkerKill, TaskException
from streamcert.harness.faults.network import NetworkFault
from streamcert.harness.faults.points import DriverPointFault, TaskPointFault
from streamcert.harness.faults.registry import build_fault, fault_kind, kind, kinds
from streamcert.harness.faults.schedule import PROFILES, FaultSpec, parse
from streamcert.harness.faults.servers import BrokerFault, DatabaseFault
from streamcert.harness.faults.topics import AddPartitionsFault
from streamcert.harness.run.history import History

#: The FAULTS table of streamcert.harness.faults.schedule before the registry: fault -> (targets, param ->
#: (type, minimum)); for strings the minimum is a length.
OLD_TABLE = {
    "latency": (("kafka", "postgres"), {"latency": (int, 0), "jitter": (int, 0)}),
    "bandwidth": (("kafka", "postgres"), {"rate": (int, 1)}),
    "timeout": (("kafka", "postgres"), {"timeout": (int, 0)}),
    "reset_peer": (("kafka", "postgres"), {"timeout": (int, 0)}),
    "slow_close": (("kafka", "postgres"), {"delay": (int, 0)}),
    "slicer": (("kafka", "postgres"), {"average_size": (int, 1), "size_variation": (int, 0), "delay": (int, 0)}),
    "limit_data": (("kafka", "postgres"), {"bytes": (int, 1)}),
    "down": (("kafka", "postgres"), {}),
    "broker_kill": (("kafka",), {}),
    "broker_restart": (("kafka",), {}),
    "broker_pause": (("kafka",), {}),
    "database_kill": (("postgres",), {}),
    "driver_kill": (("driver",), {"min_batch": (int, 0), "delay_ms": (int, 0)}),
    "driver_kill_at": (("driver",), {"point": (str, 1), "restart": (bool, None)}),
    "task_fail_at": (("executor",), {"point": (str, 1)}),
    "rescale": (("driver",), {"parallelism": (int, 1), "master": (str, 1), "state_partitions": (int, 1),
                              "after_input_read_s": (float, 0)}),
    "add_partitions": (("kafka",), {"count": (int, 1), "freeze_driver_s": (float, 0),
                       "after_input_read_s": (float, 0)}),
    "python_worker_kill": (("executor",), {}),
    "task_exception": (("executor",), {}),
    "executor_kill": (("executor",), {}),
}
NETWORK = {"latency", "bandwidth", "timeout", "reset_peer", "slow_close", "slicer", "limit_data", "down"}
CLASSES = {**{name: NetworkFault for name in NETWORK}, "broker_kill": BrokerFault, "broker_restart": BrokerFault,
           "broker_pause": BrokerFault, "database_kill": DatabaseFault, "driver_kill": DriverKillFault,
           "driver_kill_at": DriverPointFault, "task_fail_at": TaskPointFault, "rescale": RescaleFault,
           "add_partitions": AddPartitionsFault, "python_worker_kill": PythonWorkerKill,
           "task_exception": TaskException, "executor_kill": ExecutorKill}
#: The smallest valid parameters of each kind that requires some.
REQUIRED = {"driver_kill_at": {"point": "p"}, "task_fail_at": {"point": "p"}, "rescale": {"parallelism": 1},
            "add_partitions": {"count": 2}}


def _bound(model, name: str, kind_of: type):
    constraint = "min_length" if kind_of is str else "ge"
    return next(getattr(m, constraint) for m in model.model_fields[name].metadata
                if getattr(m, constraint, None) is not None)


@pytest.fixture
def full_context(tmp_path) -> FaultContext:
    """A context holding everything a fault may need (constructors only check that it is there)."""
    return FaultContext(environment=SimpleNamespace(), driver=SimpleNamespace(fault_points_dir=tmp_path / "points"),
                        history=History(), input_topic="in", workdir=tmp_path)


@pytest.fixture
def isolated_registry(monkeypatch):
    """Kinds registered by a test are forgotten afterwards."""
    monkeypatch.setattr(registry, "_kinds", dict(registry._kinds))
    monkeypatch.setattr(registry, "_discovered", set(registry._discovered))


@pytest.mark.parametrize("name", sorted(OLD_TABLE))
def test_every_kind_of_the_old_table_is_registered_with_its_targets_and_bounds(name):
    targets, params = OLD_TABLE[name]
    registered = kind(name)
    assert registered.targets == targets
    assert set(registered.params.model_fields) == set(params)
    for param, (kind_of, minimum) in params.items():
        assert registered.params.model_fields[param].annotation is kind_of
        if minimum is not None:  # a flag has no bound
            assert _bound(registered.params, param, kind_of) == minimum
    assert registered.stream is (name in NETWORK)


@pytest.mark.parametrize("name", sorted(OLD_TABLE))
def test_build_fault_returns_the_class_of_each_kind(name, full_context):
    targets, _params = OLD_TABLE[name]
    for target in targets:
        fault = build_fault(FaultSpec(name, target, 0, 1, REQUIRED.get(name, {})), full_context)
        assert type(fault) is CLASSES[name] and fault.spec.target == target and fault.history is full_context.history


def test_every_fault_class_satisfies_the_fault_abc():
    for registered in kinds().values():
        cls = registered.fault_class
        assert issubclass(cls, Fault) and not inspect.isabstract(cls), registered.name
        assert cls._inject is not Fault._inject and cls._heal is not Fault._heal
        assert set(cls.needs) <= {"driver", "environment", "input_topic", "observer", "spark_cluster"}
        assert list(inspect.signature(cls).parameters) == ["spec", "context"]


@pytest.mark.parametrize("seed", range(5))
def test_random_parameters_satisfy_their_kinds_model(seed):
    rng = random.Random(seed)
    for registered in kinds().values():
        if registered.random_params is None:  # only a kind with a required parameter may have no generator
            assert any(info.is_required() for info in registered.params.model_fields.values()), registered.name
        else:
            registered.params.model_validate(registered.random_params(rng))


def test_profiles_name_registered_kinds_that_can_be_generated():
    named = {name for pool in PROFILES.values() for name in pool}
    assert named <= set(kinds()) and all(kind(name).random_params is not None for name in named)


def test_an_unknown_kind_target_or_parameter_is_a_clear_error(full_context):
    with pytest.raises(ConfigurationError, match="no fault kind 'earthquake'") as info:
        kind("earthquake")
    assert "Hint: Use one of: add_partitions," in str(info.value)
    with pytest.raises(ConfigurationError, match="unknown fault 'earthquake'"):
        FaultSpec("earthquake", "kafka", 0, 1)
    with pytest.raises(ConfigurationError, match="cannot target 'driver'"):
        FaultSpec("latency", "driver", 0, 1)
    with pytest.raises(ConfigurationError, match="has no parameter 'latency_ms'"):
        FaultSpec("latency", "kafka", 0, 1, {"latency_ms": 5})
    # a spec that skipped validation still meets build_fault's own check
    unchecked = FaultSpec.model_construct(fault="broker_kill", target="postgres", at_s=0.0, duration_s=1.0, params={},
                                          stream="downstream", after=None)
    with pytest.raises(ConfigurationError, match="'broker_kill' cannot target 'postgres'") as info:
        build_fault(unchecked, full_context)
    assert "Targets for broker_kill: kafka" in str(info.value)


def test_the_decorator_takes_only_fault_classes_and_one_class_per_name(isolated_registry):
    with pytest.raises(TypeError, match="subclass of Fault"):
        fault_kind("not_a_fault", targets=("kafka",))(object)
    with pytest.raises(ValueError, match="at least one target"):
        fault_kind("no_targets", targets=())(NetworkFault)
    with pytest.raises(ValueError, match="registered twice"):
        fault_kind("latency", targets=("kafka",))(BrokerFault)


_DROPPED_IN = '''
    """A fault kind that lives in a module nobody imports: only the registry's discovery can find it."""

    from streamcert.harness.faults.base import Fault
    from streamcert.harness.faults.registry import FaultParams, fault_kind


    class ChaosParams(FaultParams):
        level: int = 1


    @fault_kind("unit_chaos", targets=("kafka",), params=ChaosParams)
    class ChaosFault(Fault):
        def _inject(self):
            return {"level": self.params.level}

        def _heal(self):
            return None
'''


def test_a_fault_module_dropped_into_the_package_is_found_without_editing_anything(
        tmp_path, monkeypatch, isolated_registry):
    module = "unit_chaos_fault"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(_DROPPED_IN))
    monkeypatch.setattr(faults_package, "__path__", [*faults_package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, f"{faults_package.__name__}.{module}", raising=False)
    assert f"{faults_package.__name__}.{module}" not in sys.modules
    try:
        assert kind("unit_chaos").fault_class.__name__ == "ChaosFault"
        [spec] = parse([{"fault": "unit_chaos", "target": "kafka", "at_s": 0, "duration_s": 1,
                         "params": {"level": 3}}])
        history = History()
        fault = build_fault(spec, FaultContext(history=history, workdir=tmp_path))
        fault.start()
        assert history.events("fault-start")[0]["level"] == 3
        with pytest.raises(ConfigurationError, match="cannot target 'postgres'"):
            FaultSpec("unit_chaos", "postgres", 0, 1)
    finally:
        sys.modules.pop(f"{faults_package.__name__}.{module}", None)
