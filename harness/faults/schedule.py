"""Fault schedules as data: JSON that names each fault, its target, when it starts and for how long.

An entry is ``{"fault": ..., "target": ..., "at_s": ..., "duration_s": ..., "params": {...}}`` (seconds from the
start of the fault timeline), optionally with ``"stream"`` (the direction of a network fault) and ``"after"`` (the
index of an earlier entry: start ``at_s`` after that one stopped). A schedule is a list of entries, or
``{"schema_version": 1, "faults": [...]}`` as :func:`dumps` writes it.

The models that check an entry are generated from the fault registry
(:mod:`streamcert.harness.faults.registry`): one per kind, with its targets, its parameter model and whether it
takes a stream. :func:`parse` turns every problem into a :class:`ConfigurationError` that names the entry and the
field and gives a hint; :func:`generate` makes a schedule from a seed and a profile, and the same seed and profile
give the same bytes. The JSON Schema of a schedule is committed as ``harness/schemas/fault-schedule.schema.json``;
``python -m streamcert.harness.faults.schedule --schema`` prints it (``--write-schema`` rewrites the file).
"""

from __future__ import annotations

import functools
import json
import random
import sys
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model, field_validator,
                      model_validator)

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults import registry
from streamcert.harness.faults.registry import ENDPOINT_NAME, FaultKind, FaultParams
from streamcert.harness.schema_files import SCHEMAS_DIR, render, schema_command

__all__ = ["SCHEMA_VERSION", "SCHEMA_FILE", "STREAMS", "PROFILES", "FaultSpec", "parse", "dumps", "generate",
           "json_schema"]

SCHEMA_VERSION = 1
SCHEMA_FILE = SCHEMAS_DIR / "fault-schedule.schema.json"
#: The directions of a network fault: client to server (upstream) or back (downstream).
STREAMS = ("upstream", "downstream")
_NETWORK = ("latency", "bandwidth", "timeout", "reset_peer", "slow_close", "slicer", "limit_data", "down")

PROFILES: dict[str, tuple[str, ...]] = {
    "none": (),
    "network": _NETWORK,
    "broker": ("broker_kill", "broker_restart", "broker_pause"),
    "driver": ("driver_kill",),
    "mixed": _NETWORK + ("broker_kill", "broker_pause", "driver_kill"),
}

#: Seconds in a schedule: finite, not negative, not a boolean.
_Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]
_FIELDS = ("fault", "target", "at_s", "duration_s", "params", "stream", "after")
_ENTRY_EXAMPLE = '{"fault": "latency", "target": "kafka", "at_s": 5, "duration_s": 10}'


class FaultSpec(BaseModel):
    """One entry of a schedule, checked against its kind's model when it is made (a ConfigurationError if wrong).

    Built positionally as before, ``FaultSpec("latency", "kafka", 5.0, 10.0, {"latency": 100}, "upstream")``, or
    by :func:`parse`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    fault: str
    target: str
    at_s: float
    duration_s: float
    params: dict[str, Any] = Field(default_factory=dict)
    stream: str = "downstream"
    #: Index of an earlier entry: this one starts ``at_s`` seconds after that one stopped.
    after: int | None = None

    def __init__(self, fault: str, target: str, at_s: float, duration_s: float, params: dict[str, Any] | None = None,
                 stream: str = "downstream", after: int | None = None) -> None:
        super().__init__(fault=fault, target=target, at_s=at_s, duration_s=duration_s,
                         params={} if params is None else params, stream=stream, after=after)

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, data: Any) -> Any:
        """Check the entry against its kind's model; runs on every construction and ``model_validate``."""
        return _checked_entry(data, "Fault spec")

    def typed_params(self) -> FaultParams:
        """The parameters as the kind's model (defaults filled in); what a Fault reads."""
        return registry.kind(self.fault).params.model_validate(self.params)

    def as_dict(self) -> dict[str, Any]:
        """The entry as JSON data; ``after`` only when set, so schedules without it keep their bytes."""
        data = self.model_dump()
        if data["after"] is None:
            del data["after"]
        return data


# -- the models generated from the registry ----------------------------------------------------

def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _target_type(kind: FaultKind) -> Any:
    """The kind's targets; for a kind that acts on a connector's external system, also any name of one."""
    if not kind.external:
        return Literal[kind.targets]
    return Literal[kind.targets] | Annotated[str, Field(pattern=f"^{ENDPOINT_NAME.pattern}$")]


