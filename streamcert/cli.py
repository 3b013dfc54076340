"""The ``streamcert`` command line.

Errors a user can act on are printed as one paragraph with a hint and exit
with code 2; an interrupted command tears down what it started and exits 130;
anything else is a bug in streamcert, reported in one line (``--debug`` shows
the traceback) with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from streamcert.harness.arguments import positive_int, positive_seconds, seed
from streamcert.harness.errors import StreamcertError
from streamcert.harness.interrupts import terminate_as_interrupt
from streamcert.harness.stack.providers import PROVIDERS

from . import __version__

if TYPE_CHECKING:
    from streamcert.conformance.results import CertificationResult

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _print_table(rows: list[tuple[str, ...]], headers: tuple[str, ...]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*headers, show_lines=False)
    for row in rows:
        table.add_row(*row)
    Console(stderr=False, highlight=False, width=max(100, min(160, _terminal_width()))).print(table)


def _terminal_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 120


# -- env check -------------------------------------------------------------------

def _env_check(args: argparse.Namespace) -> int:
    from streamcert.harness.stack.doctor import diagnose, required_failures

    checks = diagnose()
    failures = required_failures(checks)
    if args.json:
        print(json.dumps({"ok": not failures, "checks": [check.as_dict() for check in checks]}))
    else:
        rows = [(("[green]ok[/green]" if c.ok else ("[red]MISSING[/red]" if c.required else "[yellow]no[/yellow]")),
                 c.name, c.detail + (f"\n[dim]hint: {c.hint}[/dim]" if c.hint and not c.ok else ""))
                for c in checks]
        _print_table(rows, ("status", "check", "detail"))
        if failures:
            print(f"{len(failures)} required prerequisite(s) missing: "
                  f"{', '.join(c.name for c in failures)}.", file=sys.stderr)
    return EXIT_FAILED if failures else EXIT_OK


# -- env clean -------------------------------------------------------------------

def _env_clean(args: argparse.Namespace) -> int:
    from streamcert.harness.stack.runs import reap_orphans, survey

    before = survey()
    report = reap_orphans()
    live = [state for state in before if not state.orphan]
    if args.json:
        print(json.dumps({**report.as_dict(), "live_runs": [state.describe() for state in live]}))
    else:
        for state in before:
            if state.orphan:
                print(f"reaped {state.describe()}")
        for state in live:
            print(f"left alone: {state.describe()}")
        print(report.summary() + (f"; {len(live)} live run(s) left alone" if live else ""))
    if report.still_alive:
        print(f"{len(report.still_alive)} process(es) survived SIGKILL: {report.still_alive[:10]}. They are stuck "
              "in the kernel (uninterruptible I/O); look at them with `ps -o pid,stat,wchan -p PID`.",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# -- env up ----------------------------------------------------------------------

def _env_up(args: argparse.Namespace) -> int:
    from streamcert.harness.redaction import redact
    from streamcert.harness.stack.environment import Environment, EnvironmentConfig
    from streamcert.harness.stack.spark import SparkConfig

    config = EnvironmentConfig(provider=args.provider, kafka_heap_mb=args.kafka_heap_mb, brokers=args.brokers,
                               spark=SparkConfig(master=args.spark_master, workers=args.spark_workers)
                               if args.spark else None)
    with Environment(config) as env:
        endpoints = redact(env.endpoints.as_dict())
        _print_table([(name, str(value)) for name, value in endpoints.items()], ("endpoint", "address"))
        print(json.dumps({"provider": env.provider, "startup_s": round(env.startup_seconds or 0, 2),
                          "run_token": env.run_token, **endpoints}), flush=True)
        print("Stack is up. Press Ctrl-C to stop it.", file=sys.stderr, flush=True)
        stop = threading.Event()
        if args.for_seconds is not None:
            stop.wait(args.for_seconds)
        else:
            while not stop.wait(3600):
                pass
    print("Stack stopped.", file=sys.stderr)
    return EXIT_OK


# -- env smoke -------------------------------------------------------------------

def _env_smoke(args: argparse.Namespace) -> int:
    from streamcert.harness.redaction import redact
    from streamcert.harness.stack.smoke import failed_expectations, run_smoke

    result = run_smoke(provider=args.provider, spark_master=args.spark_master, spark_workers=args.spark_workers,
                       brokers=args.brokers)
    failed = failed_expectations(result)
    result["ok"] = not failed
    result["failed"] = failed
    for name, error in result.get("errors", {}).items():
        print(f"smoke step {name} failed: {error}", file=sys.stderr)
    reasons: dict[str, list[str]] = {}
    for name, why in result.get("skipped", {}).items():
        reasons.setdefault(why, []).append(name)
    for why, names in reasons.items():
        print(f"smoke: skipped {', '.join(names)}: {why}.", file=sys.stderr)
    if failed:
        print(f"smoke: {len(failed)} expectation(s) not met: {', '.join(failed)}", file=sys.stderr)
    print(json.dumps(redact(result), default=str), flush=True)
    return EXIT_OK if not failed else EXIT_FAILED


# -- parser and entry point ----------------------------------------------------------

# -- requirements ----------------------------------------------------------------

def _requirements(args: argparse.Namespace) -> int:
    from streamcert.conformance.catalogue import requirements

    found = requirements(args.kind)
    if args.json:
        print(json.dumps([req.model_dump(mode="json") for req in found], indent=2))
        return EXIT_OK
    _print_table([(req.id + (" (optional)" if req.optional else ""), req.kind, req.statement,
                   ", ".join(req.runs) or "-", ", ".join(req.fault_families) or "-", ", ".join(req.checks),
                   ", ".join(req.witnesses) or "-")
                  for req in found], ("ID", "kind", "statement", "runs", "fault families", "decided by", "witnesses"))
    return EXIT_OK


# -- certify ---------------------------------------------------------------------

_VERDICT_STYLE = {"pass": "[green]pass[/green]", "fail": "[red]FAIL[/red]", "skip": "[dim]skip[/dim]",
                  "unknown": "[yellow]unknown[/yellow]"}


def _certify(args: argparse.Namespace) -> int:

    from streamcert.conformance.certify import certify, default_jobs, prepare
    from streamcert.reports.render import render_reports

    wanted = [item.strip() for value in args.requirements or [] for item in value.split(",") if item.strip()]
    certification = prepare(args.connector, wanted or None, seed=args.seed, quick=args.quick,
                            cooperative=not args.no_cooperative, fail_fast=args.fail_fast,
                            strict=not args.no_strict, spark_master=args.spark_master, shard=args.shard)
    out = _out_folder(args.out)
    command = shlex.join(["streamcert", *args.argv])
    runs = len(certification.runs) - len(certification.elsewhere)
    shard = f" (shard {certification.shard}: {len(certification.elsewhere)} run(s) in the others)" \
        if certification.shard else ""
    print(f"streamcert certify: {len(certification.connectors)} connector(s), {runs} scenario "
          f"run(s){shard}, seed {args.seed}{' (quick)' if args.quick else ''}; results in {out / 'results.json'}",
          file=sys.stderr, flush=True)
    jobs = args.jobs or default_jobs()
    if jobs > 1:
        print(f"streamcert certify: {jobs} runs at once, each on a stack of its own", file=sys.stderr, flush=True)
    with _RunProgress(runs) as progress:
        result = certify(certification, out, provider=args.provider, command=command, on_run=progress.update,
                         jobs=jobs, render=render_reports)
    _print_verdicts(result)
    counts = result.counts()
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['unknown']} unknown, {counts['skip']} "
          f"skipped in {result.duration_s:.0f} s; {out / 'results.json'}, {out / 'report.html'}", file=sys.stderr)
    if result.cpu and result.cpu.get("busy_share") is not None:
        print(_cpu_line(result.cpu), file=sys.stderr)
    elsewhere = sum(1 for verdict in result.verdicts if result.passed_here(verdict))
    if elsewhere:
        print(f"{elsewhere} of the unknown passed here and wait for their runs in the other shards: "
              "`streamcert merge` the shards' results.json for their verdicts", file=sys.stderr)
    _say_full_plan_only(result)
    return EXIT_OK if result.gate_passed() else EXIT_FAILED


def _cpu_line(cpu: dict) -> str:
    """The certification's CPU figures in a line: whether its time went to work or to waits."""
    return (f"CPU: {cpu['busy_s']:.0f} s busy over {cpu['cores']} core(s) ({cpu['busy_share']:.0%} of them, "
            f"{cpu['nice_s']:.0f} s of it the standbys' lowered priority): the same work takes at least "
            f"{cpu['floor_s']:.0f} s on this machine")


