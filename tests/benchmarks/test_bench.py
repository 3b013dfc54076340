"""streamcert bench's arithmetic on crafted runs (rates, latency, backlog, sustained, repeats, ratios), its cases,
and bench.html rendered from a results file: every section there, the numbers those of the JSON."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from streamcert.benchmarks.bench import (CASES, COMPARISONS, BenchSettings, _query_failure, comparisons, load_bound,
                                         measure_run, observer_figures, resolve_cases, summarize_repeats)
from streamcert.harness.errors import ConfigurationError
from streamcert.reports.bench_html import bench_html

ORIGIN = 1_000_000.0


def _run(rate: float, seconds: int, delay_s: float, capacity: float | None = None, lost: int = 0,
         duplicates: int = 0):
    """Records produced at ``rate`` for ``seconds``, acked at once, visible ``delay_s`` later; a ``capacity``
    below the rate delivers them at that pace instead (the backlog grows)."""
    count = int(rate * seconds)
    ids = np.arange(count)
    produced = ORIGIN + 1 + ids / rate
    visible = produced + delay_s
    if capacity is not None:
        visible = np.maximum(visible, ORIGIN + 1 + delay_s + ids / capacity)
    ledger = pd.DataFrame({"id": ids, "status": "acked", "produced_at": produced, "acked_at": produced + 0.002})
    kept = ids[: count - lost]
    output = pd.DataFrame({"id": kept, "produced_at": produced[kept], "visible_at": visible[kept]})
    if duplicates:
        output = pd.concat([output, output.iloc[:duplicates].assign(visible_at=lambda f: f["visible_at"] + 5)])
    history = [{"kind": "driver-start", "time": ORIGIN}]
    return output, ledger, history


def test_a_pipeline_that_keeps_up_is_sustained_at_its_input_rate_with_its_latency():
    output, ledger, history = _run(rate=500, seconds=20, delay_s=0.8)
    figures = measure_run(output, ledger, history, rate=500, record_bytes=200)
    assert figures["sustained"] is True and figures["lost"] == 0 and figures["redelivered"] == 0
    assert figures["output_records_per_s"] == pytest.approx(500, rel=0.03)
    assert figures["input_records_per_s"] == pytest.approx(500, rel=0.03)
    assert figures["output_mb_per_s"] == pytest.approx(500 * 200 / 1e6, rel=0.03)
    assert figures["latency_ms"]["p50"] == pytest.approx(800, rel=2e-3)
    assert figures["latency_ms"]["count"] == 10_000
    assert figures["backlog_max"] == pytest.approx(400, abs=60)  # 0.8 s of input in flight
    series = figures["series"]
    assert sum(series["output_per_s"]) == 10_000 and sum(series["input_per_s"]) == 10_000
    assert len(series["second"]) == len(series["backlog"]) == len(series["latency_p99_ms"])


def test_a_pipeline_slower_than_its_input_is_not_sustained_and_its_backlog_grows_at_the_difference():
    output, ledger, history = _run(rate=1000, seconds=20, delay_s=0.5, capacity=600)
    figures = measure_run(output, ledger, history, rate=1000, record_bytes=100)
    assert figures["sustained"] is False
    assert figures["backlog_growth_per_s"] == pytest.approx(400, rel=0.1)
    assert figures["output_records_per_s"] == pytest.approx(600, rel=0.05)
    assert figures["drain_s"] > 10


def test_lost_and_redelivered_records_are_counted_and_a_loss_is_not_sustained():
    output, ledger, history = _run(rate=200, seconds=10, delay_s=0.3, lost=7, duplicates=11)
    figures = measure_run(output, ledger, history, rate=200, record_bytes=100)
    assert figures["lost"] == 7 and figures["redelivered"] == 11 and figures["sustained"] is False


def test_latency_over_time_is_the_percentile_of_what_became_visible_each_second():
    output, ledger, history = _run(rate=100, seconds=10, delay_s=0.25)
    figures = measure_run(output, ledger, history, rate=100, record_bytes=100)
    values = [v for v in figures["series"]["latency_p99_ms"] if v is not None]
    assert values and all(v == pytest.approx(250, abs=1) for v in values)
    assert figures["series"]["latency_p50_ms"][0] is None  # nothing visible in the first second


def _repeat(rate: float, p99: float, sustained: bool = True) -> dict:
    return {"rate": 1000, "output_records_per_s": rate, "output_mb_per_s": rate / 1e4, "input_records_per_s": rate,
            "latency_p50_ms": p99 / 2, "latency_p99_ms": p99, "backlog_max": 10, "drain_s": 1.0, "redelivered": 0,
            "latency_ms": {"p50": p99 / 2, "p99": p99, "max": p99 * 2, "count": 100}, "sustained": sustained}


def test_repeats_give_median_and_range_and_a_share_of_the_raw_ceiling():
    runs = [_repeat(900, 300), _repeat(1000, 200), _repeat(950, 250), {"rate": 1000, "error": "boom"}]
    raw = [{"consume_records_per_s": 9000}, {"consume_records_per_s": 10000}, {"consume_records_per_s": 9500},
           {"consume_records_per_s": 9000}]
    summary = summarize_repeats(runs, raw)
    assert summary["records_per_s"] == 950 and summary["failed_repeats"] == 1
    assert summary["spread"]["output_records_per_s"] == {"median": 950, "min": 900, "max": 1000, "n": 3}
    assert summary["latency_ms"]["p99"] == 250 and summary["spread"]["latency_p99_ms"]["max"] == 300
    assert summary["share_of_raw_consume"]["median"] == pytest.approx(0.1)
    assert summary["sustained"] is True


def test_comparisons_divide_repeat_by_repeat():
    cases = {"reference": {"runs": [_repeat(500, 400), _repeat(600, 300)]},
             "builtin": {"runs": [_repeat(1000, 200), _repeat(1000, 300)]}}
    found = comparisons(cases)
    assert set(found) == {"reference_vs_builtin"}
    ratio = found["reference_vs_builtin"]
    assert ratio["output_records_per_s"] == {"median": 0.55, "min": 0.5, "max": 0.6, "n": 2}
    assert ratio["latency_p99_ms"]["min"] == 1.0 and ratio["latency_p99_ms"]["max"] == 2.0
    assert ratio["not_sustained"] == []


def test_a_comparison_names_its_cases_that_did_not_keep_up():
    cases = {"reference": {"runs": [_repeat(500, 400)], "sustained": False},
             "builtin": {"runs": [_repeat(1000, 200)], "sustained": True}}
    assert comparisons(cases)["reference_vs_builtin"]["not_sustained"] == ["reference"]


def _probe(asked: float, produced: float, capacity: float | None = None) -> dict:
    """A rate-search probe: ``asked`` records/s, of which the generator produced ``produced``/s, the pipeline
    delivering them at most at ``capacity``/s."""
    output, ledger, history = _run(rate=produced, seconds=30, delay_s=0.5, capacity=capacity)
    figures = measure_run(output, ledger, history, rate=asked, record_bytes=100)
    return {"rate": asked, **{k: figures[k] for k in ("sustained", "input_records_per_s", "backlog_growth_per_s",
                                                       "lost", "generator_kept_up")}}


def test_a_rate_search_stopped_by_the_load_generator_is_load_bound_and_flagged_in_comparisons_and_the_page():
    """On a small machine the generator shares the cores with Spark: when every probe that failed failed only
    because the generator fell behind (the pipeline delivered all it was offered), the rate found is the
    generator's reach, a lower bound of the case's, and its throughput ratios must not read as the connector's."""
    held = _probe(asked=2000, produced=2000)
    generator_behind = _probe(asked=4000, produced=2600)
    assert held["sustained"] and not generator_behind["sustained"] and not generator_behind["generator_kept_up"]
    search = {"max_rate": 2000, "probes": [held, generator_behind], "confirmations": [held]}
    assert load_bound(search) == {"load_bound": True, "load_generator_records_per_s": pytest.approx(2600, rel=0.03)}
    # the pipeline itself fell behind the offered rate: its ceiling, not the generator's
    pipeline_behind = _probe(asked=4000, produced=4000, capacity=2500)
    assert pipeline_behind["generator_kept_up"] and not pipeline_behind["sustained"]
    assert load_bound({**search, "probes": [held, pipeline_behind]})["load_bound"] is False
    # both at once (the generator behind and the pipeline behind what it was offered): not the generator's alone
    both = _probe(asked=4000, produced=3000, capacity=2000)
    assert not both["generator_kept_up"] and both["backlog_growth_per_s"] > 500
    assert load_bound({**search, "probes": [held, generator_behind, both]})["load_bound"] is False
    assert load_bound({"max_rate": 2000, "probes": [held], "confirmations": []})["load_bound"] is False
    assert load_bound({"max_rate": None, "probes": [generator_behind]})["load_bound"] is False

    cases = {"streamcert-kafka": {"runs": [_repeat(2000, 400)], "load_bound": True},
             "builtin": {"runs": [_repeat(2000, 300)], "load_bound": False}}
    found = comparisons(cases)["reference_source_vs_builtin_source"]
    assert found["load_bound"] == ["streamcert-kafka"]
    results = {**_bench_results(), "comparisons": {"reference_source_vs_builtin_source": found}}
    results["cases"]["builtin"]["load_bound"] = True
    results["rate_search"]["builtin"].update(load_bound(search))
    page = bench_html(results)
    assert "load-bound: streamcert-kafka" in page and "load-bound (rate searched is a lower bound)" in page
    assert "Load-bound: every probe that failed" in page and "at most 2,6" in page
    assert "load-bound" not in bench_html(_bench_results())