def _entry_model(kind: FaultKind) -> type[BaseModel]:
    streams = STREAMS if kind.stream else ("downstream",)
    # a kind with a required parameter needs params; the others default to none given
    required = any(info.is_required() for info in kind.params.model_fields.values())
    params = Field(description="The kind's parameters.") if required else Field(default_factory=kind.params)
    return create_model(
        f"{_camel(kind.name)}Entry",
        __config__=ConfigDict(extra="forbid", strict=True, title=f"{kind.name} fault"),
        __doc__=(kind.fault_class.__doc__ or kind.name).strip().split("\n")[0],
        fault=(Literal[kind.name], ...),
        target=(_target_type(kind), ...),
        at_s=(_Seconds, Field(description="When the fault starts, in seconds from the start of the timeline "
                                          "(or from the stop of entry `after`).")),
        duration_s=(_Seconds, Field(description="How long the fault lasts before it is healed, in seconds.")),
        params=(kind.params, params),
        stream=(Literal[streams], Field("downstream", description="The direction of a network fault.")),
        after=(int | None, Field(None, ge=0, description="Index of an earlier entry: start `at_s` seconds after "
                                                         "that entry stopped.")),
        __validators__={"target_is_external": field_validator("target")(_external_of(kind))} if kind.external else None,
    )


def _external_of(kind: FaultKind) -> Any:
    """A check that an external system's or endpoint's name is not one of the stack's other targets (``driver``,
    ``executor``...): a fault that names one is a mistake, not an external target."""
    def check(target: str) -> str:
        if target not in kind.targets and target in registry.stack_targets():
            raise ValueError(f"{target!r} is not a connector's {kind.external}")
        return target

    return check


@functools.lru_cache(maxsize=4)
def _entry_union(kinds: tuple[FaultKind, ...]) -> Any:
    """One entry model per kind, as a union discriminated by ``fault``; cached per registry contents."""
    entries = tuple(_entry_model(kind) for kind in kinds)
    return Annotated[Union[entries], Field(discriminator="fault")]  # Union[...]: the members are a runtime tuple


@functools.lru_cache(maxsize=4)
def _entry_adapter(kinds: tuple[FaultKind, ...]) -> TypeAdapter:
    return TypeAdapter(_entry_union(kinds))


def _registered() -> tuple[FaultKind, ...]:
    return tuple(registry.kinds().values())


# -- checking an entry: pydantic's errors, said the way a schedule's author needs them -------------

def _fail(where: str, problem: str, hint: str) -> ConfigurationError:
    return ConfigurationError(f"{where}: {problem}.", hint=hint)


def _checked_entry(raw: Any, where: str) -> dict[str, Any]:
    """``raw`` checked by its kind's model, as FaultSpec fields; a ConfigurationError saying what is wrong."""
    if isinstance(raw, FaultSpec):
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        raise _fail(where, f"expected an object, got {type(raw).__name__}", f"Each entry looks like {_ENTRY_EXAMPLE}.")
    try:
        entry = _entry_adapter(_registered()).validate_python(raw)
    except ValidationError as exc:
        problems = _explain(exc.errors(), raw)
        hints = list(dict.fromkeys(hint for _problem, hint in problems))
        raise _fail(where, "; ".join(problem for problem, _hint in problems), " ".join(hints)) from None
    return {"fault": entry.fault, "target": entry.target, "at_s": float(entry.at_s),
            "duration_s": float(entry.duration_s), "params": dict(raw.get("params") or {}), "stream": entry.stream,
            "after": entry.after}