def _say_full_plan_only(result: "CertificationResult") -> None:
    waiting = sum(1 for verdict in result.verdicts if result.full_plan_only(verdict))
    if waiting:
        outcome = "every requirement it judged passed" if result.gate_passed() else "it did not pass"
        print(f"quick plan: {outcome}; {waiting} of the unknown are judged only by the full certification (run it "
              "without --quick for a certificate)", file=sys.stderr)


def _merge(args: argparse.Namespace) -> int:
    from streamcert.conformance.merge import merge
    from streamcert.reports.render import render_reports

    out = _out_folder(args.out)
    result = merge([Path(path) for path in args.results], out, command=shlex.join(["streamcert", *args.argv]),
                   render=render_reports)
    _print_verdicts(result)
    counts = result.counts()
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['unknown']} unknown, {counts['skip']} "
          f"skipped, merged from {len(args.results)} shard(s); {out / 'results.json'}, {out / 'report.html'}",
          file=sys.stderr)
    _say_full_plan_only(result)
    return EXIT_OK if result.gate_passed() else EXIT_FAILED


def _report(args: argparse.Namespace) -> int:
    from streamcert.reports.render import render_results

    for path in render_results(args.results, _out_folder(args.out) if args.out else None):
        print(path)
    return EXIT_OK


