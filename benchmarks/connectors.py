"""Benchmark: how fast each reference connector drains a backlog, against Spark's built-in Kafka connector and the
raw broker (SPEC §9).

    python -m streamcert.benchmarks.connectors --records 1000000 --record-bytes 100 --out results/bench/connectors.json

Each Spark case is a run of the one scenario runner (:func:`~streamcert.harness.scenario.run_scenario`), with its
own ``results.json``: the workload (``--records`` records of ``--record-bytes``, no aborted transactions) is loaded
into the run's input before the query starts; the query reads it with ``Trigger.AvailableNow`` in batches of at
most :data:`BATCHES_PER_DRAIN`-th of it, then ends; the run's checkers judge its output as in any run (a drain
that lost or duplicated records says so, and its figure is not reported as a case's). The drain rate comes from
Spark's own progress reports (the driver's events): the records of every batch after the first over the time from
the first batch's end to the query's end. The first batch pays Spark's and the Python workers' start-up, which a
query that falls behind and catches up does not. Cases:

- ``raw_consume``: librdkafka (confluent-kafka) reading a topic of the same records in this process: the ceiling
  (not a query);
- ``source_files``: ``streamcert-kafka`` -> Spark's file sink (``spark-files``);
- ``builtin_source_files``: Spark's built-in ``kafka`` source -> ``spark-files`` (skipped if its jars cannot load);
- ``source_builtin_kafka_sink``: ``streamcert-kafka`` -> Spark's at-least-once ``kafka`` sink;
- ``source_kafka_2pc``: ``streamcert-kafka`` -> ``streamcert-kafka-2pc`` (stage + copy: every row written twice);
- ``source_pg_2pc``: ``streamcert-kafka`` -> ``streamcert-pg-2pc`` (COPY into prepared transactions);
- ``skewed_source_files`` and ``aligned_source_files``: ``streamcert-kafka`` -> ``spark-files`` on a skewed backlog
  (SRC-11's: the last partition two hours ahead in event time), without and with event-time alignment
  (``maxAllowedDriftMs``): what alignment costs a backlog (the probe's reads, the batches that hold a partition back).

Ratios compare cases measured in the same run, since absolute timings on shared machines drift. ``streamcert
bench`` measures the other figure, the rate a pipeline sustains under an open-loop load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamcert.benchmarks.raw import raw_consume
from streamcert.harness.arguments import positive_int

__all__ = ["SCHEMA_VERSION", "ALL_CASES", "SPARK_CASES", "BATCHES_PER_DRAIN", "drain_scenario", "drain_figures",
           "run_benchmark", "main"]

SCHEMA_VERSION = 2
#: The Spark cases: name -> (source, sink), each a declared connector.
SPARK_CASES: dict[str, tuple[str, str]] = {
    "source_files": ("streamcert-kafka", "spark-files"),
    "builtin_source_files": ("spark-kafka", "spark-files"),
    "source_builtin_kafka_sink": ("streamcert-kafka", "spark-kafka-sink"),
    "source_kafka_2pc": ("streamcert-kafka", "streamcert-kafka-2pc"),
    "source_pg_2pc": ("streamcert-kafka", "streamcert-pg-2pc"),
    "skewed_source_files": ("streamcert-kafka", "spark-files"),
    "aligned_source_files": ("streamcert-kafka", "spark-files"),
}
#: Cases on SRC-11's skewed backlog; value: the drift bound asked for (None: no alignment).
_SKEWED_CASES: dict[str, int | None] = {"skewed_source_files": None, "aligned_source_files": 15 * 60 * 1000}
ALL_CASES = ("raw_consume", *SPARK_CASES)
#: A drain reads its backlog in about this many batches: enough after the first (start-up) one to time.
BATCHES_PER_DRAIN = 20
_RATIOS = {
    "source_vs_builtin_source": ("source_files", "builtin_source_files"),
    "source_vs_raw_consume": ("source_files", "raw_consume"),
    "builtin_source_vs_raw_consume": ("builtin_source_files", "raw_consume"),
    "kafka_2pc_vs_builtin_kafka_sink": ("source_kafka_2pc", "source_builtin_kafka_sink"),
    "kafka_2pc_vs_source_files": ("source_kafka_2pc", "source_files"),
    "pg_2pc_vs_source_files": ("source_pg_2pc", "source_files"),
    "aligned_vs_unaligned_skewed": ("aligned_source_files", "skewed_source_files"),
}
#: The built-in Kafka connector's cases: skipped, with the reason, where its jars cannot be had.
_BUILTIN_CASES = ("builtin_source_files", "source_builtin_kafka_sink")


def drain_scenario(case: str, records: int, record_bytes: int, partitions: int, seed: int = 1):
    """The scenario of Spark case ``case``: the whole workload in the input before the query starts, read with
    ``Trigger.AvailableNow``, no faults (a skewed case's records stamped with SRC-11's event times)."""
    from streamcert.harness.run.workload import WorkloadSpec
    from streamcert.harness.scenario import Scenario
    from streamcert.spi.connector import DRIFT_OPTION

    source, sink = SPARK_CASES[case]
    skew = {}
    options: dict[str, Any] = {"max_records_per_batch": max(100, -(-records // BATCHES_PER_DRAIN))}
    if case in _SKEWED_CASES:
        step = max(1, 2 * 3600 * 1000 * partitions // records)  # each partition's records span about 2 h
        skew = {"event_time_step_ms": step, "event_time_lead_ms": 2 * 3600 * 1000}
        if _SKEWED_CASES[case] is not None:
            options[DRIFT_OPTION] = _SKEWED_CASES[case]
    return Scenario(name=f"drain-{case}", source=source, sink=sink, trigger="available_now", load_before_start=True,
                    workload=WorkloadSpec(total=records, keys=1000, partitions=partitions, record_bytes=record_bytes,
                                          aborted_fraction=0.0, transaction_records=10_000, seed=seed, **skew),
                    options=options, parallelism=2, quiet_timeout_s=120.0, settle_s=5.0)


def drain_figures(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The drain rate of one driver attempt's events (``started``, ``progress``..., ``terminated``): records of the
    batches after the first over the seconds from the first batch's report to the query's end; None when the query
    did not end by itself or read everything in one batch (nothing to time past its start-up)."""
    progress = [e for e in events if e.get("event") == "progress" and e.get("numInputRows", 0) > 0]
    ended = [e for e in events if e.get("event") == "terminated" and not e.get("error")]
    if len(progress) < 2 or not ended:
        return None
    rows = sum(int(e["numInputRows"]) for e in progress[1:])
    seconds = ended[-1]["time"] - progress[0]["time"]
    started = next((e["time"] for e in events if e.get("event") == "started"), progress[0]["time"])
    return {"rows": rows + int(progress[0]["numInputRows"]), "timed_rows": rows, "seconds": round(seconds, 3),
            "records_per_s": round(rows / seconds) if seconds > 0 else None, "batches": len(progress),
            "first_batch_s": round(progress[0]["time"] - started, 3)}