def test_a_query_that_failed_is_a_failed_repeat_kept_out_of_medians_and_ratios():
    died = {"kind": "driver-stop", "time": 9.0, "running": False, "exit_code": 1,
            "query_error": "StreamingQueryException: broker transport failure"}
    assert "broker transport failure" in _query_failure([{"kind": "driver-start"}, died])
    assert _query_failure([{"kind": "driver-stop", "running": True, "exited": True, "exit_code": 0}]) is None
    assert _query_failure([{"kind": "driver-stop", "running": False, "exit_code": 0}]) is None  # availableNow
    failed = {**_repeat(300, 900), "error": _query_failure([died])}
    summary = summarize_repeats([_repeat(900, 300), failed, _repeat(1000, 200)], [None, None, None])
    assert summary["failed_repeats"] == 1 and summary["spread"]["output_records_per_s"]["min"] == 900
    found = comparisons({"reference": {"runs": [_repeat(500, 400), failed]},
                         "builtin": {"runs": [_repeat(1000, 200), _repeat(1000, 300)]}})
    assert found["reference_vs_builtin"]["output_records_per_s"]["n"] == 1


def test_a_run_whose_observer_fell_behind_is_flagged_in_its_case_its_comparisons_and_the_page():
    """Rows are stamped visible when the harness reads them: a reader more than a round behind in over 5 % of its
    samples makes the latency its own, and the report says so rather than charge the connector."""
    assert observer_figures(None) == {"observer_unread_max": None, "observer_bound": None}
    assert observer_figures({"max_unread": 9000, "behind_share": 0.0})["observer_bound"] is False
    assert observer_figures({"max_unread": 60000, "behind_share": 0.3}) == {"observer_unread_max": 60000,
                                                                            "observer_bound": True}
    bound = {**_repeat(38000, 900), **observer_figures({"max_unread": 60000, "behind_share": 0.3})}
    free = {**_repeat(20000, 300), **observer_figures({"max_unread": 100, "behind_share": 0.0})}
    cases = {"reference": {"runs": [free, free]}, "builtin": {"runs": [bound, free]}}
    for body in cases.values():
        body.update(summarize_repeats(body["runs"], [None, None]))
    assert cases["builtin"]["observer_bound_repeats"] == 1 and cases["reference"]["observer_bound_repeats"] == 0
    assert cases["builtin"]["spread"]["observer_unread_max"]["max"] == 60000
    assert comparisons(cases)["reference_vs_builtin"]["observer_bound"] == ["builtin"]
    results = {**_bench_results(), "cases": {name: {**body, "case": CASES[name].as_dict()}
                                             for name, body in cases.items()},
               "comparisons": comparisons(cases)}
    page = bench_html(results)
    assert "observer-bound (1 repeat(s))" in page and "observer-bound: builtin" in page
    assert "60,000 (bound)" in page


