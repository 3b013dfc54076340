"""Benchmark: the exactly-once checkers on a large seeded ledger (SPEC §9: 10M records in seconds).

    python -m streamcert.benchmarks.checkers --records 10000000 --keys 10000 --seed 1 --out results/bench/checkers.json

Generates a ledger and an output with a few injected faults of every kind (so each checker does real
work and must find exactly what was injected), times each checker with ``time.perf_counter``, and
writes a JSON report. Numbers are for reports, not assertions.

Injected faults (``--faults F`` of each): F lost records, an at-least-once replay of F records, F
unexpected ids, F aborted records read, and F swaps of two consecutive records of one key. Lost and
swapped records sit in the middle of their keys, so the per-key order checker must report exactly
F non-monotonic deliveries and 2F gaps (one per swap, one per lost record).

Keys are Python strings (object dtype), as a plain Parquet read gives them; ``--categorical-keys``
hands the output's keys over as a categorical instead (the checkers then skip hashing strings). The
process is pinned to one CPU unless ``--no-pin``. Memory: ``input_rss_mib`` is the process holding the
ledger and output; ``peak_rss_mib`` the highest RSS while the checkers ran (per checker too, where the
kernel lets the peak be reset); ``peak_alloc_mib`` what each checker allocated at most (tracemalloc).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from streamcert.harness.arguments import positive_int, seed
from streamcert.harness.stack.machine import machine_info
from streamcert.harness.verify.checkers import CheckResult, combined_valid, exactly_once_checkers

__all__ = ["Workload", "make_workload", "run_benchmark", "main"]

SCHEMA_VERSION = 1
_START = 1_700_000_000.0
_RATE = 100_000.0  # records per second of simulated production


@dataclass
class Workload:
    """A seeded ledger, the output delivered for it, and what was injected into the output."""

    ledger: pd.DataFrame
    output: pd.DataFrame
    injected: dict[str, int]
    expected: dict[str, dict[str, int]]


def make_workload(records: int, keys: int, seed: int, faults: int = 10) -> Workload:
    """Ledger of ``records`` over ``keys`` keys, and an output with ``faults`` faults of each kind."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, keys, records)
    aborted = np.zeros(records, dtype=bool)
    aborted[rng.choice(records, size=min(records, max(2 * faults, records // 1000)), replace=False)] = True
    seq = _per_key_seq(codes, aborted)
    names = np.array([f"key-{i:06d}" for i in range(keys)], dtype=object)
    ledger = pd.DataFrame(
        {
            "id": np.arange(records, dtype=np.int64),
            "key": names[codes],
            "seq": seq,
            "produced_at": _START + np.arange(records) / _RATE,
            "aborted": aborted,
        }
    )
    rows = _faulty_delivery(rng, codes, seq, aborted, faults)
    output = _output_frame(rng, codes, seq, aborted, rows, names, faults)
    injected = {"lost": faults, "duplicates": faults, "unexpected": faults, "aborted_reads": faults, "swaps": faults}
    expected = {
        "lost": {"lost": faults},
        "duplicate": {"extra_deliveries": faults, "duplicated_ids": faults},
        "unexpected": {"unexpected": faults},
        "aborted_read": {"aborted_reads": faults},
        "per_key_order": {"non_monotonic": faults, "gaps": 2 * faults},
    }
    return Workload(ledger, output, injected, expected)


def _per_key_seq(codes: np.ndarray, aborted: np.ndarray) -> np.ndarray:
    """Per-key seq over committed records; an aborted record takes the seq its key's next commit gets."""
    order = np.argsort(codes, kind="stable")
    committed = (~aborted[order]).astype(np.int64)
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    lengths = np.diff(np.r_[starts, codes.size])
    before = np.cumsum(committed) - committed
    seq = np.empty(codes.size, dtype=np.int64)
    seq[order] = before - np.repeat(before[starts], lengths)
    return seq


def _faulty_delivery(
    rng: np.random.Generator, codes: np.ndarray, seq: np.ndarray, aborted: np.ndarray, faults: int
) -> np.ndarray:
    """Committed ledger rows in production order, with lost, swapped and replayed records."""
    rows = np.flatnonzero(~aborted)
    lost, swap_a, swap_b = _pick_middles(rng, codes, rows, faults)
    at_a, at_b = np.searchsorted(rows, swap_a), np.searchsorted(rows, swap_b)
    rows[at_a], rows[at_b] = swap_b, swap_a
    rows = rows[~np.isin(rows, lost)]
    # At-least-once replay: a stretch of records delivered again a little later.
    start = int(rng.integers(0, max(1, rows.size - 2 * faults)))
    return np.insert(rows, min(rows.size, start + 2 * faults), rows[start : start + faults])


def _pick_middles(
    rng: np.random.Generator, codes: np.ndarray, committed: np.ndarray, faults: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ledger rows to lose, and pairs (seq s, seq s+1 of one key) to swap; one distinct key each.

    Every picked record is neither first nor last of its key, so each lost record makes exactly one
    gap and each swap exactly one gap and one non-monotonic delivery.
    """
    key_of = codes[committed]
    counts = np.bincount(key_of)
    candidates = rng.permutation(np.flatnonzero(counts >= 3))[: 2 * faults]
    if candidates.size < 2 * faults:
        raise ValueError(f"need {2 * faults} keys with 3+ committed records; use more records or fewer keys")
    # Committed rows of one key, in production order, are its seqs 0, 1, 2, ...
    by_key = committed[np.argsort(key_of, kind="stable")]
    at = np.r_[0, np.cumsum(counts)[:-1]][candidates] + 1 + rng.integers(0, counts[candidates] - 2)
    return by_key[at[:faults]], by_key[at[faults:]], by_key[at[faults:] + 1]


def _output_frame(
    rng: np.random.Generator,
    codes: np.ndarray,
    seq: np.ndarray,
    aborted: np.ndarray,
    rows: np.ndarray,
    names: np.ndarray,
    faults: int,
) -> pd.DataFrame:
    """The delivered frame: ``rows`` plus aborted records read and unexpected ids at random places."""
    records = codes.size
    ids, keys, seqs = rows.astype(np.int64), codes[rows], seq[rows]
    aborted_rows = rng.choice(np.flatnonzero(aborted), size=faults, replace=False)
    junk_keys = rng.integers(0, names.size, faults)
    for extra_ids, extra_keys, extra_seqs in (
        (aborted_rows, codes[aborted_rows], seq[aborted_rows]),
        (records + np.arange(faults), junk_keys, np.full(faults, 10**9)),
    ):
        at = rng.integers(0, ids.size + 1, faults)
        ids, keys, seqs = (
            np.insert(ids, at, extra_ids),
            np.insert(keys, at, extra_keys),
            np.insert(seqs, at, extra_seqs),
        )
    return pd.DataFrame({"id": ids, "key": names[keys], "seq": seqs.astype(np.int64)})


# --------------------------------------------------------------------------------------------------
# Running and reporting


def run_benchmark(workload: Workload, trace_memory: bool = True) -> tuple[list[CheckResult], dict[str, dict]]:
    """Run the exactly-once set once; per checker: seconds, peak RSS and (if traced) peak allocation."""
    results, timings = [], {}
    for checker in exactly_once_checkers():
        resettable = _reset_peak_rss()
        if trace_memory:
            tracemalloc.start()
        started = time.perf_counter()
        result = checker.check(workload.ledger, workload.output)
        seconds = time.perf_counter() - started
        timing: dict[str, float | None] = {"seconds": round(seconds, 4)}
        timing["peak_rss_mib"] = _peak_rss_mib() if resettable else None
        if trace_memory:
            timing["peak_alloc_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
            tracemalloc.stop()
        results.append(result)
        timings[checker.name] = timing
    return results, timings


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ≥ 4.0), so a peak measures only what follows."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _rss_mib() -> float | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return round(kib / 2**10, 1)


def _machine() -> dict[str, object]:
    return {**machine_info(), "numpy": np.__version__, "pandas": pd.__version__}


def _pin_to_one_cpu() -> int | None:
    """Pin the process to one CPU (SPEC: "on one core"); None where the OS has no affinity call."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def _found_injected(results: list[CheckResult], expected: dict[str, dict[str, int]]) -> bool:
    by_name = {r.name: r for r in results}
    return all(
        by_name[name].valid is False and all(by_name[name].counts.get(k) == v for k, v in counts.items())
        for name, counts in expected.items()
    )


def _table(results: list[CheckResult], timings: dict[str, dict], total: float, memory: dict) -> str:
    lines = [f"{'checker':<15}{'seconds':>9}{'RSS MiB':>9}{'alloc MiB':>10}  verdict  counts"]
    for result in results:
        timing = timings[result.name]
        counts = ", ".join(f"{k}={v}" for k, v in result.counts.items())
        rss, alloc = timing.get("peak_rss_mib") or "-", timing.get("peak_alloc_mib", "-")
        lines.append(f"{result.name:<15}{timing['seconds']:>9.3f}{rss:>9}{alloc:>10}  {str(result.valid):<8} {counts}")
    lines.append(
        f"{'total':<15}{total:>9.3f}   peak RSS while checking {memory['peak_rss_mib']} MiB "
        f"(inputs held: {memory['input_rss_mib']} MiB; peak while generating {memory['generate_peak_rss_mib']} MiB)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamcert.benchmarks.checkers",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=positive_int, default=10_000_000)
    parser.add_argument("--keys", type=positive_int, default=10_000)
    parser.add_argument("--seed", type=seed, default=1)
    parser.add_argument("--faults", type=positive_int, default=10, help="faults of each kind injected into the output")
    parser.add_argument("--out", type=Path, default=Path("results/bench/checkers.json"))
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip per-checker allocation peaks")
    parser.add_argument("--categorical-keys", action="store_true", help="give the output's keys as a categorical")
    args = parser.parse_args(argv)

    machine = _machine()  # before pinning, so it reports the machine rather than the pin
    pinned = None if args.no_pin else _pin_to_one_cpu()
    started = time.perf_counter()
    try:
        workload = make_workload(args.records, args.keys, args.seed, args.faults)
    except ValueError as exc:  # too few records or keys to hide the faults in
        print(f"streamcert: error: --records {args.records} --keys {args.keys} --faults {args.faults}: {exc}. "
              "Hint: each fault needs its own key with three or more committed records; e.g. --records 100000 "
              "--keys 1000.", file=sys.stderr)
        return 2
    if args.categorical_keys:
        workload.output["key"] = workload.output["key"].astype("category")
    generate_s = time.perf_counter() - started
    gc.collect()
    memory = {"generate_peak_rss_mib": _peak_rss_mib(), "input_rss_mib": _rss_mib()}
    scoped = _reset_peak_rss()
    results, timings = run_benchmark(workload, trace_memory=not args.no_tracemalloc)
    total = sum(t["seconds"] for t in timings.values())
    memory["peak_rss_mib"] = max(t["peak_rss_mib"] for t in timings.values()) if scoped else _peak_rss_mib()
    # Without a resettable mark the peak covers the whole process, generation included.
    memory["peak_rss_scope"] = "checkers" if scoped else "process"
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "checkers",
        "machine": machine,
        "parameters": {
            "records": args.records,
            "keys": args.keys,
            "seed": args.seed,
            "faults": args.faults,
            "pinned_cpu": pinned,
            "tracemalloc": not args.no_tracemalloc,
            "categorical_keys": args.categorical_keys,
        },
        "ledger_rows": len(workload.ledger),
        "output_rows": len(workload.output),
        "generate_seconds": round(generate_s, 3),
        "checkers": {r.name: {**timings[r.name], "valid": r.valid, "counts": r.to_dict()["counts"]} for r in results},
        "total_seconds": round(total, 4),
        **memory,
        "injected": workload.injected,
        "expected": workload.expected,
        "found_all_injected": _found_injected(results, workload.expected),
        "valid": combined_valid(results),
        "results": [r.to_dict() for r in results],
    }
    print(_table(results, timings, total, memory))
    print(f"injected faults found exactly: {report['found_all_injected']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