def _explain(errors: list[dict[str, Any]], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """(problem, hint) for pydantic's errors of one entry, unknown fields first, then in field order."""
    unknown = sorted(str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 2)
    problems = []
    if unknown:
        problems.append((f"unknown field(s) {unknown}", f"Fields are {', '.join(_FIELDS)}."))
    rest = [e for e in errors if not (e["type"] == "extra_forbidden" and len(e["loc"]) == 2)]
    rest.sort(key=lambda e: _FIELDS.index(e["loc"][1]) if len(e["loc"]) > 1 and e["loc"][1] in _FIELDS else -1)
    for error in rest:
        problems.append(_explain_one(error, raw))
    return list(dict.fromkeys(problems))


def _explain_one(error: dict[str, Any], raw: dict[str, Any]) -> tuple[str, str]:
    loc, fault = error["loc"], raw.get("fault")
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"unknown fault {fault!r}", f"Use one of: {', '.join(registry.kinds())}."
    field = loc[1] if len(loc) > 1 else None
    kind = registry.kinds().get(fault) if isinstance(fault, str) else None
    if field == "target" and kind is not None:
        return (f"fault {fault!r} cannot target {raw.get('target')!r}",
                f"Targets for {fault}: {kind.targets_text()}.")
    if field in ("at_s", "duration_s"):
        return (f"{field} must be a number >= 0 (seconds, finite), got {raw.get(field)!r}",
                "at_s is when the fault starts after the run begins; duration_s how long it lasts.")
    if field == "params" and kind is not None:
        return _explain_param(error, raw, kind)
    if field == "stream":
        return (f"stream {raw.get('stream')!r} is not valid for {fault!r}",
                "Network faults take upstream (client to server) or downstream; others take no stream.")
    if field == "after":
        return (f"after must be the index of an earlier entry, got {raw.get('after')!r}",
                "after names an entry before this one (0 is the first).")
    where = ".".join(str(part) for part in loc[1:]) or "entry"
    return f"{where}: {error['msg']}", f"See {SCHEMA_FILE.name} for the format of a schedule."


def _explain_param(error: dict[str, Any], raw: dict[str, Any], kind: FaultKind) -> tuple[str, str]:
    fault, loc = kind.name, error["loc"]
    takes = f"{fault} takes: {_signature(kind.params)}."
    if len(loc) == 2 and error["type"] == "missing":
        return f"fault {fault!r} needs params", takes
    if len(loc) == 2 and error["type"] == "value_error":  # the kind's own check of its parameters together
        return f"params: {str(error['msg']).removeprefix('Value error, ')}", takes
    if len(loc) == 2:
        return f"params must be an object, got {type(raw.get('params')).__name__}", takes
    name = str(loc[2])
    if error["type"] == "extra_forbidden":
        return f"fault {fault!r} has no parameter {name!r}", takes
    if error["type"] == "missing":
        return f"fault {fault!r} needs parameter {name!r}", takes
    return f"parameter {name}={raw['params'].get(name)!r} must be {_expected(kind.params, name)}", takes


def _constraint(model: type[FaultParams], name: str, constraint: str) -> Any:
    """A bound of a parameter's field (``ge``, ``pattern``), as pydantic keeps it in the field's metadata."""
    metadata = model.model_fields[name].metadata
    return next((getattr(m, constraint) for m in metadata if getattr(m, constraint, None) is not None), None)


def _expected(model: type[FaultParams], name: str) -> str:
    annotation = model.model_fields[name].annotation
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(map(str, get_args(annotation)))
    if annotation is str:
        pattern = _constraint(model, name, "pattern")
        return "a non-empty string" + (f" matching {pattern}" if pattern else "")
    signs = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
    bounds = [f"{sign} {_constraint(model, name, bound)}" for bound, sign in signs
              if _constraint(model, name, bound) is not None]
    return f"a {getattr(annotation, '__name__', annotation)}" + (f" {' and '.join(bounds)}" if bounds else "")


def _signature(model: type[FaultParams]) -> str:
    """``latency: int >= 0, milliseconds ...; jitter: ...``: what a kind's parameters are, for hints."""
    if not model.model_fields:
        return "no parameters"
    parts = []
    for name, info in model.model_fields.items():
        required = ", required" if info.is_required() else ""
        described = f", {info.description}" if info.description else ""
        parts.append(f"{name}: {_expected(model, name).removeprefix('a ')}{required}{described}")
    return "; ".join(parts)


# -- schedules ---------------------------------------------------------------------------------

def _entries(data: Any) -> list[Any]:
    """The list of entries in decoded schedule data (a bare list, or the document :func:`dumps` writes)."""
    if isinstance(data, dict) and "faults" in data:
        unknown = sorted(set(data) - {"schema_version", "faults"})
        if unknown:
            raise _fail("Fault schedule", f"unknown field(s) {unknown} next to faults",
                        'A schedule document is {"schema_version": 1, "faults": [...]}.')
        if data.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise _fail("Fault schedule", f"schema_version {data['schema_version']!r} is not supported",
                        f"This streamcert reads schema_version {SCHEMA_VERSION}.")
        data = data["faults"]
    if not isinstance(data, list):
        raise _fail("Fault schedule", f"expected a list of entries, got {type(data).__name__}",
                    'Write [{"fault": ..., "target": ..., "at_s": ..., "duration_s": ...}, ...].')
    return data


def _spec(index: int, raw: Any) -> FaultSpec:
    where = f"Fault schedule entry {index}"
    spec = FaultSpec(**_checked_entry(raw, where))
    if spec.after is not None and spec.after >= index:
        raise _fail(where, f"after={spec.after} does not name an earlier entry",
                    "after is the index of an entry before this one (0 is the first)."
                    if index else "The first entry cannot start after another one; drop after.")
    return spec


def parse(text: str | bytes | list | dict) -> list[FaultSpec]:
    """A schedule from JSON text (or already-decoded data), checked field by field."""
    if isinstance(text, (str, bytes)):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _fail("Fault schedule", f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                        "A schedule is a JSON list of fault entries.") from None
    else:
        data = text
    return [_spec(index, raw) for index, raw in enumerate(_entries(data))]


def dumps(schedule: list[FaultSpec]) -> str:
    """Canonical JSON: sorted keys, fixed separators; the same schedule gives the same bytes."""
    return json.dumps({"schema_version": SCHEMA_VERSION, "faults": [spec.as_dict() for spec in schedule]},
                      sort_keys=True, separators=(",", ":"))


def generate(seed: int, profile: str, duration_s: float = 60.0, faults: int = 3,
             quiet_s: float = 5.0) -> list[FaultSpec]:
    """A schedule of ``faults`` non-overlapping faults drawn from ``profile`` within ``duration_s``.

    The first and last ``quiet_s`` seconds stay fault-free (a baseline and a recovery window). The order of the
    rng's calls is what makes a seed replay byte for byte: kind, start, length, stream, target, parameters.
    """
    if profile not in PROFILES:
        raise ConfigurationError(f"Unknown fault profile {profile!r}.", hint=f"Use one of: {', '.join(PROFILES)}.")
    if duration_s <= 2 * quiet_s or faults < 0:
        raise ConfigurationError(f"A {duration_s}s run cannot hold faults after {quiet_s}s quiet at each end.",
                                 hint="Make the run longer or the quiet time shorter.")
    pool = PROFILES[profile]
    if not pool or faults == 0:
        return []
    for name in pool:
        if registry.kind(name).random_params is None:
            raise ConfigurationError(f"Fault profile {profile!r} includes {name!r}, whose parameters a generator "
                                     "cannot choose.", hint=f"Write {name} entries in a schedule by hand.")
    rng = random.Random(f"{seed}:{profile}")
    slot = (duration_s - 2 * quiet_s) / faults
    schedule = []
    for index in range(faults):
        kind = registry.kind(rng.choice(pool))
        start = quiet_s + index * slot + rng.uniform(0, slot * 0.3)
        length = rng.uniform(slot * 0.2, slot * 0.6)
        stream = rng.choice(STREAMS) if kind.stream else "downstream"
        target = rng.choice(kind.targets)
        params = kind.random_params(rng)
        schedule.append(FaultSpec(kind.name, target, round(start, 3), round(length, 3), params, stream))
    return schedule


# -- the JSON Schema -----------------------------------------------------------------------------

def json_schema() -> str:
    """The JSON Schema of a schedule (the document or a bare list), as committed in :data:`SCHEMA_FILE`."""
    entry = _entry_union(_registered())
    document = create_model("FaultSchedule", __config__=ConfigDict(extra="forbid", strict=True),
                            __doc__="A fault schedule as streamcert writes it.",
                            schema_version=(Literal[SCHEMA_VERSION], SCHEMA_VERSION),
                            faults=(list[entry], ...))
    schema = TypeAdapter(Union[document, list[entry]]).json_schema()
    schema.update({"title": "Fault schedule", "description": "Faults to inject in a streamcert run: a list of "
                                                             'entries, or {"schema_version": 1, "faults": [...]}.'})
    return render(schema, SCHEMA_FILE.name)


def main(argv: list[str]) -> int:
    """``--schema`` prints the JSON Schema; ``--write-schema`` rewrites :data:`SCHEMA_FILE`."""
    return schema_command(argv, json_schema, SCHEMA_FILE, "streamcert.harness.faults.schedule")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
