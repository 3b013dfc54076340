"""Open-loop load through locust: stats parsing, input validation, and a real run against the broker."""

from __future__ import annotations

import json
import math
import time
import uuid

import numpy as np
import pandas as pd
import pytest

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.kafka_clients import create_topic, read_topic
from streamcert.harness.run.load import planned_records, produce_figures, run_open_loop
from streamcert.harness.run.workload import WorkloadSpec, decode_values

def _ledger(produced, acked, status):
    return pd.DataFrame({"produced_at": produced, "acked_at": acked, "status": status})


def test_figures_come_from_every_records_own_times():
    produced = [10.0, 10.5, 11.0, 11.5, 12.0]
    acked = [10.002, 10.504, 11.010, np.nan, 12.001]
    figures = produce_figures(_ledger(produced, acked, ["acked"] * 3 + ["indeterminate", "acked"]))
    assert (figures["requests"], figures["failures"]) == (5, 1)
    assert figures["achieved_rate"] == pytest.approx(2.0)  # 4 records after the first in 2 s
    assert figures["latency_ms"]["max"] == pytest.approx(10.0)
    assert figures["latency_ms"]["p50"] == pytest.approx(3.0)


def test_figures_of_an_empty_or_single_record_ledger_have_no_rate_and_no_latency():
    empty = produce_figures(_ledger([], [], []))
    assert (empty["requests"], empty["failures"], math.isnan(empty["achieved_rate"])) == (0, 0, True)
    assert empty["latency_ms"] == {"p50": None, "p95": None, "p99": None, "max": None}
    unacked = produce_figures(_ledger([1.0], [np.nan], ["indeterminate"]))
    assert unacked["failures"] == 1 and unacked["latency_ms"]["p99"] is None


@pytest.mark.parametrize("changes, needle", [
    ({"users": 0}, "users=0"),
    ({"duration_s": 0}, "duration_s=0"),
    ({"duration_s": float("inf")}, "duration_s=inf"),
    ({"spec": WorkloadSpec(rate=None)}, "rate=None"),
    ({"spec": WorkloadSpec(rate=10.0, aborted_fraction=0.1)}, "aborted_fraction=0.1"),
    ({"spec": WorkloadSpec(rate=10.0, event_time_lead_ms=5)}, "event_time_lead_ms=5"),
    ({"spec": WorkloadSpec(rate=10.0, keys=2), "users": 3}, "keys=2"),
    ({"spec": WorkloadSpec(rate=-1.0)}, "rate=-1.0"),
    ({"users": 2, "spec": WorkloadSpec(rate=10.0, keys=4), "processes": 3}, "processes=3"),
    ({"processes": 0}, "processes=0"),
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
        run_open_loop(bootstrap, topic, spec, 30.0, 2, tmp_path, producer_conf={"no.such.property": "1"})
    assert "exited with code" in str(info.value) and "no.such.property" in str(info.value)
    assert time.monotonic() - began < 20.0


def test_locusts_run_time_backstop_leaves_room_for_the_warm_up_before_the_schedule():
    from streamcert.harness.run.load import _run_time

    # a process may wait up to its warm-up timeout at the start line before time zero: the schedule's last
    # records must still go out
    assert _run_time(10.0, 30.0) >= 10.0 + 30.0
    assert _run_time(10.0, 0.0) > 10.0 and _run_time(0.5, 30.0) == _run_time(1.0, 30.0)