def _matrix(args: argparse.Namespace) -> int:
    from streamcert.reports.render import render_matrix

    for path in render_matrix(args.results, _out_folder(args.out)):
        print(path)
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from streamcert.reports.compare import compare_files
    from streamcert.reports.regression import parse_check

    comparison = compare_files(args.baseline, args.candidate, [parse_check(text) for text in args.check])
    for line in comparison.lines() or [f"no {comparison.kind} difference"]:
        print(line)
    if args.out:

        from streamcert.reports.compare_html import compare_html

        out = _out_folder(args.out)
        (out / "compare.html").write_text(compare_html(comparison))
        print(out / "compare.html", file=sys.stderr)
    return EXIT_FAILED if comparison.regressed else EXIT_OK


# -- bench -----------------------------------------------------------------------

#: What --quick adds unless --fault or --no-fault is given: a 3 s Kafka outage, so recovery is measured too.
_QUICK_FAULT = '{"fault": "down", "target": "kafka", "at_s": 6, "duration_s": 3}'


def _rate(text: str) -> float | None:
    if text == "max":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected records per second or max, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of records per second, got {text}")
    return value


def _faults(texts: list[str]) -> tuple:
    """Each --fault: a schedule file, or the JSON of one entry or of a list of entries."""

    from streamcert.harness.faults.schedule import parse

    specs = []
    for text in texts:
        stripped = text.strip()
        source = stripped if stripped.startswith(("{", "[")) else None
        if source is None:
            path = Path(text)
            if not path.is_file():
                raise StreamcertError(f"--fault {text!r} is neither a JSON fault entry nor a schedule file.",
                                      hint=f"Give an entry such as '{_QUICK_FAULT}' or the path of a schedule "
                                           "(python -m streamcert.harness.faults.schedule --schema).")
            source = path.read_text()
        try:
            data = json.loads(source)
        except ValueError as exc:
            raise StreamcertError(f"--fault {text[:200]!r} is not JSON: {exc}.",
                                  hint=f"Give an entry such as '{_QUICK_FAULT}'.") from None
        specs.extend(parse([data] if isinstance(data, dict) and "fault" in data else data))
    return tuple(specs)


