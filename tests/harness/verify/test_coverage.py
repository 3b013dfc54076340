"""The coverage grid: cells planned by the schedule's moment kills against the cells their landed strikes reached."""

from __future__ import annotations

from streamcert.harness.verify.coverage import cells_of, coverage_grid, strike_grid


def _entry(moment, batch_class):
    return {"fault": "driver_kill_moment", "target": "driver", "params": {"moment": moment,
                                                                          "batch_class": batch_class}}


def _start(*strikes):
    return {"kind": "fault-start", "fault": "driver_kill_moment", "strikes": list(strikes)}


def _strike(moments, batch_class, landed=True):
    return {"moments": moments, "batch_class": batch_class, "landed": landed}


def test_a_landed_strike_reaches_every_moment_it_saw_and_one_let_go_reaches_none():
    assert cells_of(_strike(["reading", "writing"], "steady")) == [("reading", "steady"), ("writing", "steady")]
    assert cells_of(_strike(["reading"], "steady", landed=False)) == []
    assert cells_of({"landed": False, "moments": [], "batch_class": None}) == []


def test_planned_cells_no_kill_reached_are_missing_and_positioning_kills_count_where_they_landed():
    schedule = [_entry("planning", "first"), _entry("writing", "steady"), _entry("commit_in_flight", "steady"),
                {"fault": "latency", "target": "kafka", "params": {"latency": 100}}]
    history = [_start(_strike(["commit_in_flight"], "steady"), _strike(["planning"], "first")),
               _start(_strike(["reading", "writing"], "steady")),
               _start(_strike(["read_done"], "steady", landed=False)),
               {"kind": "fault-start", "fault": "driver_kill", "in_window": True}]
    grid = coverage_grid(schedule, history)
    assert grid.missing() == []
    assert grid.reached[("commit_in_flight", "steady")] == 1 and ("read_done", "steady") not in grid.reached
    history.pop(0)
    grid = coverage_grid(schedule, history)
    assert grid.missing() == [("commit_in_flight", "steady"), ("planning", "first")]
    assert grid.missing(("commit_in_flight", "just_committed")) == [("commit_in_flight", "steady")]
    assert grid.as_dict()["missing"] == ["commit_in_flight@steady", "planning@first"]


def _aimed(fault, moment, landed=True, **strike_fields):
    params = {"moment": moment, **({"cut": "reset_peer"} if fault == "network_moment" else {})}
    return {"kind": "fault-start", "fault": fault, "moment": moment, "params": params,
            "strikes": [{"landed": landed, "wanted": landed, **strike_fields}]}


def test_the_strike_grid_counts_strikes_that_found_something_in_flight_in_their_moment():
    schedule = [{"fault": "network_moment", "params": {"moment": "writing", "cut": "reset_peer"}},
                {"fault": "server_kill_moment", "params": {"moment": "commit_in_flight"}},
                {"fault": "node_moment", "params": {"moment": "reading"}},
                {"fault": "latency", "params": {"latency": 100}}]
    history = [_aimed("network_moment", "writing", in_flight=[{"pid": 1}]),
               _aimed("server_kill_moment", "commit_in_flight", statements=[{"state": "idle", "kind": "COPY"}]),
               _aimed("node_moment", "reading", landed=False, in_flight=[{"pid": 1}])]
    grid = strike_grid(schedule, history)
    assert grid.as_dict() == {"planned": ["commit_in_flight@server_kill", "reading@node_kill", "writing@reset_peer"],
                              "reached": {"writing@reset_peer": 1},
                              "missing": ["commit_in_flight@server_kill", "reading@node_kill"]}
    assert strike_grid([{"fault": "latency", "params": {}}], history) is None
