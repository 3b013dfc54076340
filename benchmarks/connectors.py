"""Benchmark: reference connector throughput against Spark's built-in Kafka connector and the raw broker (SPEC §9).

    python -m streamcert.benchmarks.connectors --records 1000000 --record-bytes 100 --out results/bench/connectors.json

One local stack, one Spark session (local[2], like the machine), one topic loaded once with
``--records`` records of ``--record-bytes`` (read_committed, no aborts). Every case drains the whole
topic with ``Trigger.AvailableNow`` from a fresh checkpoint and is timed from ``start()`` to the end of
the query; records/s = records / seconds. Cases:

- ``raw_consume``: librdkafka (confluent-kafka) reading the topic in this process: the consume ceiling;
- ``source_noop``: ``streamcert-kafka`` -> Spark's ``noop`` sink;
- ``builtin_source_noop``: Spark's built-in ``kafka`` source -> ``noop`` (skipped if its jars cannot load);
- ``source_builtin_kafka_sink``: ``streamcert-kafka`` -> Spark's at-least-once ``kafka`` sink;
- ``source_kafka_2pc``: ``streamcert-kafka`` -> ``streamcert-kafka-2pc`` (stage + copy: every row written twice);
- ``source_pg_2pc``: ``streamcert-kafka`` -> ``streamcert-pg-2pc`` (COPY into prepared transactions).

A short warm-up query runs first (the first query of a session pays JVM and Python worker start-up).
Ratios compare cases measured in the same run, since absolute timings on shared machines drift.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamcert.harness.arguments import positive_int
from streamcert.benchmarks.raw import raw_consume

SCHEMA_VERSION = 1
ALL_CASES = ("raw_consume", "source_noop", "builtin_source_noop", "source_builtin_kafka_sink", "source_kafka_2pc",
             "source_pg_2pc")
_RATIOS = {
    "source_vs_builtin_source": ("source_noop", "builtin_source_noop"),
    "source_vs_raw_consume": ("source_noop", "raw_consume"),
    "builtin_source_vs_raw_consume": ("builtin_source_noop", "raw_consume"),
    "kafka_2pc_vs_builtin_kafka_sink": ("source_kafka_2pc", "source_builtin_kafka_sink"),
    "kafka_2pc_vs_source_noop": ("source_kafka_2pc", "source_noop"),
    "pg_2pc_vs_source_noop": ("source_pg_2pc", "source_noop"),
}


def _source(spark, bootstrap: str, topic: str, builtin: bool):
    if builtin:
        return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("kafka.isolation.level", "read_committed").load())
    return (spark.readStream.format("streamcert-kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load())


def _drain(writer, checkpoint: Path) -> int:
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return sum(p.get("numInputRows", 0) for p in (json.loads(q.json) for q in query.recentProgress))


def _case_writers(spark, env, topic: str, workdir: Path) -> dict[str, Callable[[], Any]]:
    from streamcert.harness.stack.kafka_clients import create_topic

    bootstrap = env.endpoints.bootstrap_servers

    def source_noop():
        return _source(spark, bootstrap, topic, False).writeStream.format("noop")

    def builtin_source_noop():
        return _source(spark, bootstrap, topic, True).writeStream.format("noop")

    def source_builtin_kafka_sink():
        output = f"bench-alo-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, output, partitions=4)
        return (_source(spark, bootstrap, topic, False).select("key", "value").writeStream.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap).option("topic", output))

    def source_kafka_2pc():
        output = f"bench-2pc-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, output, partitions=4)
        return (_source(spark, bootstrap, topic, False).select("key", "value").writeStream
                .format("streamcert-kafka-2pc").option("kafka.bootstrap.servers", bootstrap).option("topic", output)
                .option("sinkId", f"bench{uuid.uuid4().hex[:6]}"))

    def source_pg_2pc():
        return (_source(spark, bootstrap, topic, False).select("partition", "offset", "value").writeStream
                .format("streamcert-pg-2pc").option("dsn", env.endpoints.postgres_dsn)
                .option("table", f"bench_{uuid.uuid4().hex[:8]}").option("sinkId", f"bench{uuid.uuid4().hex[:6]}"))

    return {"source_noop": source_noop, "builtin_source_noop": builtin_source_noop,
            "source_builtin_kafka_sink": source_builtin_kafka_sink, "source_kafka_2pc": source_kafka_2pc,
            "source_pg_2pc": source_pg_2pc}


def run_benchmark(records: int, record_bytes: int, partitions: int, cases: Sequence[str], workdir: Path,
                  repeats: int = 1, results: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure ``cases``; fills ``results`` as it goes (so an interrupted run still has what it measured)."""
    from streamcert.connectors.kafka_sink import KafkaTwoPhaseSink
    from streamcert.connectors.kafka_source import KafkaOffsetSource
    from streamcert.connectors.pg_sink import PostgresTwoPhaseSink
    from streamcert.harness.stack.environment import Environment, EnvironmentConfig
    from streamcert.harness.stack.install import ensure_spark_kafka
    from streamcert.harness.stack.kafka_clients import create_topic
    from streamcert.harness.progress import step
    from streamcert.harness.stack.spark import SparkConfig
    from streamcert.harness.run.workload import WorkloadSpec, load_topic

    builtin_jars, builtin_error = [], None
    if {"builtin_source_noop", "source_builtin_kafka_sink"} & set(cases):
        try:
            builtin_jars = [str(p) for p in ensure_spark_kafka()]
        except Exception as exc:  # noqa: BLE001 - the baseline is optional: report why it is missing
            builtin_error = f"{type(exc).__name__}: {exc}"
    conf = {"spark.jars": ",".join(builtin_jars)} if builtin_jars else {}
    spark_config = SparkConfig(master="local[2]", conf=conf, app_name="streamcert-bench", driver_memory="4g",
                               jit="full")  # steady-state speed is what a benchmark measures
    results = results if results is not None else {}
    results.update({"cases": {}, "skipped": {}, "failed": {}, "ratios": {}})
    with Environment(EnvironmentConfig(provider="local", spark=spark_config)) as env:
        spark = env.spark
        for source in (KafkaOffsetSource, KafkaTwoPhaseSink, PostgresTwoPhaseSink):
            spark.dataSource.register(source)
        bootstrap = env.endpoints.bootstrap_servers
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, partitions=partitions)
        started = time.perf_counter()
        load_topic(bootstrap, topic, WorkloadSpec(total=records, keys=1000, partitions=partitions,
                                                   record_bytes=record_bytes, transaction_records=10_000, seed=1),
                   timeout=1800)
        results["load_seconds"] = round(time.perf_counter() - started, 3)
        warm = f"bench-warm-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, warm, partitions=partitions)
        load_topic(bootstrap, warm, WorkloadSpec(total=20_000, keys=100, partitions=partitions, seed=2))
        writers = _case_writers(spark, env, topic, workdir)
        with step("Warm-up query"):
            _drain(_source(spark, bootstrap, warm, False).writeStream.format("noop"), workdir / "warm-1")
            if builtin_jars:
                _drain(_source(spark, bootstrap, warm, True).writeStream.format("noop"), workdir / "warm-2")
        for case in cases:
            if case in ("builtin_source_noop", "source_builtin_kafka_sink") and not builtin_jars:
                results["skipped"][case] = builtin_error or "no jars"
                continue
            runs = []
            try:
                for repeat in range(repeats):
                    with step(f"{case} ({records:,} records, run {repeat + 1}/{repeats})"):
                        begin = time.perf_counter()
                        if case == "raw_consume":
                            rows = raw_consume(bootstrap, topic)
                        else:
                            rows = _drain(writers[case](), workdir / f"{case}-{repeat}")
                        seconds = time.perf_counter() - begin
                    runs.append({"rows": rows, "seconds": round(seconds, 3), "records_per_s": round(rows / seconds)})
            except Exception as exc:  # noqa: BLE001 - one failing case must not lose the others' numbers
                results["failed"][case] = f"{type(exc).__name__}: {str(exc)[:2000]}"
                continue
            best = max(runs, key=lambda r: r["records_per_s"])
            results["cases"][case] = {"runs": runs, "records_per_s": best["records_per_s"],
                                      "complete": all(r["rows"] == records for r in runs)}
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
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in ALL_CASES]
    if unknown or args.records < 1 or args.record_bytes < 48:
        print(f"streamcert: bad arguments (unknown cases {unknown}, records {args.records}, record bytes "
              f"{args.record_bytes}). Hint: cases are {', '.join(ALL_CASES)}; records >= 1; record bytes >= 48 "
              "(the workload header).", file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import tempfile

    from streamcert.harness.errors import StreamcertError
    from streamcert.harness.stack.machine import machine_info

    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "benchmark": "connectors", "complete": False,
        "machine": machine_info(),
        "parameters": {"records": args.records, "record_bytes": args.record_bytes, "partitions": args.partitions,
                       "repeats": args.repeats, "cases": cases, "master": "local[2]"}}
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="streamcert-bench-") as tmp:
            run_benchmark(args.records, args.record_bytes, args.partitions, cases, Path(tmp), args.repeats, results)
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
