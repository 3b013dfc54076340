"""Open-loop load at a target rate through locust, driven from the harness's process.

Importing locust monkey-patches the whole process with gevent, so locust never
runs here: :func:`run_open_loop` starts ``python -m locust`` on the locustfile
``harness/locust_kafka.py`` in a subprocess, hands it the run's
:class:`LoadParams` as a JSON file named by ``STREAMCERT_LOAD_PARAMS`` and the
records to send as a Parquet slice of :func:`~streamcert.harness.run.workload.plan`, and
reads back what it wrote: locust's request statistics (one ``kafka``/``produce``
request per record, its response time the produce-to-ack latency) and the
Parquet :class:`~streamcert.harness.run.workload.Ledger`. Neither this module nor anything the
harness imports may import locust or the locustfile.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.kafka_clients import client_conf
from streamcert.harness.stack.process import run_logged, tail_file
from streamcert.harness.run.workload import Ledger, WorkloadSpec, plan

__all__ = [
    "PARAMS_VAR",
    "LOCUSTFILE",
    "LoadParams",
    "ProduceStats",
    "LoadResult",
    "planned_records",
    "parse_stats_csv",
    "run_open_loop",
]

#: Names the JSON file with the :class:`LoadParams` of the locust subprocess.
PARAMS_VAR = "STREAMCERT_LOAD_PARAMS"
#: The locustfile; a path, never imported by the harness.
LOCUSTFILE = Path(__file__).with_name("locust_kafka.py")

# The schedule ends at duration_s; the run-time limit is only a backstop for a generator that fell behind.
_RUN_TIME_GRACE_S = 10
_STOP_TIMEOUT_S = 5
_STARTUP_ALLOWANCE_S = 60.0


@dataclass(frozen=True)
class LoadParams:
    """Everything the locust subprocess needs; written by the parent, read when the locustfile is imported."""

    bootstrap: str
    topic: str
    spec: dict[str, Any]
    users: int
    duration_s: float
    plan_path: str
    ledger_path: str
    stats_path: str
    flush_timeout_s: float
    producer_conf: dict[str, Any] = field(default_factory=dict)

    def workload(self) -> WorkloadSpec:
        return WorkloadSpec(**self.spec)

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(asdict(self), indent=1))
        return path

    @classmethod
    def read(cls, path: Path) -> "LoadParams":
        return cls(**json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class ProduceStats:
    """Locust's final request statistics of a run: counts, rate and produce-ack latency (ms)."""

    requests: int
    failures: int
    achieved_rate: float
    latency_ms: dict[str, float | None]


@dataclass
class LoadResult:
    """What an open-loop run did: the ledger, and locust's numbers for it."""

    ledger: Ledger
    ledger_path: Path
    requests: int
    failures: int
    achieved_rate: float
    latency_ms: dict[str, float | None]
    target_rate: float
    duration_s: float
    users: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (the ledger itself stays in its Parquet file)."""
        return {
            "ledger_path": str(self.ledger_path),
            "ledger_counts": self.ledger.counts(),
            "requests": self.requests,
            "failures": self.failures,
            "achieved_rate": _finite_or_none(self.achieved_rate),
            "latency_ms": {k: _finite_or_none(v) for k, v in self.latency_ms.items()},
            "target_rate": self.target_rate,
            "duration_s": self.duration_s,
            "users": self.users,
        }


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def planned_records(spec: WorkloadSpec, duration_s: float) -> int:
    """How many records an open-loop run sends: the plan's records due before ``duration_s``, at most ``total``."""
    return min(spec.total, math.ceil(spec.rate * duration_s))


def parse_stats_csv(text: str) -> ProduceStats:
    """Read locust's request statistics CSV (the ``_stats.csv`` format) from its ``Aggregated`` row."""
    rows = list(csv.DictReader(io.StringIO(text)))
    total = next((row for row in rows if row.get("Name") == "Aggregated"), None)
    if total is None:
        raise ValueError("no 'Aggregated' row in locust's request statistics")
    requests = int(total["Request Count"])
    latency = {"p50": _number(total.get("50%")), "p95": _number(total.get("95%")),
               "p99": _number(total.get("99%")),
               # the max column is exact; the percentile columns are locust's rounded buckets
               "max": _number(total.get("Max Response Time")) if requests else None}
    return ProduceStats(requests=requests, failures=int(total["Failure Count"]),
                        achieved_rate=float(total["Requests/s"]), latency_ms=latency)


