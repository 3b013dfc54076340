"""Fault schedules: replay by seed is byte-identical; malformed schedules get precise errors."""

import hashlib
import json
import math

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults import schedule as schedule_module
from streamcert.harness.faults.registry import ENDPOINT_NAME, kinds
from streamcert.harness.faults.schedule import (
    PROFILES,
    SCHEMA_FILE,
    FaultSpec,
    dumps,
    generate,
    json_schema,
    main,
    parse,
)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_same_seed_same_bytes(profile):
    assert dumps(generate(42, profile)) == dumps(generate(42, profile))


#: sha256 of dumps(generate(seed, profile, faults=n)) as the schedule module wrote them before the fault
#: registry: moving the tables into the registry kept every seed's schedule byte for byte.
GOLDEN = {
    ("broker", 42, 3): "bf32285836eb802dd89391a62fea888b3de869eaaaa04c722a2d3755e8cb9399",
    ("broker", 7, 6): "c9889cb29a3e1b2e803dfc2d3ed0db8551ea590802913615d7c2d25bde927419",
    ("driver", 42, 3): "548df183c826778079ac66f28b677c9d03a4707d006295f80f4aa7df67075e53",
    ("driver", 7, 6): "48e7266f4ea503b94e31f9fd4912587eaff438c1f7ea3c7429c1d756c4265e73",
    ("mixed", 42, 3): "e6e50e98d7639cf88af83503714f2e75d58d1bc0c432482a5f8930fc047eb128",
    ("mixed", 7, 6): "cf2ee89c31d174774cb0dd001a93b986f2cdc49aa341a3a339e4cc9d85ab3858",
    ("network", 42, 3): "a15af7e4a62a389436ff5f3929d91eeb816688ba254a598a7914dda2e1e6c7ec",
    ("network", 7, 6): "448db4669ce28ab2ab9daa76548a849819371883a980a5a6f845a51fae28405c",
    ("none", 42, 3): "692fe655e7c7eafbe0aa0fed37c2f9c1506fd7fb52c720ff95db7423854b9e70",
}


@pytest.mark.parametrize("profile, seed, faults", sorted(GOLDEN))
def test_a_seed_gives_the_same_bytes_as_before_the_registry(profile, seed, faults):
    text = dumps(generate(seed, profile, faults=faults))
    assert hashlib.sha256(text.encode()).hexdigest() == GOLDEN[profile, seed, faults], text


def test_a_known_schedule_reads_as_expected():
    assert dumps(generate(42, "mixed")) == (
        '{"faults":[{"at_s":5.136,"duration_s":9.706,"fault":"limit_data","params":{"bytes":1024},'
        '"stream":"downstream","target":"postgres"},{"at_s":25.621,"duration_s":9.879,"fault":"down","params":{},'
        '"stream":"downstream","target":"postgres"},{"at_s":38.561,"duration_s":8.651,"fault":"slicer",'
        '"params":{"average_size":16,"delay":1,"size_variation":8},"stream":"downstream","target":"kafka"}],'
        '"schema_version":1}')


def test_other_seed_other_schedule_and_the_output_parses_back():
    first, second = generate(1, "mixed", faults=5), generate(2, "mixed", faults=5)
    assert dumps(first) != dumps(second)
    assert parse(dumps(first)) == first


def test_generated_faults_do_not_overlap_and_keep_quiet_ends():
    schedule = generate(7, "network", duration_s=100, faults=6, quiet_s=10)
    assert len(schedule) == 6
    for earlier, later in zip(schedule, schedule[1:], strict=False):
        assert earlier.at_s + earlier.duration_s <= later.at_s
    assert schedule[0].at_s >= 10 and schedule[-1].at_s + schedule[-1].duration_s <= 90
    assert all(spec.fault in PROFILES["network"] for spec in schedule)


