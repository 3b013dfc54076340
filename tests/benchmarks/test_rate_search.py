"""The rate search finds a known ceiling: doubling up to the first failure, then bisecting to the precision."""

from __future__ import annotations

import pytest

from streamcert.benchmarks.rate_search import Probe, find_max_rate
from streamcert.harness.errors import ConfigurationError


def _connector(ceiling: float):
    tried = []

    def probe(rate: float) -> Probe:
        tried.append(rate)
        return Probe(rate, rate <= ceiling, {"backlog_growth": max(0.0, rate - ceiling)})
    return probe, tried


@pytest.mark.parametrize("ceiling", [1500.0, 7_777.0, 42_000.0])
def test_the_search_brackets_a_known_ceiling_within_its_precision(ceiling):
    probe, tried = _connector(ceiling)
    search = find_max_rate(probe, start=1000.0, precision=0.05)
    assert search.ceiling_reached and search.max_rate <= ceiling
    assert ceiling - search.max_rate <= 0.05 * search.max_rate + 1e-9
    assert [p.rate for p in search.probes] == tried and tried[:2] == [1000.0, 2000.0]


def test_a_start_that_is_already_too_fast_steps_down():
    probe, _ = _connector(300.0)
    search = find_max_rate(probe, start=1000.0, precision=0.1)
    assert search.max_rate is not None and 270.0 <= search.max_rate <= 300.0
    hopeless, _ = _connector(0.0)
    assert find_max_rate(hopeless, start=1000.0).max_rate is None


def test_the_limit_caps_the_search_and_says_the_ceiling_was_not_reached():
    probe, _ = _connector(10**9)
    search = find_max_rate(probe, start=1000.0, limit=5000.0)
    assert search.max_rate == 5000.0 and not search.ceiling_reached
    assert search.as_dict()["probes"][-1] == {"rate": 5000.0, "sustained": True, "backlog_growth": 0.0}


def test_bad_search_bounds_are_refused():
    with pytest.raises(ConfigurationError, match="start <= limit"):
        find_max_rate(lambda rate: Probe(rate, True), start=0)



def test_a_rate_that_holds_for_a_probe_but_not_for_a_measured_run_is_stepped_down():
    from streamcert.benchmarks.rate_search import confirm_rate

    short = find_max_rate(lambda rate: Probe(rate, rate <= 40_000), start=1000.0, precision=0.1)
    assert short.max_rate == 40_000
    tried = []

    def longer(rate: float) -> Probe:  # the longer run shows what the probe missed: only 36k really holds
        tried.append(rate)
        return Probe(rate, rate <= 36_000)

    confirmed = confirm_rate(short, longer, step=0.1, max_tries=3)
    assert tried == [40_000, 36_000] and confirmed.max_rate == 36_000 and confirmed.confirmed is True
    assert [p["rate"] for p in confirmed.as_dict()["confirmations"]] == tried


def test_a_rate_the_probes_found_and_a_measured_run_holds_is_kept():
    from streamcert.benchmarks.rate_search import confirm_rate

    search = confirm_rate(find_max_rate(lambda rate: Probe(rate, rate <= 8_000), start=1000.0, precision=0.1),
                          lambda rate: Probe(rate, True))
    assert search.max_rate == 8_000 and search.confirmed is True and len(search.confirmations) == 1


def test_a_rate_no_longer_run_confirms_is_the_lowest_tried_and_marked_unconfirmed():
    from streamcert.benchmarks.rate_search import confirm_rate

    search = find_max_rate(lambda rate: Probe(rate, rate <= 8_000), start=1000.0, precision=0.1)
    confirmed = confirm_rate(search, lambda rate: Probe(rate, False), step=0.1, max_tries=3)
    assert confirmed.confirmed is False and [p.rate for p in confirmed.confirmations] == [8_000, 7_200, 6_480]
    assert confirmed.max_rate == 6_480
