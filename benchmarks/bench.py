"""``streamcert bench``: OpenMessaging-Benchmark-style runs of connector pipelines on the open-loop load.

A *case* is one pipeline (a source and a sink, see :data:`CASES`); a connector named on the command line is paired
with Spark's own Kafka connector on its other side, so its figure is its own. Each case runs as a scenario
(:func:`~streamcert.harness.scenario.run_scenario`): locust produces the records open-loop at ``rate`` records/s
for ``duration_s`` seconds (a record is due at its time whether or not the pipeline keeps up), the query runs
until every acknowledged record is visible to a read_committed reader, and the run's ledger and output give:

- input and output records/s and MB/s, second by second and over the steady part of the load (its last 80 %);
- end-to-end latency (produce -> visible) p50 / p75 / p95 / p99 / p99.9 / max from an HDR histogram, and its p50
  and p99 second by second;
- the backlog (acknowledged, not yet visible) second by second, whether it stayed bounded (``sustained``: its
  floor -- the lowest backlog within each tooth of a micro-batch sawtooth -- grew by less than 5 % of the rate per
  second over the steady part of the load, nothing was lost, and the load generator produced at least 90 % of the
  rate asked: a rate this machine cannot produce is not one the case sustained);
- under a fault (``--fault``): each fault's recovery time (its end -> throughput and backlog back to their
  pre-fault level) and the records delivered more than once.

Every repeat also measures the raw ceiling of this machine (:mod:`streamcert.benchmarks.raw`), so each figure is
also a ratio to it, and the cases of one repeat run back to back, so the ratios between cases (:data:`COMPARISONS`)
are measured side by side. ``--rate max`` searches for the highest rate a case sustains
(:func:`~streamcert.benchmarks.rate_search.find_max_rate`, short probes) before its measured runs; where every
probe that failed failed only because the load generator fell behind (it shares the machine's cores with Spark),
the rate found is the generator's reach, a lower bound of the case's, and the case is marked *load-bound*.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from streamcert.benchmarks.latency import LatencyHistogram
from streamcert.benchmarks.rate_search import Probe, confirm_rate, find_max_rate
from streamcert.harness.errors import ConfigurationError

__all__ = ["BENCH_SCHEMA_VERSION", "BenchCase", "BenchSettings", "CASES", "COMPARISONS", "DEFAULT_CASES",
           "admission_cap", "load_bound", "resolve_cases", "measure_run", "summarize_repeats", "run_bench",
           "with_derived_figures"]

BENCH_SCHEMA_VERSION = 1
#: Highest --rate accepted: ten times what one broker on a laptop takes, so a typo is not a plan of 10^12 records.
MAX_RATE = 10_000_000
#: Spark's built-in Kafka connector: the neutral other side of a case that names one connector.
NEUTRAL_SOURCE, NEUTRAL_SINK = "spark-kafka", "spark-kafka-sink"
#: A backlog that grows by more than this fraction of the rate per second did not keep up.
_GROWTH_LIMIT = 0.05
#: Longest sawtooth tooth (seconds) the backlog's floor is taken over.
_MAX_TOOTH_S = 10
#: A rate-search probe lasts this many teeth of the backlog's sawtooth (its floor needs several to slope) ...
_TEETH_PER_PROBE = 10
#: ... but no longer than this.
_LONGEST_PROBE_S = 75.0
#: Producers of a case's open-loop load (spread over one locust process per core).
_LOAD_USERS = 2
#: Seconds of load a case's micro-batch may admit (:func:`admission_cap`).
_ADMITTED_SECONDS = 10
#: The first part of the load is warm-up (the first batches pay Python worker start-up).
_WARM_UP_FRACTION = 0.2
#: Records (outside the ledger) the query reads before the load starts: the figures leave Spark's start-up out.
_WARM_UP_RECORDS = 100


@dataclass(frozen=True)
class BenchCase:
    """One pipeline measured: ``source`` -> ``sink`` (entry point names or ``module:attr``)."""

    name: str
    source: str
    sink: str
    kafka_path: str = "proxy"
    about: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "sink": self.sink, "kafka_path": self.kafka_path,
                "about": self.about}


CASES: dict[str, BenchCase] = {case.name: case for case in (
    BenchCase("reference", "streamcert-kafka", "streamcert-kafka-2pc", about="the reference pipeline: Kafka -> "
              "Kafka exactly-once (offsets in the checkpoint, write-ahead two-phase commit)"),
    BenchCase("builtin", NEUTRAL_SOURCE, NEUTRAL_SINK, about="Spark's built-in Kafka -> Kafka (at-least-once)"),
    BenchCase("builtin-direct", NEUTRAL_SOURCE, NEUTRAL_SINK, kafka_path="direct",
              about="Spark's built-in Kafka -> Kafka straight to the broker (no Toxiproxy in the path)"),
    BenchCase("streamcert-kafka", "streamcert-kafka", NEUTRAL_SINK,
              about="the reference Kafka source into Spark's Kafka sink"),
    BenchCase("streamcert-kafka-2pc", NEUTRAL_SOURCE, "streamcert-kafka-2pc",
              about="Spark's Kafka source into the reference Kafka 2PC sink"),
    BenchCase("streamcert-pg-2pc", NEUTRAL_SOURCE, "streamcert-pg-2pc",
              about="Spark's Kafka source into the reference PostgreSQL 2PC sink"),
    BenchCase("spark-foreachbatch-pg", NEUTRAL_SOURCE, "spark-foreachbatch-pg",
              about="Spark's Kafka source into a plain foreachBatch append to PostgreSQL"),
)}
DEFAULT_CASES = ("reference", "builtin")
#: The comparisons that matter (numerator case, denominator case): each a ratio per repeat, then median and range.
COMPARISONS: dict[str, tuple[str, str]] = {
    "reference_source_vs_builtin_source": ("streamcert-kafka", "builtin"),
    "kafka_2pc_sink_vs_builtin_kafka_sink": ("streamcert-kafka-2pc", "builtin"),
    "pg_2pc_sink_vs_foreachbatch_append": ("streamcert-pg-2pc", "spark-foreachbatch-pg"),
    "proxy_vs_direct": ("builtin", "builtin-direct"),
    "reference_vs_builtin": ("reference", "builtin"),
}
#: What each comparison divides: throughput, and latency at the median and the tail.
_COMPARED = ("output_records_per_s", "latency_p50_ms", "latency_p99_ms")


def resolve_cases(names: list[str] | None) -> list[BenchCase]:
    """Case names, or connectors (paired with Spark's Kafka connector on their other side); the default cases when
    none are named. A ConfigurationError names what is neither."""
    from streamcert.harness.run.connectors import load_connector

    cases: list[BenchCase] = []
    for name in names or DEFAULT_CASES:
        if name in CASES:
            cases.append(CASES[name])
            continue
        try:
            connector = load_connector(name)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{name!r} is neither a benchmark case nor a connector: {exc.message}",
                                     hint=f"Cases: {', '.join(CASES)}. {exc.hint or ''}".strip()) from None
        if connector.kind == "source":
            cases.append(BenchCase(connector.name, name, NEUTRAL_SINK, about=f"{name} into Spark's Kafka sink"))
        elif connector.kind == "sink":
            cases.append(BenchCase(connector.name, NEUTRAL_SOURCE, name, about=f"Spark's Kafka source into {name}"))
        else:
            raise ConfigurationError(f"Connector {name!r} is an {connector.kind}: a benchmark measures a source or a "
                                     "sink.", hint=f"Name a source, a sink or a case: {', '.join(CASES)}.")
    names_seen = [case.name for case in cases]
    if len(set(names_seen)) != len(names_seen):
        raise ConfigurationError(f"A case is named twice: {', '.join(names_seen)}.", hint="Name each case once.")
    return cases


@dataclass(frozen=True)
class BenchSettings:
    """What every case of a benchmark runs with. ``rate`` None: search for the highest sustained rate."""

    rate: float | None = 1000.0
    duration_s: float = 30.0
    record_bytes: int = 100
    repeats: int = 3
    seed: int = 1
    faults: tuple = ()
    partitions: int = 4
    keys: int = 100
    probe_duration_s: float = 20.0
    quick: bool = False

    def __post_init__(self) -> None:
        from streamcert.harness.run.workload import HEADER_BYTES

        problems = []
        if self.rate is not None and not (math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE):
            # The open-loop load plans every record (rate x duration of them) before it starts.
            problems.append(("--rate", self.rate, f"a positive number of records per second up to {MAX_RATE:,} "
                                                  "(far above what one machine's broker takes), or max"))
        if not (math.isfinite(self.duration_s) and 1 <= self.duration_s <= 3600):
            problems.append(("--duration", self.duration_s, "seconds between 1 and 3600"))
        if not HEADER_BYTES <= self.record_bytes <= 1_000_000:
            problems.append(("--record-size", self.record_bytes, f"bytes between {HEADER_BYTES} (the record "
                                                                  "header) and 1000000"))
        if not 1 <= self.repeats <= 20:
            problems.append(("--repeats", self.repeats, "a count between 1 and 20"))
        if problems:
            option, value, allowed = problems[0]
            raise ConfigurationError(f"{option} {value!r} is not valid.", hint=f"Use {allowed}.")

    def as_dict(self) -> dict[str, Any]:
        return {"rate": self.rate if self.rate is not None else "max", "duration_s": self.duration_s,
                "record_bytes": self.record_bytes, "repeats": self.repeats, "seed": self.seed,
                "faults": [spec.as_dict() for spec in self.faults], "partitions": self.partitions, "keys": self.keys,
                "probe_duration_s": self.probe_duration_s, "quick": self.quick}


# -- one run ---------------------------------------------------------------------------

def scenario_for(case: BenchCase, settings: BenchSettings, rate: float, duration_s: float, seed: int,
                 with_faults: bool = True):
    from streamcert.harness.run.workload import WorkloadSpec
    from streamcert.harness.scenario import Scenario

    total = max(1, math.ceil(rate * duration_s))
    return Scenario(
        name=f"bench-{case.name}", source=case.source, sink=case.sink, kafka_path=case.kafka_path,
        workload=WorkloadSpec(total=total, keys=settings.keys, partitions=settings.partitions,
                              record_bytes=settings.record_bytes, rate=rate, seed=seed),
        load="open_loop", load_duration_s=duration_s, load_users=_LOAD_USERS, warm_up_records=_WARM_UP_RECORDS,
        schedule=list(settings.faults) if with_faults else [], parallelism=2,
        faults_after_output=_WARM_UP_RECORDS + 1,  # a fault's at_s counts from the load's first visible record
        options={"max_records_per_batch": admission_cap(rate)}, quiet_timeout_s=60.0, settle_s=5.0)


def admission_cap(rate: float) -> int:
    """Records a micro-batch of a case may read at ``rate``: :data:`_ADMITTED_SECONDS` of load, so the cap never sets
    the rate a case sustains (a pipeline whose batches take longer than the cap's seconds falls behind on its own).
    A cap of two seconds of load measured the pipeline that commits slower at its cap, not at its ceiling."""
    return max(1000, int(math.ceil(rate * _ADMITTED_SECONDS)))


def _per_second(times: np.ndarray, origin: float, seconds: int) -> np.ndarray:
    bins = np.arange(seconds + 1) + origin
    return np.histogram(times, bins=bins)[0] if seconds > 0 else np.zeros(0, dtype=int)


def _window_rate(times: np.ndarray, begin: float, end: float) -> float:
    span = end - begin
    return float(((times >= begin) & (times < end)).sum() / span) if span > 0 else 0.0


def measure_run(output: pd.DataFrame, ledger: pd.DataFrame, history: list[dict[str, Any]], rate: float,
                record_bytes: int, recovery: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A run's benchmark figures from its output (``id``, ``visible_at``, ``produced_at``) and ledger (``id``,
    ``status``, ``produced_at``, ``acked_at``): scalars and per-second series, in seconds from ``origin`` (one
    second before the first record was produced)."""
    acked = ledger.loc[ledger["status"] == "acked"]
    first = output.drop_duplicates("id")
    delivered = first.loc[first["id"].isin(acked["id"])]
    produced = acked["produced_at"].dropna().to_numpy()
    began = history[0]["time"] if history else time.time()
    load_begin, load_end = (float(produced.min()), float(produced.max())) if len(produced) else (began, began)
    origin = load_begin - 1.0
    steady_begin = load_begin + _WARM_UP_FRACTION * (load_end - load_begin)
    visible = delivered["visible_at"].to_numpy()
    latencies = (delivered["visible_at"] - delivered["produced_at"]).to_numpy() * 1000
    histogram = LatencyHistogram().record_all(latencies[np.isfinite(latencies)])
    end = max([load_end, *(visible.max(initial=origin),)])
    seconds = int(math.ceil(end - origin)) + 1
    input_series = _per_second(acked["acked_at"].dropna().to_numpy(), origin, seconds)
    output_series = _per_second(visible, origin, seconds)
    backlog = np.maximum(np.cumsum(input_series) - np.cumsum(output_series), 0)
    p50_series, p99_series = _latency_series(visible, latencies, origin, seconds)
    summary = histogram.summary()
    window = _tooth_s(summary.get("p50"))
    growth = _backlog_growth(backlog, steady_begin - origin, load_end - origin, window)
    lost = int(len(acked) - len(delivered))
    output_rate = _window_rate(visible, steady_begin, load_end)
    input_rate = _window_rate(acked["acked_at"].to_numpy(), steady_begin, load_end)
    # a load generator that fell behind its schedule measured a lower rate than the one asked for
    generator_kept_up = input_rate >= (1 - _GROWTH_LIMIT * 2) * rate
    return {
        "rate": rate, "origin": origin, "acked": int(len(acked)), "delivered": int(len(delivered)), "lost": lost,
        "redelivered": int(len(output) - output["id"].nunique()),
        "input_records_per_s": round(input_rate, 1), "generator_kept_up": generator_kept_up,
        "output_records_per_s": round(output_rate, 1),
        "output_mb_per_s": round(output_rate * record_bytes / 1e6, 4),
        "latency_ms": summary,
        "latency_p50_ms": summary.get("p50"), "latency_p99_ms": summary.get("p99"),
        "backlog_max": int(backlog.max(initial=0)),
        "backlog_growth_per_s": round(growth, 2), "growth_window_s": window,
        "sustained": lost == 0 and generator_kept_up and growth <= _GROWTH_LIMIT * rate,
        "drain_s": round(float(visible.max(initial=load_end)) - load_end, 3),
        "recovery": recovery or [],
        "series": {"second": list(range(seconds)), "input_per_s": input_series.tolist(),
                   "output_per_s": output_series.tolist(), "backlog": backlog.tolist(),
                   "latency_p50_ms": p50_series, "latency_p99_ms": p99_series},
    }


def _tooth_s(p50_ms: float | None) -> int:
    """Seconds a micro-batch backlog's sawtooth tooth may last: a record waits about half a batch period plus the
    batch's own run, so the median latency plus one second holds a tooth (1 to :data:`_MAX_TOOTH_S`)."""
    if p50_ms is None or not math.isfinite(p50_ms):
        return 1
    return int(min(_MAX_TOOTH_S, max(1, math.ceil(p50_ms / 1000) + 1)))


def _backlog_growth(backlog: np.ndarray, steady_begin_s: float, steady_end_s: float, window: int) -> float:
    """Records per second the backlog grew by over the steady part of the load, judged on its floor.

    A micro-batch pipeline's backlog is a sawtooth (it fills for a batch period, then a commit empties it): a line
    through the raw series tilts by whichever way the few teeth of a short probe fell (a sink at 4,000 records/s
    with 5 s batches read as growing at 8 % of its rate while it kept up). The floor -- the lowest backlog within
    each trailing ``window`` s, a tooth -- rises only when the pipeline falls behind. Too short a steady part for
    the floor: a line through the raw series.
    """
    steady = np.array([s for s in range(len(backlog)) if steady_begin_s <= s <= steady_end_s])
    if steady.size < 3:
        return 0.0
    floor = pd.Series(backlog, dtype=np.float64).rolling(window, min_periods=1).min().to_numpy()
    judged = steady[steady >= steady[0] + window - 1]
    if judged.size >= 3:
        return float(np.polyfit(judged, floor[judged], 1)[0])
    return float(np.polyfit(steady, backlog[steady], 1)[0])


def _latency_series(visible: np.ndarray, latencies: np.ndarray, origin: float,
                    seconds: int) -> tuple[list[float | None], list[float | None]]:
    """p50 and p99 of the records that became visible in each second (None: nothing did)."""
    index = np.floor(visible - origin).astype(int) if len(visible) else np.zeros(0, dtype=int)
    p50: list[float | None] = []
    p99: list[float | None] = []
    for second in range(seconds):
        values = latencies[index == second]
        values = values[np.isfinite(values)]
        p50.append(round(float(np.percentile(values, 50)), 1) if len(values) else None)
        p99.append(round(float(np.percentile(values, 99)), 1) if len(values) else None)
    return p50, p99


def run_case(env: Any, case: BenchCase, settings: BenchSettings, rate: float, duration_s: float, folder: Path,
             seed: int, with_faults: bool = True) -> dict[str, Any]:
    """Run ``case`` once at ``rate``; its figures, or ``{"error": ...}`` with what the run recorded."""
    from streamcert.harness.run.workload import Ledger
    from streamcert.harness.scenario import run_scenario
    from streamcert.harness.run.history import fault_windows

    result = run_scenario(env, scenario_for(case, settings, rate, duration_s, seed, with_faults), folder)
    run = {"folder": str(folder), "duration_s": result.duration_s, "valid": result.valid,
           "checks": {c["name"]: c["valid"] for c in result.checks}}
    if not result.complete or "output" not in result.evidence:
        return {**run, "rate": rate, "error": (result.error or "the run did not complete").splitlines()[0]}
    output = pd.read_parquet(folder / result.evidence["output"])
    ledger = Ledger.read(folder / result.evidence["ledger"]).frame
    figures = measure_run(output, ledger, result.history, rate, settings.record_bytes,
                          result.metrics.get("recovery"))
    figures["achieved_input_rate"] = (result.metrics.get("load") or {}).get("achieved_rate")
    figures.update(observer_figures(result.metrics.get("observer_read_lag")))
    shift = figures["origin"] - result.history[0]["time"] if result.history else 0.0
    figures["faults"] = [{**w, "start_s": w["start_s"] - shift,
                          "stop_s": None if w["stop_s"] is None else w["stop_s"] - shift}
                         for w in fault_windows({"history": result.history})]
    failure = _query_failure(result.history)
    if failure:  # its figures stay as evidence; the repeat is not one of the case's numbers
        return {**run, **figures, "sustained": False, "error": failure}
    return {**run, **figures}


#: Share of a run's samples in which the observer had more than one round's worth of output unread, above which its
#: latency figures are the observer's as much as the connector's (rows are stamped visible when read).
OBSERVER_BOUND_SHARE = 0.05


def observer_figures(lag: dict[str, Any] | None) -> dict[str, Any]:
    """How far the harness's own reader fell behind the output (``observer_read_lag`` of the run's metrics), and
    whether that bounds the run's latency figures: ``observer_bound`` None where the output kind cannot tell."""
    if not lag:
        return {"observer_unread_max": None, "observer_bound": None}
    return {"observer_unread_max": lag.get("max_unread"),
            "observer_bound": bool(lag.get("behind_share", 0.0) > OBSERVER_BOUND_SHARE)}


def _query_failure(history: list[dict[str, Any]]) -> str | None:
    """Why the query ended by itself before the run asked it to stop (its driver exited non-zero), or None:
    records it never delivered are then not the connector's throughput, nor its loss."""
    stops = [e for e in history if e.get("kind") == "driver-stop"]
    if not stops or stops[-1].get("running") is not False or stops[-1].get("exit_code") in (0, None):
        return None
    why = stops[-1].get("query_error") or "no error was reported"
    return f"the query failed (driver exit code {stops[-1]['exit_code']}): {why}"


# -- repeats and ratios -----------------------------------------------------------------

_SCALARS = ("input_records_per_s", "output_records_per_s", "output_mb_per_s", "latency_p50_ms", "latency_p99_ms",
            "backlog_max", "drain_s", "redelivered", "observer_unread_max")


def _spread(values: list[float]) -> dict[str, float] | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4), "n": len(values)}