@pytest.mark.parametrize("schedule, needle", [
    ("{not json", "not valid JSON (line 1"),
    ('{"a": 1}', "expected a list of entries"),
    ('[1]', "entry 0: expected an object"),
    ('[{"fault": "earthquake", "target": "kafka", "at_s": 1, "duration_s": 1}]', "unknown fault 'earthquake'"),
    ('[{"fault": "broker_kill", "target": "postgres", "at_s": 1, "duration_s": 1}]',
     "fault 'broker_kill' cannot target 'postgres'"),
    ('[{"fault": "latency", "target": "kafka", "at_s": -1, "duration_s": 1}]', "at_s must be a number >= 0"),
    ('[{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": "long"}]', "duration_s must be a number"),
    ('[{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": 1, "params": {"latency_ms": 5}}]',
     "has no parameter 'latency_ms'"),
    ('[{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": 1, "params": {"latency": "5"}}]',
     "parameter latency='5' must be a int"),
    ('[{"fault": "broker_pause", "target": "kafka", "at_s": 1, "duration_s": 1, "stream": "upstream"}]',
     "stream 'upstream' is not valid"),
    ('[{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": 1, "when": 3}]', "unknown field(s) ['when']"),
    # numbers are finite and never booleans
    ('[{"fault": "latency", "target": "kafka", "at_s": NaN, "duration_s": 1}]', "at_s must be a number >= 0"),
    ('[{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": Infinity}]', "duration_s must be a number"),
    ('[{"fault": "latency", "target": "kafka", "at_s": true, "duration_s": 1}]', "got True"),
    ('[{"fault": "latency", "target": "kafka", "at_s": 1, "duration_s": 1, "params": {"latency": false}}]',
     "parameter latency=False must be a int >= 0"),
    ('[{"fault": "bandwidth", "target": "kafka", "at_s": 1, "duration_s": 1, "params": {"rate": 0}}]',
     "parameter rate=0 must be a int >= 1"),
    ('[{"fault": "bandwidth", "target": "kafka", "at_s": 1, "duration_s": 1, "params": {"rate": 1.5}}]',
     "parameter rate=1.5 must be a int >= 1"),
    ('[{"fault": "down", "target": "kafka", "at_s": 1, "duration_s": 1, "params": [1]}]',
     "params must be an object, got list"),
    ('[{"fault": "driver_kill_at", "target": "driver", "at_s": 1, "duration_s": 1}]', "'driver_kill_at' needs params"),
    ('[{"fault": "driver_kill_at", "target": "driver", "at_s": 1, "duration_s": 1, "params": {"point": "../x"}}]',
     "parameter point='../x' must be a non-empty string matching"),
    ('[{"fault": "down", "target": "kafka", "at_s": 1, "duration_s": 1, "after": 0}]',
     "after=0 does not name an earlier entry"),
    ('[{"fault": "down", "target": "kafka", "at_s": 1, "duration_s": 1, "after": -1}]',
     "after must be the index of an earlier entry"),
    ('{"schema_version": 2, "faults": []}', "schema_version 2 is not supported"),
    ('{"schema_version": 1, "faults": [], "seed": 4}', "unknown field(s) ['seed']"),
])
def test_malformed_schedules_are_refused_precisely(schedule, needle):
    with pytest.raises(ConfigurationError) as info:
        parse(schedule)
    assert needle in str(info.value) and "Hint:" in str(info.value)


def test_second_entry_errors_name_their_index():
    good = {"fault": "down", "target": "kafka", "at_s": 0, "duration_s": 1}
    with pytest.raises(ConfigurationError, match="entry 1:"):
        parse(json.dumps([good, {**good, "target": "driver"}]))


def test_every_problem_of_an_entry_is_named_with_the_kinds_parameters_as_hint():
    with pytest.raises(ConfigurationError) as info:
        parse([{"fault": "slicer", "target": "kafka", "at_s": -1, "duration_s": 1,
                "params": {"average_size": 0, "pieces": 2}}])
    message = str(info.value)
    assert "at_s must be a number >= 0" in message and "parameter average_size=0 must be a int >= 1" in message
    assert "has no parameter 'pieces'" in message
    assert "slicer takes: average_size: int >= 1, bytes per slice; size_variation: int >= 0" in message


@pytest.mark.parametrize("raw", [None, "", "[]x", "[null]", '[{"fault": 5}]', '[{"fault": "latency"}]',
                                 '[{"fault": "rescale", "target": "driver", "at_s": 0, "duration_s": 0, '
                                 '"params": {"parallelism": [1]}}]', '[{"fault": [], "target": {}}]', 7, {"faults": 3}])
def test_no_malformed_schedule_escapes_as_anything_but_a_configuration_error(raw):
    with pytest.raises(ConfigurationError) as info:
        parse(raw)
    assert "Fault schedule" in str(info.value) and "Hint:" in str(info.value)


def test_unknown_profile_and_impossible_durations():
    with pytest.raises(ConfigurationError, match="Unknown fault profile"):
        generate(1, "chaos")
    with pytest.raises(ConfigurationError, match="cannot hold faults"):
        generate(1, "network", duration_s=8, quiet_s=5)


def test_a_profile_with_a_kind_no_generator_can_fill_in_is_refused(monkeypatch):
    monkeypatch.setitem(PROFILES, "points", ("driver_kill_at",))
    with pytest.raises(ConfigurationError, match="'driver_kill_at', whose parameters a generator cannot choose"):
        generate(1, "points")


def test_every_fault_has_at_least_one_target():
    assert all(registered.targets for registered in kinds().values())