def _spark_case(env: Any, case: str, records: int, record_bytes: int, partitions: int, folder: Path) -> dict:
    """One drain run of ``case``: its figures and the run's verdict, or why it has none."""
    from streamcert.conformance.evidence import read_driver_events
    from streamcert.harness.scenario import run_scenario

    result = run_scenario(env, drain_scenario(case, records, record_bytes, partitions), folder)
    run = {"folder": str(folder), "valid": result.valid, "checks": {c["name"]: c["valid"] for c in result.checks}}
    if not result.complete:
        return {**run, "error": (result.error or "the run did not complete").splitlines()[0]}
    figures = drain_figures(read_driver_events(folder / "driver" / "driver-events.jsonl"))
    if figures is None:
        return {**run, "error": "the query did not drain its input in more than one batch and end by itself"}
    if result.valid is not True:
        return {**run, **figures, "error": "the run's checks did not pass: " + ", ".join(
            name for name, valid in run["checks"].items() if valid is not True)}
    return {**run, **figures, "complete": figures["rows"] == records}


def _raw_case(env: Any, records: int, record_bytes: int, partitions: int) -> dict:
    from streamcert.harness.run.workload import WorkloadSpec, load_topic
    from streamcert.harness.stack.kafka_clients import create_topic

    bootstrap = env.endpoints.bootstrap_servers
    topic = f"bench-raw-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=partitions)
    load_topic(bootstrap, topic, WorkloadSpec(total=records, keys=1000, partitions=partitions,
                                              record_bytes=record_bytes, transaction_records=10_000, seed=1),
               timeout=1800)
    began = time.perf_counter()
    rows = raw_consume(bootstrap, topic)
    seconds = time.perf_counter() - began
    return {"rows": rows, "seconds": round(seconds, 3), "records_per_s": round(rows / seconds),
            "complete": rows == records}


