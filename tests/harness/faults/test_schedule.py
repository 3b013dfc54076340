"""Fault schedules: replay by seed is byte-identical; malformed schedules get precise errors."""

import json

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.schedule import FAULTS, PROFILES, dumps, generate, parse


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_same_seed_same_bytes(profile):
    assert dumps(generate(42, profile)) == dumps(generate(42, profile))


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
])
def test_malformed_schedules_are_refused_precisely(schedule, needle):
    with pytest.raises(ConfigurationError) as info:
        parse(schedule)
    assert needle in str(info.value) and "Hint:" in str(info.value)


def test_second_entry_errors_name_their_index():
    good = {"fault": "down", "target": "kafka", "at_s": 0, "duration_s": 1}
    with pytest.raises(ConfigurationError, match="entry 1:"):
        parse(json.dumps([good, {**good, "target": "driver"}]))


def test_unknown_profile_and_impossible_durations():
    with pytest.raises(ConfigurationError, match="Unknown fault profile"):
        generate(1, "chaos")
    with pytest.raises(ConfigurationError, match="cannot hold faults"):
        generate(1, "network", duration_s=8, quiet_s=5)


def test_every_fault_has_at_least_one_target():
    assert all(targets for targets, _params in FAULTS.values())


def test_task_fail_points_and_stateful_rescale_parse():
    specs = parse([{"fault": "task_fail_at", "target": "executor", "at_s": 1, "duration_s": 0,
                    "params": {"point": "kafka-2pc.after-stage"}},
                   {"fault": "rescale", "target": "driver", "at_s": 2, "duration_s": 0,
                    "params": {"parallelism": 1, "state_partitions": 2}}])
    assert [s.fault for s in specs] == ["task_fail_at", "rescale"] and specs[1].params["state_partitions"] == 2
    with pytest.raises(ConfigurationError, match="state_partitions"):
        parse([{"fault": "rescale", "target": "driver", "at_s": 0, "duration_s": 0, "params": {"state_partitions": 0}}])