def _number(cell: str | None) -> float | None:
    if cell is None or cell.strip() in ("", "N/A"):
        return None
    return float(cell)


def run_open_loop(bootstrap: str, topic: str, spec: WorkloadSpec, duration_s: float, users: int, workdir: Path,
                  *, producer_conf: dict[str, Any] | None = None, message_timeout_s: float = 30.0) -> LoadResult:
    """Produce ``spec``'s records into ``topic`` open-loop at ``spec.rate`` for ``duration_s`` with ``users`` users.

    Called from the harness's process; locust runs in a subprocess with no web
    UI and no master port. ``topic`` must exist with ``spec.partitions``
    partitions. Stops after ``min(total, ceil(rate * duration_s))`` records
    (:func:`planned_records`). ``workdir`` keeps the parameters, the plan,
    locust's log and CSV files and ``ledger.parquet``.

    Raises :class:`ConfigurationError` for unusable inputs (a missing or too
    small topic too) and :class:`StartupFailed` when Kafka does not answer or
    locust fails or leaves no statistics. Failed records are not errors: they
    are ``failures`` in the statistics and ``indeterminate`` in the ledger.
    """
    _validate(spec, duration_s, users)
    _check_topic(bootstrap, topic, spec.partitions)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    logfile = workdir / "locust.log"
    params = _params(bootstrap, topic, spec, duration_s, users, workdir, producer_conf or {}, message_timeout_s)
    for stale in (params.ledger_path, params.stats_path, logfile):
        Path(stale).unlink(missing_ok=True)  # a rerun in the same folder must not read the last run's files
    _write_plan(spec, duration_s, Path(params.plan_path))
    run_time = math.ceil(duration_s) + _RUN_TIME_GRACE_S
    code, output = run_logged(
        _locust_argv(users, run_time, workdir, logfile),
        description=f"Open-loop load: {spec.rate:g} records/s for {duration_s:g}s into {topic}",
        timeout=_STARTUP_ALLOWANCE_S + run_time + _STOP_TIMEOUT_S + params.flush_timeout_s,
        env=_child_env(params.write(workdir / "params.json")), cwd=workdir,
    )
    stats = _read_outcome(code, output, logfile, params)
    ledger = Ledger.read(Path(params.ledger_path))
    return LoadResult(ledger=ledger, ledger_path=Path(params.ledger_path), requests=stats.requests,
                      failures=stats.failures, achieved_rate=stats.achieved_rate, latency_ms=stats.latency_ms,
                      target_rate=float(spec.rate), duration_s=float(duration_s), users=users)


def _params(bootstrap: str, topic: str, spec: WorkloadSpec, duration_s: float, users: int, workdir: Path,
            producer_conf: dict[str, Any], message_timeout_s: float) -> LoadParams:
    return LoadParams(
        bootstrap=bootstrap, topic=topic, spec=spec.as_dict(), users=users, duration_s=float(duration_s),
        plan_path=str(workdir / "plan.parquet"), ledger_path=str(workdir / "ledger.parquet"),
        stats_path=str(workdir / "final_stats.csv"),
        # every record gets its delivery report (maybe a timeout) before the flush at the end gives up
        flush_timeout_s=message_timeout_s + 5.0,
        producer_conf={"message.timeout.ms": int(message_timeout_s * 1000), **producer_conf},
    )