def run_benchmark(records: int, record_bytes: int, partitions: int, cases: Sequence[str], workdir: Path,
                  repeats: int = 1, results: dict[str, Any] | None = None, env: Any = None) -> dict[str, Any]:
    """Measure ``cases`` on ``env`` (a local stack started here when None); fills ``results`` as it goes (an
    interrupted run keeps what it measured)."""
    from streamcert.harness.progress import step
    from streamcert.harness.stack.environment import Environment, EnvironmentConfig
    from streamcert.harness.stack.install import ensure_spark_kafka

    results = results if results is not None else {}
    results.update({"cases": {}, "skipped": {}, "failed": {}, "ratios": {}})
    builtin_error = None
    if set(_BUILTIN_CASES) & set(cases):
        try:
            ensure_spark_kafka()
        except Exception as exc:  # noqa: BLE001 - the baseline is optional: report why it is missing
            builtin_error = f"{type(exc).__name__}: {exc}"
    if env is None:
        with Environment(EnvironmentConfig(provider="local")) as started:
            return run_benchmark(records, record_bytes, partitions, cases, workdir, repeats, results, started)
    for case in cases:
        if case in _BUILTIN_CASES and builtin_error:
            results["skipped"][case] = builtin_error
            continue
        runs = []
        for repeat in range(repeats):
            with step(f"{case} ({records:,} records, run {repeat + 1}/{repeats})"):
                if case == "raw_consume":
                    runs.append(_raw_case(env, records, record_bytes, partitions))
                else:
                    runs.append(_spark_case(env, case, records, record_bytes, partitions,
                                            Path(workdir) / f"{case}-{repeat}"))
        good = [run for run in runs if "error" not in run]
        if not good:
            results["failed"][case] = runs[-1]["error"]
            continue
        best = max(good, key=lambda r: r["records_per_s"])
        results["cases"][case] = {"runs": runs, "records_per_s": best["records_per_s"],
                                  "complete": all(run.get("complete") for run in good)}
        results["ratios"] = _ratios(results["cases"])
    return results


def _ratios(cases: dict[str, Any]) -> dict[str, float]:
    rates = {k: v["records_per_s"] for k, v in cases.items()}
    return {name: round(rates[a] / rates[b], 3) for name, (a, b) in _RATIOS.items() if a in rates and b in rates}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamcert.benchmarks.connectors",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=positive_int, default=1_000_000)
    parser.add_argument("--record-bytes", type=positive_int, default=100)
    parser.add_argument("--partitions", type=positive_int, default=4)
    parser.add_argument("--repeats", type=positive_int, default=1)
    parser.add_argument("--cases", default=",".join(ALL_CASES), help=f"comma-separated, of: {', '.join(ALL_CASES)}")
    parser.add_argument("--out", type=Path, default=Path("results/bench/connectors.json"))
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each run's folder (results.json, output, driver events) here")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in ALL_CASES]
    if unknown or args.record_bytes < 48 or args.records < BATCHES_PER_DRAIN:
        print(f"streamcert: bad arguments (unknown cases {unknown}, records {args.records}, record bytes "
              f"{args.record_bytes}). Hint: cases are {', '.join(ALL_CASES)}; records >= {BATCHES_PER_DRAIN} (a "
              "drain is timed past its first batch); record bytes >= 48 (the workload header).", file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import tempfile

    from streamcert.harness.errors import StreamcertError
    from streamcert.harness.stack.machine import machine_info

    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "benchmark": "connectors", "complete": False,
        "machine": machine_info(),
        "parameters": {"records": args.records, "record_bytes": args.record_bytes, "partitions": args.partitions,
                       "repeats": args.repeats, "cases": cases, "batches_per_drain": BATCHES_PER_DRAIN}}
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="streamcert-bench-") as tmp:
            workdir = args.keep or Path(tmp)
            run_benchmark(args.records, args.record_bytes, args.partitions, cases, workdir, args.repeats, results)
        report["complete"] = True
    except KeyboardInterrupt:
        print("streamcert: interrupted; writing what was measured, marked incomplete.", file=sys.stderr)
    except StreamcertError as exc:  # the stack could not start: say why in one paragraph
        print(f"streamcert: {exc}", file=sys.stderr)
        report["error"] = str(exc)
    finally:
        report.update(results)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"cases": {k: v["records_per_s"] for k, v in results.get("cases", {}).items()},
                      "ratios": results.get("ratios", {}), "skipped": results.get("skipped", {}),
                      "failed": results.get("failed", {})}, indent=2))
    if not report["complete"]:
        return 2 if "error" in report else 130
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