def test_every_comparison_names_cases_that_exist():
    assert all(top in CASES and bottom in CASES for top, bottom in COMPARISONS.values())


def test_cases_resolve_by_name_or_connector_paired_with_sparks_kafka():
    assert [c.name for c in resolve_cases(None)] == ["reference", "builtin"]
    [source] = resolve_cases(["streamcert.connectors.declarations:KafkaOffsetSourceUnderTest"])
    assert source.sink == "spark-kafka-sink"
    [sink] = resolve_cases(["streamcert-pg-2pc"])
    assert sink.source == "spark-kafka" and sink.name == "streamcert-pg-2pc"
    with pytest.raises(ConfigurationError, match="neither a benchmark case nor a connector"):
        resolve_cases(["nope"])
    with pytest.raises(ConfigurationError, match="aggregator"):
        resolve_cases(["streamcert-batch-aggregator"])
    with pytest.raises(ConfigurationError, match="twice"):
        resolve_cases(["builtin", "builtin"])


@pytest.mark.parametrize("bad", [{"rate": -1.0}, {"rate": float("nan")}, {"duration_s": 0.5},
                                 {"record_bytes": 10}, {"repeats": 0}])
def test_bad_settings_name_the_option(bad):
    with pytest.raises(ConfigurationError, match="is not valid"):
        BenchSettings(**bad)