def _validate(spec: WorkloadSpec, duration_s: float, users: int) -> None:
    spec.validate()
    if not isinstance(users, int) or users < 1:
        raise ConfigurationError(f"Open-loop load needs at least one user; got users={users!r}.",
                                 hint="Pass users=1 or more (each user is one producer).")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ConfigurationError(f"Open-loop load needs a positive duration; got duration_s={duration_s!r}.",
                                 hint="Pass the number of seconds the schedule should run, e.g. 30.")
    if spec.rate is None:
        raise ConfigurationError("Open-loop load needs a target rate, and the workload spec has rate=None.",
                                 hint="Set WorkloadSpec(rate=...) in records/s, or use workload.load_topic to "
                                      "produce as fast as the broker takes it.")
    if spec.aborted_fraction > 0:
        raise ConfigurationError(
            f"Open-loop load does not write transactions; the spec has aborted_fraction={spec.aborted_fraction}.",
            hint="Use aborted_fraction=0 here, and workload.load_topic for input with aborted records.")
    if spec.has_event_times:
        raise ConfigurationError(
            "Open-loop load stamps records with the time they are produced; the spec asks for event times "
            f"(event_time_step_ms={spec.event_time_step_ms}, event_time_lead_ms={spec.event_time_lead_ms}).",
            hint="Use workload.load_topic (paced by WorkloadSpec.rate) for a skewed backlog.")
    if users > spec.keys:
        raise ConfigurationError(
            f"Open-loop load gives each key to one user, so {users} users need at least {users} keys; "
            f"the spec has keys={spec.keys}.",
            hint="Use fewer users or more keys.")


def _write_plan(spec: WorkloadSpec, duration_s: float, path: Path) -> None:
    # Planned here, not in the subprocess: a slow import there would shift locust's run-time clock (gevent's loop
    # time is stale until its first iteration), and the plan of a large total takes seconds.
    records = plan(spec).iloc[:planned_records(spec, duration_s)]
    records[["id", "key", "key_index", "seq", "partition"]].to_parquet(path, index=False)


def _check_topic(bootstrap: str, topic: str, partitions: int) -> None:
    # Here rather than in the subprocess: a missing topic is a one-line answer, not a locust log to read.
    admin = AdminClient(client_conf(bootstrap, **{"socket.timeout.ms": 5000}))
    try:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    except KafkaException as exc:
        raise StartupFailed(f"Kafka at {bootstrap} did not answer a metadata request: {exc}.",
                            hint="Is the stack up and the Kafka link free of faults?") from None
    if meta is None or meta.error is not None:
        raise ConfigurationError(f"Topic {topic!r} does not exist at {bootstrap}.",
                                 hint=f"Create it first, e.g. kafka_clients.create_topic(bootstrap, {topic!r}, "
                                      f"{partitions}).")
    if len(meta.partitions) < partitions:
        raise ConfigurationError(
            f"Topic {topic!r} has {len(meta.partitions)} partitions and the workload writes to {partitions}.",
            hint="Create the topic with the spec's number of partitions, or lower WorkloadSpec.partitions.")


def _locust_argv(users: int, run_time: int, workdir: Path, logfile: Path) -> list[str]:
    # --headless starts no web UI and no master, so nothing binds a port; failed records are measured
    # outcomes, not a failed run (--exit-code-on-error 0); the locustfile sets its own exit code on crashes.
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", str(users),
            "-r", str(users), "--run-time", f"{run_time}s", "--stop-timeout", str(_STOP_TIMEOUT_S),
            "--csv", str(workdir / "locust"), "--only-summary", "--exit-code-on-error", "0",
            "--logfile", str(logfile)]


def _child_env(params_file: Path) -> dict[str, str]:
    # LOCUST_* variables would silently override the command line; the run must be what we asked for.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCUST_")}
    env[PARAMS_VAR] = str(params_file)
    return env


def _read_outcome(code: int, output: str, logfile: Path, params: LoadParams) -> ProduceStats:
    # The log has locust's errors; it is empty when the locustfile failed to import, which goes to the output.
    evidence = tail_file(logfile, 25) or output
    if code == -9:
        raise StartupFailed("The locust load generator did not finish in time and was killed.",
                            hint=f"See {logfile}; is the broker at {params.bootstrap} reachable?",
                            details=evidence)
    if code != 0:
        raise StartupFailed(f"The locust load generator exited with code {code}.",
                            hint=f"See {logfile} and the lines below.", details=evidence)
    stats_file, ledger_file = Path(params.stats_path), Path(params.ledger_path)
    if not stats_file.exists() or not ledger_file.exists():
        raise StartupFailed("The locust load generator exited without writing its statistics and ledger.",
                            hint=f"See {logfile}; the locustfile writes both when the test stops.",
                            details=evidence)
    try:
        return parse_stats_csv(stats_file.read_text())
    except (ValueError, KeyError) as exc:
        raise StartupFailed(f"Locust's statistics in {stats_file} cannot be read: {exc}.",
                            hint="Check that the installed locust writes its usual CSV columns.",
                            details=evidence) from None
