"""Fault schedules as data: JSON that names each fault, its target, when it starts and for how long.

An entry is ``{"fault": ..., "target": ..., "at_s": ..., "duration_s": ..., "params": {...}}``
(seconds from the start of the run). :func:`parse` checks every field and
says precisely what is wrong and where; :func:`generate` makes a schedule from
a seed and a profile, and the same seed and profile give the same bytes.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from streamcert.harness.errors import ConfigurationError

__all__ = ["FAULTS", "PROFILES", "FaultSpec", "parse", "dumps", "generate"]

#: fault -> (allowed targets, parameter -> (type, minimum))
FAULTS: dict[str, tuple[tuple[str, ...], dict[str, tuple[type, float]]]] = {
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
    "driver_kill_at": (("driver",), {"point": (str, 1)}),
    "task_fail_at": (("executor",), {"point": (str, 1)}),
    "rescale": (("driver",), {"parallelism": (int, 1), "master": (str, 1), "state_partitions": (int, 1)}),
    "add_partitions": (("kafka",), {"count": (int, 1)}),
    "python_worker_kill": (("executor",), {}),
    "task_exception": (("executor",), {}),
    "executor_kill": (("executor",), {}),
}
_NETWORK = ("latency", "bandwidth", "timeout", "reset_peer", "slow_close", "slicer", "limit_data", "down")
#: Network faults may say which direction they affect.
_STREAMS = ("upstream", "downstream")

PROFILES: dict[str, tuple[str, ...]] = {
    "none": (),
    "network": _NETWORK,
    "broker": ("broker_kill", "broker_restart", "broker_pause"),
    "driver": ("driver_kill",),
    "mixed": _NETWORK + ("broker_kill", "broker_pause", "driver_kill"),
}


@dataclass(frozen=True)
class FaultSpec:
    fault: str
    target: str
    at_s: float
    duration_s: float
    params: dict[str, Any] = field(default_factory=dict)
    stream: str = "downstream"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fail(where: str, problem: str, hint: str) -> ConfigurationError:
    return ConfigurationError(f"Fault schedule {where}: {problem}.", hint=hint)


def _entry(index: int, raw: Any) -> FaultSpec:
    where = f"entry {index}"
    if not isinstance(raw, dict):
        raise _fail(where, f"expected an object, got {type(raw).__name__}",
                    'Each entry looks like {"fault": "latency", "target": "kafka", "at_s": 5, "duration_s": 10}.')
    unknown = set(raw) - {"fault", "target", "at_s", "duration_s", "params", "stream"}
    if unknown:
        raise _fail(where, f"unknown field(s) {sorted(unknown)}",
                    "Fields are fault, target, at_s, duration_s, params, stream.")
    fault = raw.get("fault")
    if fault not in FAULTS:
        raise _fail(where, f"unknown fault {fault!r}", f"Use one of: {', '.join(FAULTS)}.")
    targets, allowed = FAULTS[fault]
    target = raw.get("target")
    if target not in targets:
        raise _fail(where, f"fault {fault!r} cannot target {target!r}", f"Targets for {fault}: {', '.join(targets)}.")
    timing = {}
    for name in ("at_s", "duration_s"):
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _fail(where, f"{name} must be a number >= 0 (seconds), got {value!r}",
                        "at_s is when the fault starts after the run begins; duration_s how long it lasts.")
        timing[name] = float(value)
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise _fail(where, f"params must be an object, got {type(params).__name__}",
                    f"{fault} takes: {', '.join(allowed) or 'no parameters'}.")
    for name, value in params.items():
        if name not in allowed:
            raise _fail(where, f"fault {fault!r} has no parameter {name!r}",
                        f"{fault} takes: {', '.join(allowed) or 'no parameters'}.")
        kind, minimum = allowed[name]
        size = len(value) if kind is str and isinstance(value, str) else value
        if isinstance(value, bool) or not isinstance(value, kind) or size < minimum:
            expected = "a non-empty string" if kind is str else f"a {kind.__name__} >= {minimum}"
            raise _fail(where, f"parameter {name}={value!r} must be {expected}",
                        "Toxiproxy attributes are integers (milliseconds, bytes, KB/s); names are strings.")
    stream = raw.get("stream", "downstream")
    if stream not in _STREAMS or (stream != "downstream" and fault not in _NETWORK):
        raise _fail(where, f"stream {stream!r} is not valid for {fault!r}",
                    "Network faults take upstream (client to server) or downstream; others take no stream.")
    return FaultSpec(fault, target, timing["at_s"], timing["duration_s"], dict(params), stream)


def parse(text: str | bytes | list) -> list[FaultSpec]:
    """A schedule from JSON text (or already-decoded data), checked field by field."""
    if isinstance(text, (str, bytes)):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _fail("", f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                        "A schedule is a JSON list of fault entries.") from None
    else:
        data = text
    if isinstance(data, dict) and "faults" in data:
        data = data["faults"]
    if not isinstance(data, list):
        raise _fail("", f"expected a list of entries, got {type(data).__name__}",
                    'Write [{"fault": ..., "target": ..., "at_s": ..., "duration_s": ...}, ...].')
    return [_entry(index, raw) for index, raw in enumerate(data)]


def dumps(schedule: list[FaultSpec]) -> str:
    """Canonical JSON: sorted keys, fixed separators; the same schedule gives the same bytes."""
    return json.dumps({"schema_version": 1, "faults": [spec.as_dict() for spec in schedule]},
                      sort_keys=True, separators=(",", ":"))


def _random_params(rng: random.Random, fault: str) -> dict[str, Any]:
    choices = {
        "latency": lambda: {"latency": rng.choice([50, 100, 300, 1000]), "jitter": rng.choice([0, 20, 100])},
        "bandwidth": lambda: {"rate": rng.choice([10, 100, 1000])},
        "timeout": lambda: {"timeout": rng.choice([0, 500, 2000])},
        "reset_peer": lambda: {"timeout": rng.choice([0, 500])},
        "slow_close": lambda: {"delay": rng.choice([100, 1000])},
        "slicer": lambda: {"average_size": rng.choice([16, 64]), "size_variation": 8, "delay": rng.choice([1, 10])},
        "limit_data": lambda: {"bytes": rng.choice([1024, 65536])},
    }
    return choices[fault]() if fault in choices else {}


def generate(seed: int, profile: str, duration_s: float = 60.0, faults: int = 3,
             quiet_s: float = 5.0) -> list[FaultSpec]:
    """A schedule of ``faults`` non-overlapping faults drawn from ``profile`` within ``duration_s``.

    The first and last ``quiet_s`` seconds stay fault-free (a baseline and a recovery window).
    """
    if profile not in PROFILES:
        raise ConfigurationError(f"Unknown fault profile {profile!r}.", hint=f"Use one of: {', '.join(PROFILES)}.")
    if duration_s <= 2 * quiet_s or faults < 0:
        raise ConfigurationError(f"A {duration_s}s run cannot hold faults after {quiet_s}s quiet at each end.",
                                 hint="Make the run longer or the quiet time shorter.")
    pool = PROFILES[profile]
    if not pool or faults == 0:
        return []
    rng = random.Random(f"{seed}:{profile}")
    slot = (duration_s - 2 * quiet_s) / faults
    schedule = []
    for index in range(faults):
        fault = rng.choice(pool)
        targets = FAULTS[fault][0]
        start = quiet_s + index * slot + rng.uniform(0, slot * 0.3)
        length = rng.uniform(slot * 0.2, slot * 0.6)
        stream = rng.choice(_STREAMS) if fault in _NETWORK else "downstream"
        schedule.append(FaultSpec(fault, rng.choice(targets), round(start, 3), round(length, 3),
                                  _random_params(rng, fault), stream))
    return schedule