def _bench_results() -> dict:
    output, ledger, history = _run(rate=300, seconds=12, delay_s=0.6)
    figures = measure_run(output, ledger, history, rate=300, record_bytes=100)
    slow_output, slow_ledger, _ = _run(rate=300, seconds=12, delay_s=1.7)
    slow = measure_run(slow_output, slow_ledger, history, rate=300, record_bytes=100)
    raw = [{"produce_records_per_s": 80000.0, "consume_records_per_s": 150000.0, "produce_mb_per_s": 8.0,
            "consume_mb_per_s": 15.0, "observer_records_per_s": 61000.0, "load_generator_records_per_s": 123456.0}]
    cases = {}
    for name, run in (("reference", slow), ("builtin", figures)):
        run = {**run, "faults": [{"fault": "down", "target": "kafka", "start_s": 4.0, "stop_s": 7.0}],
               "recovery": [{"fault": "down", "target": "kafka", "recovery_s": 2.5}]}
        body = {"case": CASES[name].as_dict(), "runs": [run]}
        body.update(summarize_repeats(body["runs"], raw))
        cases[name] = body
    return {"schema_version": 1, "benchmark": "streamcert bench", "kind": "bench", "complete": True,
            "settings": BenchSettings(rate=300, duration_s=12, repeats=1).as_dict(), "command": "streamcert bench",
            "raw_ceiling": {"runs": raw, "consume_records_per_s": {"median": 150000.0, "min": 150000.0,
                                                                   "max": 150000.0, "n": 1},
                            "observer_records_per_s": {"median": 61000.0, "min": 61000.0, "max": 61000.0, "n": 1},
                            "load_generator_records_per_s": {"median": 123456.0, "min": 123456.0, "max": 123456.0,
                                                             "n": 1}},
            "cases": cases, "comparisons": comparisons(cases), "rate_search": {
                "builtin": {"max_rate": 4000, "probes": [{"rate": 1000, "sustained": True},
                                                         {"rate": 8000, "sustained": False}]}},
            "versions": {"spark": "4.1.0"}, "machine": {"cpus": 2}}