def _bench(args: argparse.Namespace) -> int:

    from rich.console import Console

    from streamcert.benchmarks.bench import BenchSettings, resolve_cases, run_bench
    from streamcert.reports.render import render_bench_page

    if args.fault and args.no_fault:
        raise StreamcertError("--fault and --no-fault were both given.", hint="Give one of them.")
    fault_texts = args.fault or ([_QUICK_FAULT] if args.quick and not args.no_fault else [])
    duration = args.duration if args.duration is not None else (15.0 if args.quick else 30.0)
    repeats = args.repeats if args.repeats is not None else (2 if args.quick else 3)
    settings = BenchSettings(rate=args.rate, duration_s=duration, record_bytes=args.record_size, repeats=repeats,
                             seed=args.seed, faults=_faults(fault_texts), quick=args.quick,
                             probe_duration_s=12.0 if args.quick else 20.0)
    cases = resolve_cases(args.connector)
    out = _out_folder(args.out)
    console = Console(stderr=True, highlight=False)
    console.print(f"streamcert bench: {len(cases)} case(s) ({', '.join(c.name for c in cases)}), {repeats} "
                  f"repeat(s) of {duration:g} s; results in {out / 'bench.json'}")
    results = run_bench(settings, cases, out, provider=args.provider, command=shlex.join(["streamcert", *args.argv]),
                        on_step=lambda text: console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}"),
                        render=render_bench_page)
    rows = []
    for name, body in results["cases"].items():
        spread = body.get("spread") or {}
        latency = body.get("latency_ms") or {}
        rows.append((name, _fmt(body.get("records_per_s")), _fmt(body.get("mb_per_s"), 3),
                     _fmt(latency.get("p50"), 1), _fmt(latency.get("p99"), 1), _fmt(latency.get("max"), 1),
                     _fmt((spread.get("backlog_max") or {}).get("median")), str(body.get("sustained"))))
    _print_table(rows, ("case", "records/s", "MB/s", "p50 ms", "p99 ms", "max ms", "backlog max", "sustained"))
    for name, body in results["comparisons"].items():
        ratio = body.get("output_records_per_s") or {}
        p99 = body.get("latency_p99_ms") or {}
        print(f"{name}: throughput x{_fmt(ratio.get('median'), 3)} (min {_fmt(ratio.get('min'), 3)}, max "
              f"{_fmt(ratio.get('max'), 3)}), p99 latency x{_fmt(p99.get('median'), 3)}")
    print(f"{out / 'bench.json'}, {out / 'bench.html'}", file=sys.stderr)
    failed = sum(body.get("failed_repeats", 0) for body in results["cases"].values())
    return EXIT_FAILED if failed else EXIT_OK