def summarize_repeats(runs: list[dict[str, Any]], raw: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A case's repeats as median and min-max per figure (and each latency percentile), the share of the raw
    ceiling of each repeat, and the headline numbers ``compare`` reads (``records_per_s``, ``mb_per_s``,
    ``latency_ms``: medians)."""
    good = [run for run in runs if "error" not in run]
    spreads = {name: _spread([run.get(name) for run in good]) for name in _SCALARS}
    percentiles = sorted({k for run in good for k in run.get("latency_ms", {}) if k != "count"})
    latency = {k: _spread([run["latency_ms"].get(k) for run in good]) for k in percentiles}
    of_raw = [run["output_records_per_s"] / ceiling["consume_records_per_s"]
              for run, ceiling in zip(runs, raw, strict=False)
              if "error" not in run and ceiling and ceiling.get("consume_records_per_s")]
    return {
        "repeats": len(runs), "failed_repeats": len(runs) - len(good),
        "sustained": all(run.get("sustained") for run in good) if good else None,
        "records_per_s": spreads["output_records_per_s"]["median"] if spreads["output_records_per_s"] else None,
        "mb_per_s": spreads["output_mb_per_s"]["median"] if spreads["output_mb_per_s"] else None,
        "latency_ms": {k: v["median"] for k, v in latency.items() if v},
        "spread": {**spreads, **{f"latency_{k}_ms": v for k, v in latency.items()}},
        "share_of_raw_consume": _spread(of_raw),
        "observer_bound_repeats": sum(1 for run in good if run.get("observer_bound")),
    }


def comparisons(cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each comparison whose two cases ran: per figure, the ratio of repeat *i* to repeat *i*, median and range."""
    found = {}
    for name, (top, bottom) in COMPARISONS.items():
        if top not in cases or bottom not in cases:
            continue
        pairs = zip(cases[top]["runs"], cases[bottom]["runs"], strict=False)
        ratios: dict[str, list[float]] = {figure: [] for figure in _COMPARED}
        for a, b in pairs:
            if "error" in a or "error" in b:  # a failed repeat has no figure to compare
                continue
            for figure in _COMPARED:
                if a.get(figure) and b.get(figure):
                    ratios[figure].append(a[figure] / b[figure])
        # A ratio of a case that did not keep up compares a saturated pipeline: say so beside it.
        unsustained = [case for case in (top, bottom) if cases[case].get("sustained") is False]
        # ... and a case whose output the harness's reader could not keep up with measured the reader too
        observer_bound = [case for case in (top, bottom) if cases[case].get("observer_bound_repeats")]
        # ... and a case whose searched rate was the load generator's ceiling ran below its own
        load_bound = [case for case in (top, bottom) if cases[case].get("load_bound")]
        found[name] = {"numerator": top, "denominator": bottom, "not_sustained": unsustained,
                       "observer_bound": observer_bound, "load_bound": load_bound,
                       **{figure: _spread(values) for figure, values in ratios.items()}}
    return found


# -- the benchmark ---------------------------------------------------------------------

@dataclass
class _Progress:
    on_step: Callable[[str], None] | None = None
    steps: list[str] = field(default_factory=list)

    def __call__(self, text: str) -> None:
        self.steps.append(text)
        if self.on_step:
            self.on_step(text)


def _probe_duration(shortest_s: float, tooth_s: int, quick: bool) -> float:
    """A probe's length: at least ``shortest_s``, and long enough for :data:`_TEETH_PER_PROBE` teeth of the
    backlog's sawtooth seen so far (a pipeline with 5 s batches shows three in 20 s: too few to tell a backlog
    that keeps level from one that grows by 5 % of the rate), up to :data:`_LONGEST_PROBE_S` (half with --quick)."""
    longest = _LONGEST_PROBE_S / 2 if quick else _LONGEST_PROBE_S
    return float(max(shortest_s, min(longest, _TEETH_PER_PROBE * tooth_s)))


def _search_rate(env: Any, case: BenchCase, settings: BenchSettings, limit: float, folder: Path,
                 progress: _Progress) -> dict[str, Any]:
    probes, tooth_s = 0, 1

    def probe_for(shortest_s: float, label: str) -> Callable[[float], Probe]:
        def probe(rate: float) -> Probe:
            nonlocal probes, tooth_s
            probes += 1
            duration_s = _probe_duration(shortest_s, tooth_s, settings.quick)
            progress(f"{case.name}: {label} {probes} at {rate:,.0f} records/s for {duration_s:g} s")
            run = run_case(env, case, settings, rate, duration_s, folder / f"probe-{probes}",
                           settings.seed + probes, with_faults=False)
            if run.get("sustained"):  # a saturated pipeline's latency is its backlog's, not its batches'
                tooth_s = max(tooth_s, int(run.get("growth_window_s") or 1))
            details = {k: run.get(k) for k in ("input_records_per_s", "output_records_per_s",
                                               "backlog_growth_per_s", "growth_window_s", "lost",
                                               "generator_kept_up", "latency_p99_ms", "error") if k in run}
            return Probe(rate, bool(run.get("sustained")), {"duration_s": duration_s, **details})
        return probe

    precision = 0.25 if settings.quick else 0.1
    search = find_max_rate(probe_for(settings.probe_duration_s, "probe"), start=min(1000.0, limit), limit=limit,
                           precision=precision, max_probes=5 if settings.quick else 9)
    # The measured runs last longer than a probe: the rate must hold that long too.
    search = confirm_rate(search, probe_for(settings.duration_s, "confirming"), step=precision,
                          max_tries=2 if settings.quick else 3)
    found = search.as_dict()
    found.update(load_bound(found))
    return found


def _only_the_generator_fell_behind(probe: dict[str, Any]) -> bool:
    """A probe that failed only because the load generator could not produce its rate: the pipeline delivered
    everything it was offered, and its backlog stayed bounded at the rate that was offered."""
    offered = probe.get("input_records_per_s") or 0.0
    return (not probe.get("sustained") and probe.get("generator_kept_up") is False and not probe.get("error")
            and probe.get("lost", 0) == 0 and (probe.get("backlog_growth_per_s") or 0.0) <= _GROWTH_LIMIT * offered)


def load_bound(search: dict[str, Any]) -> dict[str, Any]:
    """Whether a rate search's ceiling is this machine's load generator's rather than the case's: every probe
    that failed failed only because the generator fell behind its schedule (on a small machine it shares the cores
    with Spark). Then ``max_rate`` is a lower bound of what the case sustains, and ``load_generator_records_per_s``
    the most the generator produced beside it."""
    failed = [p for p in [*search.get("probes", []), *search.get("confirmations", [])] if not p.get("sustained")]
    bound = bool(failed) and search.get("max_rate") is not None and all(map(_only_the_generator_fell_behind, failed))
    offered = max((p.get("input_records_per_s") or 0.0 for p in failed), default=0.0)
    return {"load_bound": bound, "load_generator_records_per_s": round(offered, 1) if bound else None}


def run_bench(settings: BenchSettings, cases: list[BenchCase], out: Path, env: Any = None,
              provider: str = "auto", command: str = "",
              on_step: Callable[[str], None] | None = None,
              render: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """Run every case ``settings.repeats`` times (cases interleaved within a repeat, the raw ceiling first); write
    ``out/bench.json`` after every run (an interrupted benchmark keeps what it measured, ``complete`` false) and
    ``render(out)`` at the end (:func:`streamcert.reports.render.render_bench_page`: ``out/bench.html``; reports
    are a layer above this one). Returns the results."""
    from streamcert.conformance.results import versions
    from streamcert.harness.stack.machine import machine_info
    from streamcert.harness.stack.spark_checkpoints import checkpoint_manager_mode

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = _Progress(on_step)
    results: dict[str, Any] = {
        "schema_version": BENCH_SCHEMA_VERSION, "benchmark": "streamcert bench", "kind": "bench", "command": command,
        "settings": settings.as_dict(), "provider": provider, "machine": machine_info(),
        # as a user's query on a default pyspark: Spark's checkpoint manager unless STREAMCERT_CHECKPOINT_MANAGER says
        "versions": {**versions(), "spark_checkpoint_manager": checkpoint_manager_mode()},
        "complete": False, "started_at": time.time(), "raw_ceiling": {"runs": []},
        "cases": {case.name: {"case": case.as_dict(), "runs": []} for case in cases}, "comparisons": {},
        "rate_search": {}}
    try:
        if env is not None:
            _measure_all(env, settings, cases, out, results, progress)
        else:
            from streamcert.harness.stack.environment import Environment, EnvironmentConfig

            with Environment(EnvironmentConfig(provider=provider)) as started:
                results["provider"] = started.provider
                _measure_all(started, settings, cases, out, results, progress)
        results["complete"] = True
    except BaseException as exc:
        results["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        results["duration_s"] = round(time.time() - results["started_at"], 3)
        _save(results, out)
        if render is not None:
            render(out)
    return results


def _measure_all(env: Any, settings: BenchSettings, cases: list[BenchCase], out: Path, results: dict[str, Any],
                 progress: _Progress) -> None:
    from streamcert.benchmarks.raw import measure_raw_ceiling

    direct = env.endpoints.kafka_direct_bootstrap or env.endpoints.bootstrap_servers
    rates: dict[str, float] = {}
    for repeat in range(settings.repeats):
        progress(f"repeat {repeat + 1}/{settings.repeats}: raw ceiling")
        try:
            ceiling = measure_raw_ceiling(direct, settings.record_bytes, settings.partitions,
                                          records=50_000 if settings.quick else 200_000,
                                          load=(env.endpoints.bootstrap_servers or direct, _LOAD_USERS)).as_dict()
        except Exception as exc:  # noqa: BLE001 - a case's numbers stand without it; the ratio says unknown
            ceiling = {"error": f"{type(exc).__name__}: {exc}"}
        results["raw_ceiling"]["runs"].append(ceiling)
        _summarize_ceiling(results["raw_ceiling"])
        _save(results, out)
        for case in cases:
            if case.name not in rates:
                rates[case.name] = _rate_for(env, case, settings, results, out, progress, ceiling)
            progress(f"repeat {repeat + 1}/{settings.repeats}: {case.name} at {rates[case.name]:,.0f} records/s "
                     f"for {settings.duration_s:g} s")
            folder = out / "runs" / case.name / f"repeat-{repeat + 1}"
            try:
                run = run_case(env, case, settings, rates[case.name], settings.duration_s, folder,
                               settings.seed + 1000 * repeat)
            except ConfigurationError:
                raise
            except Exception as exc:  # noqa: BLE001 - one case failing must not cost the others' numbers
                run = {"rate": rates[case.name], "error": f"{type(exc).__name__}: {exc}", "folder": str(folder)}
            body = results["cases"][case.name]
            body["runs"].append(run)
            body.update(summarize_repeats(body["runs"], results["raw_ceiling"]["runs"]))
            results["comparisons"] = comparisons(results["cases"])
            _save(results, out)


def _summarize_ceiling(raw: dict[str, Any]) -> None:
    ceilings = [c for c in raw["runs"] if "error" not in c]
    for figure in ("produce_records_per_s", "consume_records_per_s", "produce_mb_per_s", "consume_mb_per_s",
                   "observer_records_per_s", "load_generator_records_per_s"):
        raw[figure] = _spread([c.get(figure) for c in ceilings])


def _rate_for(env: Any, case: BenchCase, settings: BenchSettings, results: dict[str, Any], out: Path,
              progress: _Progress, ceiling: dict[str, Any]) -> float:
    if settings.rate is not None:
        return settings.rate
    limit = float(ceiling.get("produce_records_per_s") or 200_000.0)
    search = _search_rate(env, case, settings, limit, out / "runs" / case.name / "rate-search", progress)
    results["rate_search"][case.name] = search
    results["cases"][case.name]["load_bound"] = bool(search.get("load_bound"))
    if search["max_rate"] is None:
        raise ConfigurationError(f"Case {case.name} sustained no rate the search tried (down to "
                                 f"{min(p['rate'] for p in search['probes']):,.0f} records/s).",
                                 hint="Give a --rate it sustains, or look at the probes' runs under "
                                      f"{out / 'runs' / case.name / 'rate-search'}.")
    return float(search["max_rate"])


def with_derived_figures(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` (a bench.json, possibly of an older streamcert) with the figures derived from its measurements
    computed afresh: each rate search's load-bound judgement and the comparisons. The measurements are untouched."""
    import copy

    results = copy.deepcopy(results)
    cases = results.get("cases") or {}
    for name, search in (results.get("rate_search") or {}).items():
        search.update(load_bound(search))
        if name in cases:
            cases[name]["load_bound"] = search["load_bound"]
    if cases and all("runs" in body for body in cases.values()):
        results["comparisons"] = comparisons(cases)
    return results


def _save(results: dict[str, Any], out: Path) -> None:
    import json
    import os

    from streamcert.harness.redaction import redact

    partial = out / "bench.json.partial"
    partial.write_text(json.dumps(redact(results), indent=1, default=str))
    os.replace(partial, out / "bench.json")  # a reader never sees half a file