def test_the_page_has_every_section_and_the_numbers_of_the_json():
    results = _bench_results()
    page = bench_html(json.loads(json.dumps(results)))
    for section in ("<h2>Cases</h2>", "<h2>Comparisons</h2>", "<h2>Raw ceiling of this machine</h2>",
                    "<h2>Over time, side by side</h2>", "<h2>Each case</h2>", "<h2>Environment</h2>",
                    'id="case-reference"', 'id="case-builtin"', "Rate search", "<svg"):
        assert section in page, section
    builtin = results["cases"]["builtin"]
    assert f"<b>{builtin['records_per_s']:,.0f}</b>" in page
    assert f"<b>{builtin['latency_ms']['p99']:,.1f}</b>" in page
    ratio = results["comparisons"]["reference_vs_builtin"]["latency_p99_ms"]["median"]
    assert f"<b>{ratio:,.3f}</b>" in page
    assert "down: 2.5 s" in page and "150,000" in page and "61,000" in page and "123,456" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # opens with no network
    assert "<script" not in page


def test_an_incomplete_benchmark_says_so():
    results = {**_bench_results(), "complete": False, "error": "KeyboardInterrupt: "}
    page = bench_html(results)
    assert "incomplete" in page and "KeyboardInterrupt" in page


def _batched(rate: float, seconds: int, period_s: float, commit_s: float, capacity: float | None = None):
    """A micro-batch pipeline: every ``period_s`` a batch takes what arrived (at most ``capacity`` x period) and
    makes it visible ``commit_s`` later, all at once: the backlog is a sawtooth."""
    count = int(rate * seconds)
    ids = np.arange(count)
    produced = ORIGIN + 1 + ids / rate
    visible = np.empty(count)
    start, taken, boundary = ORIGIN + 1, 0, ORIGIN + 1 + period_s
    while taken < count:
        arrived = int(np.searchsorted(produced, boundary))
        limit = count if capacity is None else taken + int(capacity * period_s)
        upto = max(taken, min(arrived, limit))
        visible[taken:upto] = boundary + commit_s
        taken, boundary = upto, boundary + period_s
    del start
    ledger = pd.DataFrame({"id": ids, "status": "acked", "produced_at": produced, "acked_at": produced + 0.002})
    output = pd.DataFrame({"id": ids, "produced_at": produced, "visible_at": visible})
    return output, ledger, [{"kind": "driver-start", "time": ORIGIN}]


@pytest.mark.parametrize("period_s", [1.0, 2.5, 3.5, 4.0])
def test_a_micro_batch_pipeline_that_keeps_up_in_bursts_is_sustained_whatever_the_phase_of_its_batches(period_s):
    # seen: the Kafka 2PC sink (a batch every ~3.5 s) judged not sustained at 1,000 records/s by a straight line fit
    # through its sawtooth backlog, so the rate search fell to 578 records/s
    output, ledger, history = _batched(rate=1000, seconds=20, period_s=period_s, commit_s=1.5)
    figures = measure_run(output, ledger, history, rate=1000, record_bytes=100)
    assert figures["sustained"] is True, figures["backlog_growth_per_s"]


@pytest.mark.parametrize("period_s", [1.0, 3.5])
def test_a_micro_batch_pipeline_slower_than_its_input_is_not_sustained(period_s):
    output, ledger, history = _batched(rate=1000, seconds=20, period_s=period_s, commit_s=1.5, capacity=850)
    figures = measure_run(output, ledger, history, rate=1000, record_bytes=100)
    assert figures["sustained"] is False
    assert figures["backlog_growth_per_s"] == pytest.approx(150, rel=0.25)


