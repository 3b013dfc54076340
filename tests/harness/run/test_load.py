"""Open-loop load through locust: stats parsing, input validation, and a real run against the broker."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.kafka_clients import create_topic, read_topic
from streamcert.harness.run.load import parse_stats_csv, planned_records, run_open_loop
from streamcert.harness.run.workload import WorkloadSpec, decode_values

_STATS_CSV = """\
Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,\
Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%
kafka,produce,1998,2,3,3.41,0.61,27.9,80.0,399.2,0.4,3,4,4,4,5,6,8,11,27,28,28
,Aggregated,1998,2,3,3.41,0.61,27.9,80.0,399.2,0.4,3,4,4,4,5,6,8,11,27,28,28
"""

_EMPTY_STATS_CSV = """\
Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,\
Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%
,Aggregated,0,0,0,0,0,0,0,0.0,0.0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A
"""


def test_stats_csv_gives_counts_rate_and_latency_percentiles():
    stats = parse_stats_csv(_STATS_CSV)
    assert (stats.requests, stats.failures, stats.achieved_rate) == (1998, 2, 399.2)
    assert stats.latency_ms == {"p50": 3.0, "p95": 6.0, "p99": 11.0, "max": 27.9}


def test_stats_csv_without_requests_has_no_latency_and_without_total_is_refused():
    stats = parse_stats_csv(_EMPTY_STATS_CSV)
    assert (stats.requests, stats.failures) == (0, 0)
    assert stats.latency_ms == {"p50": None, "p95": None, "p99": None, "max": None}
    with pytest.raises(ValueError, match="Aggregated"):
        parse_stats_csv(_STATS_CSV.splitlines()[0] + "\n")


@pytest.mark.parametrize("changes, needle", [
    ({"users": 0}, "users=0"),
    ({"duration_s": 0}, "duration_s=0"),
    ({"duration_s": float("inf")}, "duration_s=inf"),
    ({"spec": WorkloadSpec(rate=None)}, "rate=None"),
    ({"spec": WorkloadSpec(rate=10.0, aborted_fraction=0.1)}, "aborted_fraction=0.1"),
    ({"spec": WorkloadSpec(rate=10.0, event_time_lead_ms=5)}, "event_time_lead_ms=5"),
    ({"spec": WorkloadSpec(rate=10.0, keys=2), "users": 3}, "keys=2"),
    ({"spec": WorkloadSpec(rate=-1.0)}, "rate=-1.0"),
])
def test_bad_parameters_fail_fast_before_locust_starts(changes, needle, tmp_path):
    args = {"bootstrap": "127.0.0.1:1", "topic": "t", "spec": WorkloadSpec(rate=10.0), "duration_s": 1.0,
            "users": 1, "workdir": tmp_path, **changes}
    began = time.monotonic()
    with pytest.raises(ConfigurationError) as info:
        run_open_loop(**args)
    assert needle in str(info.value) and "Hint:" in str(info.value)
    assert time.monotonic() - began < 1.0
    assert not (tmp_path / "params.json").exists()


def test_planned_records_stop_at_total_or_at_the_end_of_the_schedule():
    assert planned_records(WorkloadSpec(total=10_000, rate=400.0), 5.0) == 2000
    assert planned_records(WorkloadSpec(total=300, rate=400.0), 5.0) == 300
    assert planned_records(WorkloadSpec(total=10_000, rate=3.0), 0.5) == 2


@pytest.mark.integration
def test_open_loop_load_reaches_its_rate_and_its_ledger_matches_the_topic(clean_links, tmp_path):
    bootstrap = clean_links.endpoints.bootstrap_servers
    topic = f"load-{uuid.uuid4().hex[:8]}"
    spec = WorkloadSpec(total=100_000, keys=40, partitions=3, record_bytes=64, rate=400.0, seed=11)
    create_topic(bootstrap, topic, spec.partitions)

    result = run_open_loop(bootstrap, topic, spec, duration_s=5.0, users=2, workdir=tmp_path)
    print(json.dumps(result.to_dict()))  # the measured numbers, for whoever reads the test log

    frame = result.ledger.frame
    acked = frame[frame["status"] == "acked"]
    assert len(frame) == planned_records(spec, 5.0) == 2000
    assert frame["id"].is_unique
    # loose: this checks the pacing works, not how fast this machine is
    assert 0.5 * spec.rate <= result.achieved_rate <= 1.2 * spec.rate
    assert result.requests == len(acked) + result.failures
    assert result.latency_ms["p50"] is not None and result.latency_ms["p50"] <= result.latency_ms["p99"]

    rows = read_topic(bootstrap, topic, "read_committed")
    seen = decode_values([value for _p, _o, _k, value in rows])
    assert sorted(seen["id"]) == sorted(acked["id"])
    in_log_order = acked.sort_values(["partition", "offset"])
    for _key, group in in_log_order.groupby("key", sort=False):
        assert group["seq"].tolist() == list(range(len(group)))
        assert group["partition"].nunique() == 1

    assert json.loads(json.dumps(result.to_dict()))["ledger_counts"] == {"acked": len(acked)}


@pytest.mark.integration
def test_open_loop_load_stops_after_the_plans_total_even_if_time_remains(clean_links, tmp_path):
    bootstrap = clean_links.endpoints.bootstrap_servers
    topic = f"load-{uuid.uuid4().hex[:8]}"
    spec = WorkloadSpec(total=200, keys=10, partitions=2, record_bytes=64, rate=400.0, seed=3)
    create_topic(bootstrap, topic, spec.partitions)

    began = time.monotonic()
    result = run_open_loop(bootstrap, topic, spec, duration_s=120.0, users=3, workdir=tmp_path)

    assert time.monotonic() - began < 30.0
    assert sorted(result.ledger.frame["id"]) == list(range(200))
    assert result.ledger.counts() == {"acked": 200}
    assert len(read_topic(bootstrap, topic, "read_committed")) == 200


@pytest.mark.integration
def test_a_missing_or_too_small_topic_is_refused_before_locust_starts(stack, tmp_path):
    bootstrap = stack.endpoints.bootstrap_servers
    small = f"load-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, small, 1)
    spec = WorkloadSpec(total=10, partitions=2, rate=10.0)
    with pytest.raises(ConfigurationError, match="does not exist"):
        run_open_loop(bootstrap, f"missing-{uuid.uuid4().hex[:8]}", spec, 1.0, 1, tmp_path)
    with pytest.raises(ConfigurationError, match="has 1 partitions"):
        run_open_loop(bootstrap, small, spec, 1.0, 1, tmp_path)
    assert not (tmp_path / "locust.log").exists()


@pytest.mark.integration
def test_a_load_generator_that_cannot_start_fails_with_locusts_evidence(stack, tmp_path):
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"load-{uuid.uuid4().hex[:8]}"
    spec = WorkloadSpec(total=100, partitions=1, rate=50.0)
    create_topic(bootstrap, topic, 1)
    began = time.monotonic()
    with pytest.raises(StartupFailed) as info:
        run_open_loop(bootstrap, topic, spec, 30.0, 1, tmp_path, producer_conf={"no.such.property": "1"})
    assert "exited with code" in str(info.value) and "no.such.property" in str(info.value)
    assert time.monotonic() - began < 20.0