def _fmt(value, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


class _RunProgress:
    """A live line per certification: which scenario of which connector runs, and how each run ended."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True, highlight=False, width=max(100, min(160, _terminal_width())))
        quiet = os.environ.get("STREAMCERT_QUIET") == "1"
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, disable=quiet, transient=False)
        self.task = self.progress.add_task("certify", total=total)

    def __enter__(self) -> "_RunProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def update(self, phase: str, planned, result) -> None:
        what = f"{planned.connector} / {planned.name} ({', '.join(planned.judges)})"
        if phase == "start":
            self.progress.update(self.task, description=f"running {what}")
            return
        self.progress.advance(self.task)
        if phase == "spared":  # a shared run judged it: its own run is not needed
            self.progress.console.print(f"{what}: judged on {planned.hosted_by}'s {planned.name}, which reads "
                                        "through it; its own run is not needed")
            return
        failing = [c["name"] for c in result.checks if c["valid"] is not True]
        state = ("[red]error[/red]" if not result.complete else
                 "[green]ok[/green]" if not failing else f"[yellow]{', '.join(failing)}[/yellow]")
        self.progress.console.print(f"{what}: {state} in {result.duration_s:.0f} s, "
                                    f"{result.driver_attempts} driver attempt(s)")


def _print_verdicts(result) -> None:
    rows = [(v.connector, v.requirement, _VERDICT_STYLE[v.verdict], _shorten(v.reason, 150))
            for v in result.verdicts]
    _print_table(rows, ("connector", "requirement", "verdict", "reason"))


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _master(text: str) -> str:
    from streamcert.harness.stack.spark import validate_master

    try:
        return validate_master(text)
    except StreamcertError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shard(text: str):
    from streamcert.conformance.shards import parse_shard

    try:
        return parse_shard(text)
    except StreamcertError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    from streamcert.harness.stack.spark import DEFAULT_MASTER

    parser = argparse.ArgumentParser(
        prog="streamcert",
        description="Conformance tests and benchmarks for streaming connectors on Apache Spark.",
    )
    parser.add_argument("--version", action="version", version=f"streamcert {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and client logs")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    env = commands.add_parser("env", help="the local stack: check prerequisites, start it, smoke-test it, clean up")
    env_commands = env.add_subparsers(dest="env_command", metavar="ACTION", required=True)

    check = env_commands.add_parser("check", help="diagnose prerequisites and caches")
    check.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    check.set_defaults(func=_env_check)

    clean = env_commands.add_parser("clean", help="reap runs whose owner was killed: their servers and work "
                                    "folders (live runs of other processes are left alone)")
    clean.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    clean.set_defaults(func=_env_clean)

    def stack_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--provider", choices=PROVIDERS, default=os.environ.get("STREAMCERT_PROVIDER", "auto"),
                         help="where the servers come from (default: auto = testcontainers if Docker answers, "
                         "else local)")
        sub.add_argument("--spark-master", type=_master, default=DEFAULT_MASTER,
                         help=f"Spark master URL (default {DEFAULT_MASTER}; local-cluster[2,1,1024] for "
                         "executor JVMs; standalone: a standalone cluster of worker JVMs that streamcert starts)")
        sub.add_argument("--spark-workers", type=positive_int, default=2, metavar="N",
                         help="workers of the standalone cluster (--spark-master standalone; default 2)")
        sub.add_argument("--brokers", type=positive_int, default=1, metavar="N",
                         help="Kafka brokers (default 1; 3: a KRaft cluster, replication factor 3, min ISR 2, every "
                              "path between brokers through Toxiproxy; local provider)")

    up = env_commands.add_parser("up", help="start the stack, print endpoints, run until Ctrl-C")
    stack_options(up)
    up.add_argument("--spark", action="store_true", help="also start a Spark session")
    up.add_argument("--kafka-heap-mb", type=positive_int, default=512, help="broker JVM heap (default 512)")
    up.add_argument("--for-seconds", type=positive_seconds, default=None, help=argparse.SUPPRESS)
    up.set_defaults(func=_env_up)

    smoke = env_commands.add_parser("smoke", help="start the stack, exercise every part, tear down; "
                                    "the last stdout line is a JSON object")
    stack_options(smoke)
    smoke.set_defaults(func=_env_smoke)

    listing = commands.add_parser("requirements", help="print the conformance requirement catalogue")
    listing.add_argument("--kind", choices=("source", "sink", "aggregator", "broker"), default=None,
                         help="only what applies to a connector of this kind (its own and the general ones), or "
                              "to the Kafka cluster under the failover runs (broker)")
    listing.add_argument("--json", action="store_true", help="a JSON list instead of a table")
    listing.set_defaults(func=_requirements)

    cert = commands.add_parser("certify", help="certify connectors: run their scenarios, judge every requirement, "
                               "write results.json")
    cert.add_argument("--connector", action="extend", nargs="+", metavar="NAME|module:attr",
                      help="connector(s) under test (repeatable; default: every reference connector)")
    cert.add_argument("--requirements", action="append", metavar="IDS",
                      help="only these requirement IDs, comma-separated (repeatable), e.g. SNK-1,SNK-4")
    cert.add_argument("--quick", action="store_true", help="fewer scenarios and faults (a few minutes)")
    cert.add_argument("--seed", type=seed, default=1, help="seed of workloads and fault schedules (default 1); "
                      "the same seed replays the same schedules")
    cert.add_argument("--out", default="results/certification", metavar="DIR",
                      help="where results.json and each run's evidence go (default results/certification)")
    cert.add_argument("--no-cooperative", action="store_true",
                      help="leave the connectors' own fault points (kill_points, fail_points) out: certify on the "
                           "faults that need no cooperation only")
    cert.add_argument("--fail-fast", action="store_true",
                      help="end each run's faults at its first finding (a record delivered twice): a failing "
                           "connector fails sooner; requirements the cancelled faults would have reached are unknown")
    cert.add_argument("--no-strict", action="store_true",
                      help="allow requirements a connector neither claims nor waives (they are skipped)")
    cert.add_argument("--provider", choices=PROVIDERS, default=os.environ.get("STREAMCERT_PROVIDER", "auto"),
                      help="where the servers come from (default: auto)")
    cert.add_argument("--spark-master", type=_master, default=None, metavar="MASTER",
                      help="run every query on this master instead of the plan's local ones: your cluster "
                           "(spark://host:port) or a standalone cluster streamcert starts per run (standalone); "
                           "runs and faults that need executors on this machine are then skipped with the reason")
    cert.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                      help="runs at once, each on a stack of its own (default: one per 2 cores and per 4 GiB of "
                           "available memory, at least 1)")
    cert.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                      help="run only shard I of N of the plan (balanced by each run's expected time; the same plan "
                           "splits the same way everywhere); `streamcert merge` makes one certification of them")
    cert.set_defaults(func=_certify)

    merging = commands.add_parser("merge", help="one certification from its shards' results (certify --shard I/N): "
                                                "every verdict judged again from all their runs")
    merging.add_argument("results", nargs="+", metavar="RESULTS.json",
                         help="each shard's results.json (or its --out folder), every shard once")
    merging.add_argument("--out", default="results/certification", metavar="DIR",
                         help="where the merged results.json, reports and runs go (default results/certification)")
    merging.set_defaults(func=_merge)

    report = commands.add_parser("report", help="render a certification's report.html, junit.xml and summary.md "
                                                "from its results.json, or a benchmark's bench.html from bench.json")
    report.add_argument("results", metavar="RESULTS.json",
                        help="a certification's results.json or a benchmark's bench.json (or the folder holding it)")
    report.add_argument("--out", metavar="DIR", help="where the reports go (default: beside results.json)")
    report.set_defaults(func=_report)

    matrix = commands.add_parser("matrix", help="one page of connectors x requirements from any number of "
                                                "certification results, each cell linked to its evidence")
    matrix.add_argument("results", nargs="+", metavar="RESULTS.json", help="certifications' results.json files "
                                                                          "(or their folders)")
    matrix.add_argument("--out", default="results/matrix", metavar="DIR",
                        help="where matrix.html and matrix.md go (default results/matrix)")
    matrix.set_defaults(func=_matrix)

    bench = commands.add_parser("bench", help="throughput and end-to-end latency of connector pipelines under "
                                              "open-loop load; bench.json and bench.html")
    bench.add_argument("--connector", action="extend", nargs="+", metavar="CASE|NAME|module:attr",
                       help="cases to measure (repeatable): a case name (reference, builtin, builtin-direct, "
                            "streamcert-kafka, streamcert-kafka-2pc, streamcert-pg-2pc, spark-foreachbatch-pg) or a "
                            "source or sink, paired with Spark's Kafka connector (default: reference builtin)")
    bench.add_argument("--rate", type=_rate, default=1000.0, metavar="N|max",
                       help="records/s produced open-loop (default 1000); max: search for the highest rate each "
                            "case sustains with a bounded backlog")
    bench.add_argument("--duration", type=float, default=None, metavar="S",
                       help="seconds of load per run (default 30; 15 with --quick)")
    bench.add_argument("--record-size", type=positive_int, default=100, metavar="B",
                       help="bytes per record value (default 100)")
    bench.add_argument("--fault", action="append", default=[], metavar="SPEC",
                       help="a fault during each run: the JSON of a schedule entry or list, or a schedule file "
                            "(repeatable); recovery time and redeliveries are measured")
    bench.add_argument("--no-fault", action="store_true", help="no fault, also with --quick")
    bench.add_argument("--repeats", type=positive_int, default=None, metavar="N",
                       help="runs per case, reported as median and min-max (default 3; 2 with --quick)")
    bench.add_argument("--quick", action="store_true", help="shorter runs, 2 repeats, and a 3 s Kafka outage "
                                                            "(unless --fault or --no-fault)")
    bench.add_argument("--seed", type=seed, default=1, help="seed of the workloads (default 1)")
    bench.add_argument("--out", default="results/bench", metavar="DIR",
                       help="where bench.json, bench.html and each run's evidence go (default results/bench)")
    bench.add_argument("--provider", choices=PROVIDERS, default=os.environ.get("STREAMCERT_PROVIDER", "auto"),
                       help="where the servers come from (default: auto)")
    bench.set_defaults(func=_bench)

    compare = commands.add_parser("compare", help="compare a baseline with a candidate: verdicts that changed, or "
                                                  "benchmark metrics judged by regression checks")
    compare.add_argument("baseline", metavar="BASELINE.json")
    compare.add_argument("candidate", metavar="CANDIDATE.json")
    compare.add_argument("--check", action="append", default=[], metavar="METRIC:±N%",
                         help="a regression check on benchmark results, e.g. throughput:-5%% or p99_latency:+10%% "
                              "(repeatable); exit 1 when one fails")
    compare.add_argument("--out", metavar="DIR", help="also write DIR/compare.html: the table and, for benchmarks, "
                                                      "each case's runs overlaid in time")
    compare.set_defaults(func=_compare)
    return parser


def _out_folder(text: str):
    """The --out folder, created now: one that cannot be written is refused before any work starts."""

    from streamcert.harness.stack.settings import writable_folder

    return writable_folder(Path(text).expanduser(), f"--out {text}", "Give --out a folder you can write.")


def _describe(exc: BaseException) -> str:
    """One line for an unexpected error, never a second failure: a Py4J error's text needs the JVM, which
    teardown has stopped by the time it is printed."""
    try:
        text = str(exc)
    except Exception:
        text = str(getattr(exc, "errmsg", "") or exc.args[:1])
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:500] if lines else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the command as given, for results that say how they were made
    if args.debug:
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("streamcert.librdkafka").propagate = True
    terminate_as_interrupt()  # CI cancelling a job, or `kill`, tears down like Ctrl-C does
    try:
        return args.func(args)
    except StreamcertError as exc:
        print(f"streamcert: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("streamcert: interrupted; everything it started has been stopped.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        print(f"streamcert: internal error: {_describe(exc)}. Hint: this is a bug in streamcert; "
              "rerun with --debug for the traceback and report it.", file=sys.stderr)
        return EXIT_FAILED