@pytest.mark.parametrize("period_s", [4.5, 5.0, 5.5, 6.0])
def test_long_batches_are_judged_on_the_backlogs_floor_not_on_where_a_short_probes_few_teeth_fell(period_s):
    # seen: the Kafka 2PC sink (~5 s batches) at 4,000 records/s, output 3,902/s, judged growing at 329 records/s
    # (8 %) by a line through three teeth; the same sink behind the reference source then kept 10,000 records/s
    keeps_up = measure_run(*_batched(rate=4000, seconds=20, period_s=period_s, commit_s=2.0), rate=4000,
                           record_bytes=100)
    assert keeps_up["sustained"] is True, keeps_up["backlog_growth_per_s"]
    assert keeps_up["growth_window_s"] >= period_s
    behind = measure_run(*_batched(rate=4000, seconds=20, period_s=period_s, commit_s=2.0, capacity=3600),
                         rate=4000, record_bytes=100)
    assert behind["sustained"] is False
    assert behind["backlog_growth_per_s"] == pytest.approx(400, rel=0.6)


#: Records made visible each second by a real probe of the Kafka 2PC sink at 1,000 records/s (20 s of load from
#: second 0): batches of irregular size every one to two seconds, keeping up.
_SEEN_DELIVERIES = [138, 1473, 0, 1126, 1534, 0, 1288, 1446, 1378, 1042, 878, 1229, 0, 1149, 1257, 1262, 1324, 0,
                    1342, 0, 1353, 0, 781]


def test_a_pipeline_delivering_irregular_batches_that_keep_up_is_sustained():
    # a straight line through the last ten seconds of this backlog rose by 46-72 records/s: the rate search took it
    # for a pipeline that fell behind and went down to 578 records/s
    count = sum(_SEEN_DELIVERIES)
    ids = np.arange(count)
    produced = ORIGIN + 1 + ids / 1000
    seconds = np.repeat(np.arange(len(_SEEN_DELIVERIES)), _SEEN_DELIVERIES)
    visible = np.maximum(ORIGIN + 1 + 1.0 + seconds + 0.5, produced + 0.3)
    ledger = pd.DataFrame({"id": ids, "status": "acked", "produced_at": produced, "acked_at": produced + 0.002})
    output = pd.DataFrame({"id": ids, "produced_at": produced, "visible_at": visible})
    figures = measure_run(output, ledger, [{"kind": "driver-start", "time": ORIGIN}], rate=1000, record_bytes=100)
    assert figures["sustained"] is True, figures["backlog_growth_per_s"]


@pytest.mark.parametrize("quick", [False, True])
def test_rate_search_probes_last_ten_teeth_of_the_sawtooth_the_sustained_probes_showed(monkeypatch, tmp_path, quick):
    from streamcert.benchmarks import bench

    asked: list[tuple[float, float]] = []

    def fake_run(env, case, settings, rate, duration_s, folder, seed, with_faults):
        asked.append((rate, duration_s))
        held = rate <= 3000
        # a saturated pipeline's latency (and so its tooth estimate) is its backlog's: it must not lengthen probes
        return {"sustained": held, "growth_window_s": 6 if held else 10, "output_records_per_s": min(rate, 3000)}

    monkeypatch.setattr(bench, "run_case", fake_run)
    settings = BenchSettings(rate=None, quick=quick, probe_duration_s=20.0)
    found = bench._search_rate(None, bench.CASES["builtin"], settings, 100_000.0, tmp_path, bench._Progress())
    assert 2700 <= found["max_rate"] <= 3000
    assert asked[0] == (1000.0, 20.0)  # nothing known yet about its batches
    probes = asked[1:]
    assert probes and {duration for _, duration in probes} == {37.5 if quick else 60.0}


def test_a_cases_batches_may_admit_ten_seconds_of_load_so_the_cap_never_sets_its_rate():
    from streamcert.benchmarks.bench import admission_cap, scenario_for

    assert admission_cap(300) == 3000 and admission_cap(20) == 1000 and admission_cap(1234.5) == 12345
    scenario = scenario_for(CASES["reference"], BenchSettings(rate=2500, duration_s=12, repeats=1), 2500, 12, 1)
    assert scenario.options["max_records_per_batch"] == 25_000  # two seconds' worth held a slow-committing case back
    assert scenario.load_users == 2