def test_task_fail_points_and_stateful_rescale_parse():
    specs = parse([{"fault": "task_fail_at", "target": "executor", "at_s": 1, "duration_s": 0,
                    "params": {"point": "kafka-2pc.after-stage"}},
                   {"fault": "rescale", "target": "driver", "at_s": 2, "duration_s": 0,
                    "params": {"parallelism": 1, "state_partitions": 2}}])
    assert [s.fault for s in specs] == ["task_fail_at", "rescale"] and specs[1].params["state_partitions"] == 2
    with pytest.raises(ConfigurationError, match="state_partitions"):
        parse([{"fault": "rescale", "target": "driver", "at_s": 0, "duration_s": 0, "params": {"state_partitions": 0}}])


def test_a_chained_entry_names_an_earlier_one_and_keeps_it_through_dumps():
    raw = [{"fault": "driver_kill_at", "target": "driver", "at_s": 0, "duration_s": 0,
            "params": {"point": "kafka-2pc.after-stage"}},
           {"fault": "driver_kill_at", "target": "driver", "at_s": 1.5, "duration_s": 0,
            "params": {"point": "kafka-2pc.before-commit"}, "after": 0}]
    specs = parse(raw)
    assert [s.after for s in specs] == [None, 0]
    assert parse(dumps(specs)) == specs
    assert "after" not in json.loads(dumps(specs))["faults"][0] and json.loads(dumps(specs))["faults"][1]["after"] == 0


def test_a_spec_made_in_python_is_checked_the_same_way():
    spec = FaultSpec("latency", "kafka", 1, 2, {"latency": 5}, "upstream")
    assert (spec.at_s, spec.duration_s) == (1.0, 2.0) and isinstance(spec.at_s, float)
    assert spec == parse([spec.as_dict()])[0]
    with pytest.raises(ConfigurationError, match="Fault spec: at_s must be a number >= 0"):
        FaultSpec("latency", "kafka", math.inf, 1)
    with pytest.raises(ConfigurationError, match="Fault spec: fault 'broker_kill' cannot target 'driver'"):
        FaultSpec("broker_kill", "driver", 0, 1)


def test_the_committed_schema_is_the_one_the_models_generate():
    assert SCHEMA_FILE.read_text() == json_schema(), (
        "harness/schemas/fault-schedule.schema.json is stale: run "
        "python -m streamcert.harness.faults.schedule --write-schema")


def test_the_schema_names_every_kind_with_its_targets_and_parameters():
    schema = json.loads(json_schema())
    defs = schema["$defs"]
    mapping = defs["FaultSchedule"]["properties"]["faults"]["items"]["discriminator"]["mapping"]
    assert set(mapping) == set(kinds())
    latency = defs["LatencyEntry"]["properties"]
    links, endpoint = latency["target"]["anyOf"]
    assert links["enum"] == ["kafka", "postgres"] and latency["stream"]["enum"] == ["upstream", "downstream"]
    assert endpoint["pattern"] == f"^{ENDPOINT_NAME.pattern}$"  # or an external system's endpoint, by name
    assert defs["LatencyParams"]["properties"]["latency"]["minimum"] == 0
    assert defs["BandwidthParams"]["properties"]["rate"]["minimum"] == 1
    assert defs["RescaleEntry"]["required"] == ["fault", "target", "at_s", "duration_s", "params"]
    assert defs["LatencyEntry"]["additionalProperties"] is False


def test_the_schema_command_prints_the_schema(capsys):
    assert main(["--schema"]) == 0
    assert capsys.readouterr().out == json_schema()
    assert main(["--nonsense"]) == 2


def test_the_schema_tracks_the_registry(monkeypatch):
    """Generated from the models, so a kind the registry gains is in the schema; cached per registry contents."""
    before = json_schema()
    monkeypatch.setattr(schedule_module, "_registered", lambda: tuple(kinds()[name] for name in ("down", "latency")))
    smaller = json.loads(json_schema())
    assert smaller != json.loads(before)
    assert set(smaller["$defs"]["FaultSchedule"]["properties"]["faults"]["items"]["discriminator"]["mapping"]) == {
        "down", "latency"}


def test_a_network_fault_may_name_an_external_systems_endpoint_but_not_another_kinds_target():
    [entry] = parse([{"fault": "latency", "target": "ledger", "at_s": 0, "duration_s": 1,
                      "params": {"latency": 100}}])
    assert entry.target == "ledger"
    for wrong in ("driver", "executor", "9lives"):
        with pytest.raises(ConfigurationError, match="cannot target"):
            parse([{"fault": "down", "target": wrong, "at_s": 0, "duration_s": 1}])
    with pytest.raises(ConfigurationError, match="cannot target"):
        parse([{"fault": "driver_kill", "target": "ledger", "at_s": 0, "duration_s": 1}])
