"""Unit tests: the Jepsen-style checkers find exactly what is wrong, and never pass what they cannot judge."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from streamcert.harness.verify.checkers import (
    MAX_VIOLATIONS,
    UNKNOWN,
    AbortedReadChecker,
    AggregatorBatchChecker,
    Checker,
    CheckResult,
    DuplicateChecker,
    LostChecker,
    PerKeyOrderChecker,
    UnexpectedChecker,
    combined_valid,
    exactly_once_checkers,
    run_checks,
)

# --------------------------------------------------------------------------------------------------
# Builders


def make_ledger(
    keys: str, aborted: tuple[int, ...] = (), start: float = 100.0, indeterminate: tuple[int, ...] = ()
) -> pd.DataFrame:
    """One record per character of ``keys`` (id = position), seq counted per key over committed records (-1 for
    aborted ones).

    ``status`` is ``aborted`` for ``aborted`` ids, ``indeterminate`` for ``indeterminate`` ids (numbered like
    acknowledged ones, as the workload's plan numbers them before anything is produced), else ``acked``.
    """
    aborted_mask = np.isin(np.arange(len(keys)), aborted)
    indeterminate_mask = np.isin(np.arange(len(keys)), indeterminate) & ~aborted_mask
    seqs, seen = [], {}
    for key, is_aborted in zip(keys, aborted_mask, strict=True):
        seqs.append(-1 if is_aborted else seen.get(key, 0))  # as the workload's plan: an aborted record has none
        if not is_aborted:
            seen[key] = seen.get(key, 0) + 1
    return pd.DataFrame(
        {
            "id": np.arange(len(keys), dtype=np.int64),
            "key": list(keys),
            "seq": np.array(seqs, dtype=np.int64),
            "produced_at": start + np.arange(len(keys), dtype=np.float64),
            "aborted": aborted_mask,
            "status": np.where(aborted_mask, "aborted", np.where(indeterminate_mask, "indeterminate", "acked")),
        }
    )


def deliver(ledger: pd.DataFrame, ids: list[int], **columns) -> pd.DataFrame:
    """Output delivering ledger ``ids`` in that order (ids not in the ledger get key 'zz', seq 99)."""
    by_id = ledger.set_index("id")
    known = [i in by_id.index for i in ids]
    frame = pd.DataFrame(
        {
            "id": np.array(ids, dtype=np.int64),
            "key": [by_id.at[i, "key"] if k else "zz" for i, k in zip(ids, known, strict=True)],
            "seq": np.array([by_id.at[i, "seq"] if k else 99 for i, k in zip(ids, known, strict=True)], dtype=np.int64),
        }
    )
    for name, values in columns.items():
        frame[name] = values
    return frame


ABC = "aabbcabcac"  # keys a: ids 0,1,5,8; b: 2,3,6; c: 4,7,9


def ids_of(result: CheckResult) -> list[int]:
    return [v["id"] for v in result.violations]


# --------------------------------------------------------------------------------------------------
# Protocol, helpers, serialisation


@pytest.mark.parametrize(
    "checker",
    [*exactly_once_checkers(), PerKeyOrderChecker(allow_gaps=True), AggregatorBatchChecker(10, 1.0, 0.5)],
    ids=repr,
)
def test_every_checker_satisfies_the_protocol(checker):
    assert isinstance(checker, Checker)
    assert isinstance(checker.name, str) and checker.name


def test_exactly_once_set_is_lost_duplicate_unexpected_aborted_order():
    names = [c.name for c in exactly_once_checkers()]
    assert names == ["lost", "duplicate", "unexpected", "aborted_read", "per_key_order"]


def test_combined_valid():
    def r(valid):
        return CheckResult(name="x", valid=valid)

    assert combined_valid([r(True), r(True)]) is True
    assert combined_valid([r(True), r(UNKNOWN)]) == UNKNOWN
    assert combined_valid([r(UNKNOWN), r(False), r(True)]) is False
    assert combined_valid([]) is True


def test_to_dict_is_json_serialisable_with_numpy_values():
    result = CheckResult(
        name="x",
        valid=np.bool_(False),
        counts={"n": np.int64(3)},
        violations=[{"kind": "k", "id": np.int64(1), "key": "a", "latency_s": np.float64(1.5), "nan": np.nan}],
    )
    as_dict = result.to_dict()
    assert json.loads(json.dumps(as_dict)) == {
        "name": "x",
        "valid": False,
        "counts": {"n": 3},
        "violations": [{"kind": "k", "id": 1, "key": "a", "latency_s": 1.5, "nan": None}],
        "error": None,
    }
    assert type(as_dict["counts"]["n"]) is int


def test_real_results_serialise():
    ledger = make_ledger(ABC)
    output = deliver(ledger, [0, 2, 2, 42])
    for result in run_checks(exactly_once_checkers(), ledger, output):
        json.dumps(result.to_dict())


# --------------------------------------------------------------------------------------------------
# Lost


def test_lost_passes_when_every_committed_record_arrives_even_twice():
    ledger = make_ledger(ABC, aborted=(3,))
    output = deliver(ledger, [0, 1, 2, 4, 5, 6, 7, 8, 9, 9])
    result = LostChecker().check(ledger, output)
    assert result.valid is True
    assert result.counts == {"acknowledged": 9, "delivered": 9, "lost": 0}
    assert result.violations == [] and result.error is None


def test_lost_names_the_missing_records_in_ledger_order():
    ledger = make_ledger(ABC)
    output = deliver(ledger, [0, 1, 2, 3, 4, 6, 8, 9])
    result = LostChecker().check(ledger, output)
    assert result.valid is False
    assert result.counts == {"acknowledged": 10, "delivered": 8, "lost": 2}
    assert result.violations == [
        {"kind": "lost", "id": 5, "key": "a", "seq": 2, "ledger_row": 5},
        {"kind": "lost", "id": 7, "key": "c", "seq": 1, "ledger_row": 7},
    ]


def test_lost_violations_are_capped_at_ten():
    ledger = make_ledger("k" * 30)
    result = LostChecker().check(ledger, deliver(ledger, [29]))
    assert result.counts["lost"] == 29
    assert len(result.violations) == MAX_VIOLATIONS
    assert ids_of(result) == list(range(10))


# --------------------------------------------------------------------------------------------------
# Duplicate


def test_duplicate_passes_when_each_id_arrives_once():
    ledger = make_ledger(ABC)
    result = DuplicateChecker().check(ledger, deliver(ledger, list(range(10))))
    assert result.valid is True
    assert result.counts == {"deliveries": 10, "duplicated_ids": 0, "extra_deliveries": 0}


def test_duplicate_reports_each_extra_delivery_with_its_first_row():
    ledger = make_ledger(ABC)
    output = deliver(ledger, [0, 1, 2, 1, 3, 1, 2, 4])
    result = DuplicateChecker().check(ledger, output)
    assert result.valid is False
    assert result.counts == {"deliveries": 8, "duplicated_ids": 2, "extra_deliveries": 3}
    assert result.violations == [
        {"kind": "duplicate", "id": 1, "key": "a", "seq": 1, "row": 3, "deliveries": 3, "first_row": 1},
        {"kind": "duplicate", "id": 1, "key": "a", "seq": 1, "row": 5, "deliveries": 3, "first_row": 1},
        {"kind": "duplicate", "id": 2, "key": "b", "seq": 0, "row": 6, "deliveries": 2, "first_row": 2},
    ]


def test_duplicate_works_for_sparse_ids_too():
    ledger = make_ledger("ab")
    ledger["id"] = np.array([10**15, 7], dtype=np.int64)
    output = deliver(ledger, [7, 10**15, 7])
    result = DuplicateChecker().check(ledger, output)
    assert result.counts == {"deliveries": 3, "duplicated_ids": 1, "extra_deliveries": 1}
    assert result.violations[0]["id"] == 7 and result.violations[0]["row"] == 2


def test_duplicate_violations_are_capped_at_ten():
    ledger = make_ledger("k" * 20)
    ids = list(range(20))
    result = DuplicateChecker().check(ledger, deliver(ledger, ids + ids))
    assert result.counts == {"deliveries": 40, "duplicated_ids": 20, "extra_deliveries": 20}
    assert len(result.violations) == MAX_VIOLATIONS
    assert ids_of(result) == list(range(10))


# --------------------------------------------------------------------------------------------------
# Unexpected


def test_unexpected_passes_for_known_ids_including_aborted_ones():
    ledger = make_ledger(ABC, aborted=(4,))
    result = UnexpectedChecker().check(ledger, deliver(ledger, [0, 4, 9]))
    assert result.valid is True
    assert result.counts == {"deliveries": 3, "unexpected": 0, "unexpected_ids": 0}


def test_unexpected_names_ids_missing_from_the_ledger():
    ledger = make_ledger(ABC)
    result = UnexpectedChecker().check(ledger, deliver(ledger, [0, 42, 1, 42, -3]))
    assert result.valid is False
    assert result.counts == {"deliveries": 5, "unexpected": 3, "unexpected_ids": 2}
    assert [(v["kind"], v["id"], v["key"], v["row"]) for v in result.violations] == [
        ("unexpected", 42, "zz", 1),
        ("unexpected", 42, "zz", 3),
        ("unexpected", -3, "zz", 4),
    ]


# --------------------------------------------------------------------------------------------------
# Aborted read


def test_aborted_read_passes_when_aborted_records_stay_out():
    ledger = make_ledger(ABC, aborted=(2, 7))
    result = AbortedReadChecker().check(ledger, deliver(ledger, [0, 1, 3, 4, 5, 6, 8, 9]))
    assert result.valid is True
    assert result.counts == {"aborted": 2, "aborted_reads": 0, "aborted_read_ids": 0}


def test_aborted_read_names_the_aborted_records_delivered():
    ledger = make_ledger(ABC, aborted=(2, 7))
    result = AbortedReadChecker().check(ledger, deliver(ledger, [0, 7, 1, 2]))
    assert result.valid is False
    assert result.counts == {"aborted": 2, "aborted_reads": 2, "aborted_read_ids": 2}
    assert result.violations == [
        {"kind": "aborted_read", "id": 7, "key": "c", "seq": -1, "row": 1},  # a planned abort has no seq
        {"kind": "aborted_read", "id": 2, "key": "b", "seq": -1, "row": 3},
    ]


# --------------------------------------------------------------------------------------------------
# Per-key order


def test_order_passes_for_interleaved_keys_in_order():
    ledger = make_ledger(ABC)
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, [2, 0, 4, 1, 3, 7, 5, 6, 9, 8]))
    assert result.valid is True
    assert result.counts == {
        "keys": 3,
        "checked": 10,
        "redeliveries_skipped": 0,
        "uncommitted_skipped": 0,
        "non_monotonic": 0,
        "gaps": 0,
    }


def test_order_reports_a_swap_as_one_gap_and_one_non_monotonic():
    ledger = make_ledger(ABC)
    # key a is 0,1,5,8 (seq 0..3); 5 (seq 2) arrives before 1 (seq 1).
    output = deliver(ledger, [0, 2, 5, 3, 1, 4, 6, 7, 8, 9])
    result = PerKeyOrderChecker().check(ledger, output)
    assert result.valid is False
    assert result.counts["non_monotonic"] == 1 and result.counts["gaps"] == 1
    assert result.violations == [
        {"kind": "gap", "id": 5, "key": "a", "seq": 2, "row": 2, "expected_seq": 1},
        {"kind": "non_monotonic", "id": 1, "key": "a", "seq": 1, "row": 4, "previous_seq": 2},
    ]


def test_order_with_gaps_allowed_reports_only_the_regression():
    ledger = make_ledger(ABC)
    output = deliver(ledger, [0, 2, 5, 3, 1, 4, 6, 7, 8, 9])
    result = PerKeyOrderChecker(allow_gaps=True).check(ledger, output)
    assert result.valid is False
    assert result.counts["non_monotonic"] == 1 and result.counts["gaps"] == 0
    assert [v["kind"] for v in result.violations] == ["non_monotonic"]


def _in_files(files: list[list[int]], ledger: pd.DataFrame) -> pd.DataFrame:
    """One batch (one position) of several files: each file's ids in the order its task wrote them."""
    ids = [i for file in files for i in file]
    return deliver(ledger, ids, position=[0] * len(ids),
                   order_stream=[f"f{n}" for n, file in enumerate(files) for _ in file],
                   order_within=[w for file in files for w in range(len(file))])


def test_order_takes_the_files_of_one_batch_in_any_order_and_each_file_in_its_own():
    ledger = make_ledger(ABC)  # a: 0,1,5,8  b: 2,3,6  c: 4,7,9
    # key a's records are split over two files, the later ones in the first: visible at once, no order between them
    tied = PerKeyOrderChecker().check(ledger, _in_files([[5, 8, 2, 3], [0, 1, 4, 6, 7, 9]], ledger))
    assert tied.valid is True, tied.violations
    # inside one file the task wrote a's seq 3 before seq 2: a reader of that file sees it
    swapped = PerKeyOrderChecker().check(ledger, _in_files([[8, 5, 2, 3], [0, 1, 4, 6, 7, 9]], ledger))
    assert swapped.valid is False and swapped.counts["non_monotonic"] == 1
    [violation] = [v for v in swapped.violations if v.get("within") == "order_stream"]
    assert violation["id"] == 5 and violation["previous_seq"] == 3
    assert type(violation["within"]) is str  # plain text in the report's reason, not numpy's str_


def test_order_reports_a_gap_where_a_record_is_missing():
    ledger = make_ledger(ABC)
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 1, 2, 3, 4, 6, 7, 8, 9]))
    assert result.valid is False
    assert result.counts["gaps"] == 1 and result.counts["non_monotonic"] == 0
    assert result.violations == [{"kind": "gap", "id": 8, "key": "a", "seq": 3, "row": 7, "expected_seq": 2}]
    assert PerKeyOrderChecker(allow_gaps=True).check(ledger, deliver(ledger, [0, 1, 8])).valid is True


def test_order_compares_with_the_highest_seq_so_far_not_the_previous_row():
    ledger = make_ledger("aaaaa")
    # 0, 3, 1, 2, 4: one gap (0 -> 3), two late records (1 and 2 after 3), and 4 continues after 3.
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 3, 1, 2, 4]))
    assert result.counts["gaps"] == 1 and result.counts["non_monotonic"] == 2
    assert [(v["kind"], v["id"]) for v in result.violations] == [("gap", 3), ("non_monotonic", 1), ("non_monotonic", 2)]
    assert [v.get("previous_seq") for v in result.violations[1:]] == [3, 3]


def test_order_reports_an_equal_seq_on_a_different_id_as_non_monotonic():
    ledger = make_ledger("aa")
    output = deliver(ledger, [0, 1])
    output.loc[1, "seq"] = 0  # the sink rewrote the seq: same key, same seq, another record
    result = PerKeyOrderChecker().check(ledger, output)
    assert result.counts["non_monotonic"] == 1
    assert result.violations[0] == {"kind": "non_monotonic", "id": 1, "key": "a", "seq": 0, "row": 1, "previous_seq": 0}


def test_order_skips_redeliveries_aborted_and_unexpected_records():
    ledger = make_ledger("aaaa", aborted=(2,))
    # committed a: ids 0,1,3 (seq 0,1,2); 2 is aborted (seq 2 too). A replay of 0,1 comes after 3.
    output = deliver(ledger, [0, 1, 2, 3, 0, 1, 42])
    result = PerKeyOrderChecker().check(ledger, output)
    assert result.valid is True
    assert result.counts == {
        "keys": 1,
        "checked": 3,
        "redeliveries_skipped": 2,
        "uncommitted_skipped": 2,
        "non_monotonic": 0,
        "gaps": 0,
    }


def test_order_follows_the_position_column_when_present():
    ledger = make_ledger(ABC)
    in_order = deliver(ledger, list(range(10)), position=np.arange(10))
    shuffled = in_order.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert PerKeyOrderChecker().check(ledger, shuffled).valid is True
    swapped = in_order.copy()
    swapped.loc[[1, 5], "position"] = [5, 1]  # ids 1 and 5 (key a, seq 1 and 2) swap places
    result = PerKeyOrderChecker().check(ledger, swapped)
    assert result.counts["gaps"] == 1 and result.counts["non_monotonic"] == 1
    assert [(v["kind"], v["id"], v["row"]) for v in result.violations] == [("gap", 5, 5), ("non_monotonic", 1, 1)]


def test_rows_sharing_a_position_were_visible_at_once_and_are_judged_in_seq_order():
    ledger = make_ledger("aaaa")
    # ids 0-3 (key a, seq 0-3): one commit made 2 and 1 visible together, listed in heap order 2, 1
    together = deliver(ledger, [0, 2, 1, 3], position=[0, 1, 1, 2])
    assert PerKeyOrderChecker().check(ledger, together).valid is True
    # the same rows in two commits, 2 before 1: a reader could see seq 2 first
    apart = deliver(ledger, [0, 2, 1, 3], position=[0, 1, 2, 3])
    result = PerKeyOrderChecker().check(ledger, apart)
    assert result.counts == {**result.counts, "gaps": 1, "non_monotonic": 1}
    # a tie never hides what is missing when it became visible: 3 with 1 (2 still owed) is a gap
    early = deliver(ledger, [0, 3, 1, 2], position=[0, 1, 1, 2])
    result = PerKeyOrderChecker().check(ledger, early)
    assert result.valid is False and [(v["kind"], v["id"]) for v in result.violations] == [
        ("gap", 3), ("non_monotonic", 2)]


def test_order_uses_partition_and_offset_when_there_is_no_position():
    ledger = make_ledger("aabb")
    output = deliver(ledger, [1, 3, 0, 2], partition=[0, 1, 0, 1], offset=[1, 1, 0, 0])
    assert PerKeyOrderChecker().check(ledger, output).valid is True
    assert PerKeyOrderChecker().check(ledger, output.drop(columns=["partition", "offset"])).valid is False


def test_order_accepts_categorical_keys():
    ledger = make_ledger(ABC)
    output = deliver(ledger, [0, 2, 5, 3, 1, 4, 6, 7, 8, 9])
    output["key"] = output["key"].astype("category")
    result = PerKeyOrderChecker().check(ledger, output)
    assert result.counts["gaps"] == 1 and result.counts["non_monotonic"] == 1
    assert result.violations[1]["key"] == "a"


def test_order_violations_are_capped_at_ten_in_delivery_order():
    ledger = make_ledger("ab" * 30)
    a_ids, b_ids = list(range(0, 60, 2)), list(range(1, 60, 2))
    output = deliver(ledger, b_ids[::-1] + a_ids[::-1])  # both keys delivered backwards
    result = PerKeyOrderChecker().check(ledger, output)
    assert result.counts["non_monotonic"] == 58
    assert len(result.violations) == MAX_VIOLATIONS
    assert [v["row"] for v in result.violations] == list(range(1, 11))
    assert {v["key"] for v in result.violations} == {"b"}


# --------------------------------------------------------------------------------------------------
# Aggregator batches


def batches(ledger: pd.DataFrame, layout: list[tuple[str, list[int], float]]) -> pd.DataFrame:
    """Output of an aggregator: ``(batch_id, ids, emitted_at)`` per emitted batch, in emission order."""
    parts = [deliver(ledger, ids, batch_id=batch_id, emitted_at=emitted_at) for batch_id, ids, emitted_at in layout]
    return pd.concat(parts, ignore_index=True)


AGG = AggregatorBatchChecker(max_batch_size=4, max_wait_s=3.0, slack_s=0.5)


def good_batches(ledger: pd.DataFrame) -> pd.DataFrame:
    # produced_at is 100 + id; a: 0,1,5,8  b: 2,3,6  c: 4,7,9
    return batches(ledger, [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 5, 6], 106.0), ("b3", [7, 9, 8], 109.0)])


def test_aggregator_passes_a_well_formed_run():
    ledger = make_ledger(ABC)
    result = AGG.check(ledger, good_batches(ledger))
    assert result.valid is True, result
    assert result.counts == {
        "batches": 3,
        "records": 10,
        "redeliveries_skipped": 0,
        "uncommitted_skipped": 0,
        "max_batch_size_seen": 4,
        "oversized_batches": 0,
        "non_contiguous_keys": 0,
        "batch_order": 0,
        "cross_batch_order": 0,
        "batches_latency_judged": 3,
        "late_flushes": 0,
        "max_flush_latency_ms": 3000,
        "max_unpaused_latency_ms": 3000,
    }


def test_aggregator_reports_an_oversized_batch():
    ledger = make_ledger(ABC)
    output = batches(ledger, [("b1", [0, 1, 2, 3, 4], 104.0), ("b2", [5, 8, 6, 7, 9], 109.0)])
    result = AggregatorBatchChecker(max_batch_size=4, max_wait_s=10.0).check(ledger, output)
    assert result.valid is False
    assert result.counts["oversized_batches"] == 2 and result.counts["max_batch_size_seen"] == 5
    assert [(v["kind"], v["batch_id"], v["size"], v["id"], v["key"]) for v in result.violations] == [
        ("oversized_batch", "b1", 5, 0, "a"),
        ("oversized_batch", "b2", 5, 5, "a"),
    ]


def test_aggregator_reports_a_key_split_inside_a_batch():
    ledger = make_ledger(ABC)
    output = batches(ledger, [("b1", [0, 2, 3, 1], 103.0), ("b2", [4, 5, 6], 106.0), ("b3", [7, 9, 8], 109.0)])
    result = AGG.check(ledger, output)
    assert result.valid is False
    assert result.counts["non_contiguous_keys"] == 1 and result.counts["batch_order"] == 0
    assert result.violations == [
        {"kind": "non_contiguous_key", "id": 1, "key": "a", "seq": 1, "batch_id": "b1", "row": 3}
    ]
    interleaved = batches(ledger, [("b1", [0, 2, 1, 3], 103.0)])
    assert AGG.check(ledger, interleaved).counts["non_contiguous_keys"] == 2  # a and b both split


def test_aggregator_reports_order_broken_inside_a_batch():
    ledger = make_ledger(ABC)
    output = batches(ledger, [("b1", [1, 0, 2, 3], 103.0), ("b2", [4, 5, 6], 106.0), ("b3", [7, 9, 8], 109.0)])
    result = AGG.check(ledger, output)
    assert result.valid is False
    assert result.counts["batch_order"] == 1 and result.counts["cross_batch_order"] == 0
    assert result.violations == [
        {"kind": "batch_order", "id": 0, "key": "a", "seq": 0, "batch_id": "b1", "row": 1, "previous_seq": 1}
    ]


def test_aggregator_reports_order_broken_across_batches():
    ledger = make_ledger(ABC)
    # a's seq 2 (id 5) goes out in b2 before a's seq 1 (id 1) in b3.
    output = batches(ledger, [("b1", [0, 2, 3], 102.0), ("b2", [4, 5, 6], 105.0), ("b3", [1, 8, 7, 9], 109.0)])
    result = AggregatorBatchChecker(max_batch_size=4, max_wait_s=10.0).check(ledger, output)
    assert result.valid is False
    assert result.counts["cross_batch_order"] == 1 and result.counts["batch_order"] == 0
    assert result.violations == [
        {"kind": "cross_batch_order", "id": 1, "key": "a", "seq": 1, "batch_id": "b3", "row": 6, "previous_seq": 2}
    ]


def test_aggregator_orders_batches_by_emitted_at_not_by_row():
    ledger = make_ledger(ABC)
    output = good_batches(ledger)
    reordered = pd.concat([output[output.batch_id == b] for b in ("b3", "b1", "b2")], ignore_index=True)
    assert AGG.check(ledger, reordered).valid is True


def test_aggregator_replayed_batch_is_neither_out_of_order_nor_late():
    ledger = make_ledger(ABC)
    # After a restart b2 is emitted again (b2-replay); its records are the DuplicateChecker's finding.
    layout = [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 5, 6], 106.0), ("b2-replay", [4, 5, 6], 110.0)]
    output = batches(ledger, layout + [("b3", [7, 9, 8], 110.0)])
    result = AGG.check(ledger, output)
    assert result.valid is True, result.violations
    assert result.counts["redeliveries_skipped"] == 3
    assert result.counts["batches"] == 4 and result.counts["batches_latency_judged"] == 3
    assert DuplicateChecker().check(ledger, output).counts["extra_deliveries"] == 3


def test_aggregator_reports_a_late_flush_naming_the_oldest_record():
    ledger = make_ledger(ABC)
    output = batches(ledger, [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 5, 6], 107.6), ("b3", [7, 9, 8], 109.0)])
    result = AGG.check(ledger, output)
    assert result.valid is False
    assert result.counts["late_flushes"] == 1 and result.counts["max_flush_latency_ms"] == 3600
    (violation,) = result.violations
    assert violation["kind"] == "late_flush" and violation["batch_id"] == "b2"
    assert violation["id"] == 4 and violation["key"] == "c"
    assert violation["latency_s"] == pytest.approx(3.6) and violation["limit_s"] == 3.5
    assert violation["produced_at"] == 104.0 and violation["emitted_at"] == 107.6


def test_time_the_query_was_down_does_not_count_against_a_flush_but_only_where_it_overlaps_the_wait():
    ledger = make_ledger(ABC)
    # b2's oldest record (id 4) produced at 104.0, emitted at 109.6: 5.6 s against a limit of 3.5 s
    output = batches(ledger, [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 5, 6], 109.6), ("b3", [7, 9, 8], 109.8)])
    assert AGG.check(ledger, output).counts["late_flushes"] >= 1
    down = AggregatorBatchChecker(max_batch_size=4, max_wait_s=3.0, slack_s=0.5, pauses=[(101.0, 106.5)])
    result = down.check(ledger, output)  # 2.5 s of b2's wait (104.0-106.5) was downtime: 3.1 s counts
    assert result.valid is True and result.counts["max_unpaused_latency_ms"] == 3100
    outside = AggregatorBatchChecker(max_batch_size=4, max_wait_s=3.0, slack_s=0.5, pauses=[(95.0, 103.9)])
    late = outside.check(ledger, output)  # downtime before the record was produced excuses nothing
    assert late.valid is False and late.violations[0]["batch_id"] == "b2"
    assert late.violations[0]["paused_s"] == 0.0


def test_aggregator_without_emitted_at_is_unknown_never_a_pass():
    ledger = make_ledger(ABC)
    result = AGG.check(ledger, good_batches(ledger).drop(columns="emitted_at"))
    assert result.valid == UNKNOWN
    assert "emitted_at" in result.error and "flush latency not checked" in result.error
    assert result.counts["oversized_batches"] == 0  # the rules that could run did


def test_aggregator_without_produced_at_is_unknown():
    ledger = make_ledger(ABC)
    result = AGG.check(ledger.drop(columns="produced_at"), good_batches(ledger))
    assert result.valid == UNKNOWN and "'produced_at' in ledger" in result.error


def test_aggregator_missing_emitted_at_still_fails_on_what_it_found():
    ledger = make_ledger(ABC)
    output = batches(ledger, [("b1", [0, 1, 2, 3, 4], 0.0), ("b2", [5, 6, 7, 8, 9], 0.0)])
    result = AGG.check(ledger, output.drop(columns="emitted_at"))
    assert result.valid is False and result.counts["oversized_batches"] == 2
    assert "emitted_at" in result.error


def test_aggregator_without_batch_id_is_unknown():
    ledger = make_ledger(ABC)
    result = AGG.check(ledger, good_batches(ledger).drop(columns="batch_id"))
    assert result.valid == UNKNOWN
    assert result.error == "missing column 'batch_id' in output"
    assert result.counts == {} and result.violations == []


def test_aggregator_violations_are_capped_and_in_emission_order():
    ledger = make_ledger("a" * 40)
    layout = [(f"b{i:02d}", [4 * i + 3, 4 * i + 2, 4 * i + 1, 4 * i], 100.0 + 4 * i + 3) for i in range(10)]
    result = AGG.check(ledger, batches(ledger, layout))
    assert result.counts["batch_order"] == 30 and result.counts["cross_batch_order"] == 0
    assert len(result.violations) == MAX_VIOLATIONS
    assert [v["row"] for v in result.violations] == [1, 2, 3, 5, 6, 7, 9, 10, 11, 13]


# --------------------------------------------------------------------------------------------------
# Indeterminate input: attempted, never acknowledged; recovered when delivered once (Jepsen's set checker)

# ABC with id 5 (key a, seq 2 of 0..3) indeterminate: a's acknowledged records are ids 0, 1, 8 (seq 0, 1, 3).
HELD = 5
ONCE = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
TWICE = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 5]
NEVER = [0, 1, 2, 3, 4, 6, 7, 8, 9]
FATES = {"once": ONCE, "twice": TWICE, "never": NEVER}


def held_ledger() -> pd.DataFrame:
    return make_ledger(ABC, indeterminate=(HELD,))


def acked_ledger() -> pd.DataFrame:
    """The same ledger with every record acknowledged: what the checkers judge without the status."""
    return make_ledger(ABC)


@pytest.mark.parametrize("fate", FATES)
def test_lost_never_owes_an_indeterminate_record(fate):
    ledger = held_ledger()
    result = LostChecker().check(ledger, deliver(ledger, FATES[fate]))
    assert result.valid is True
    assert result.counts == {"acknowledged": 9, "delivered": 9, "lost": 0}


def test_lost_still_finds_acknowledged_records_missing_next_to_an_indeterminate_one():
    ledger = held_ledger()
    result = LostChecker().check(ledger, deliver(ledger, [0, 2, 3, 4, 6, 7, 8, 9]))
    assert result.valid is False
    assert result.counts == {"acknowledged": 9, "delivered": 8, "lost": 1}
    assert result.violations == [{"kind": "lost", "id": 1, "key": "a", "seq": 1, "ledger_row": 1}]


@pytest.mark.parametrize(
    ("fate", "recovered", "unrecovered", "duplicated"),
    [("once", 1, 0, 0), ("twice", 1, 0, 1), ("never", 0, 1, 0)],
)
def test_lost_reports_the_jepsen_set_accounting(fate, recovered, unrecovered, duplicated):
    ledger = make_ledger(ABC, aborted=(9,), indeterminate=(HELD,))
    output = deliver(ledger, [i for i in FATES[fate] if i != 3] + [42])  # 3 lost, 42 unexpected
    result = LostChecker().check(ledger, output)
    assert result.data == {
        "attempted": 9,
        "acknowledged": 8,
        "indeterminate": 1,
        "aborted": 1,
        "ok": 7,
        "recovered": recovered,
        "unrecovered": unrecovered,
        "lost": 1,
        "duplicated": duplicated,
        "unexpected": 1,
        "aborted_read": 1,
    }
    assert json.loads(json.dumps(result.to_dict()))["data"] == result.data


def test_the_accounting_without_a_status_column_counts_every_committed_record_acknowledged():
    ledger = held_ledger().drop(columns="status")
    result = LostChecker().check(ledger, deliver(ledger, NEVER))
    assert result.valid is False and result.counts["lost"] == 1
    assert result.data["acknowledged"] == 10 and result.data["indeterminate"] == 0


@pytest.mark.parametrize(("fate", "valid"), [("once", True), ("twice", False), ("never", True)])
def test_duplicate_reports_an_indeterminate_record_delivered_twice(fate, valid):
    ledger = held_ledger()
    result = DuplicateChecker().check(ledger, deliver(ledger, FATES[fate]))
    assert result.valid is valid
    if not valid:
        assert result.counts == {"deliveries": 11, "duplicated_ids": 1, "extra_deliveries": 1}
        assert result.violations == [
            {"kind": "duplicate", "id": HELD, "key": "a", "seq": 2, "row": 10, "deliveries": 2, "first_row": 5}
        ]


@pytest.mark.parametrize("fate", FATES)
def test_unexpected_knows_indeterminate_records(fate):
    ledger = held_ledger()
    output = deliver(ledger, FATES[fate])
    result = UnexpectedChecker().check(ledger, output)
    assert result.valid is True
    assert result.counts == {"deliveries": len(FATES[fate]), "unexpected": 0, "unexpected_ids": 0}


@pytest.mark.parametrize("fate", FATES)
def test_aborted_read_ignores_indeterminate_records(fate):
    ledger = held_ledger()
    result = AbortedReadChecker().check(ledger, deliver(ledger, FATES[fate]))
    assert result.valid is True and result.counts["aborted"] == 0


def test_a_record_whose_status_is_aborted_is_aborted_even_without_the_flag():
    ledger = held_ledger()
    ledger.loc[7, "status"] = "aborted"
    result = AbortedReadChecker().check(ledger, deliver(ledger, ONCE))
    assert result.valid is False and ids_of(result) == [7]
    lost = LostChecker().check(ledger, deliver(ledger, [i for i in ONCE if i != 7]))
    assert lost.valid is True and lost.counts["acknowledged"] == 8


def test_an_unknown_status_makes_the_checkers_that_read_it_unknown():
    ledger = held_ledger()
    ledger.loc[3, "status"] = "maybe"
    ledger.loc[4, "status"] = None
    output = good_batches(ledger)
    for checker in (LostChecker(), AbortedReadChecker(), PerKeyOrderChecker(), AGG):
        result = checker.check(ledger, output)
        assert result.valid == UNKNOWN, checker
        assert "'maybe'" in result.error and "<missing>" in result.error


@pytest.mark.parametrize("fate", FATES)
def test_order_neither_judges_nor_misses_an_indeterminate_record(fate):
    ledger = held_ledger()
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, FATES[fate]))
    assert result.valid is True, result.violations
    assert result.counts == {
        "keys": 3,
        "checked": 9,
        "redeliveries_skipped": 1 if fate == "twice" else 0,
        "uncommitted_skipped": 0,
        "non_monotonic": 0,
        "gaps": 0,
    }
    assert result.data == {"indeterminate_skipped": 0 if fate == "never" else 1}


def test_order_with_a_missing_indeterminate_record_fails_once_it_is_acknowledged():
    """The same output: no gap where the record was indeterminate, a gap where it was acknowledged."""
    output = deliver(acked_ledger(), NEVER)
    assert PerKeyOrderChecker().check(held_ledger(), output).valid is True
    result = PerKeyOrderChecker().check(acked_ledger(), output)
    assert result.valid is False and result.counts["gaps"] == 1
    assert result.violations == [{"kind": "gap", "id": 8, "key": "a", "seq": 3, "row": 7, "expected_seq": 2}]


def test_order_does_not_judge_where_an_indeterminate_record_was_delivered():
    # 5 (a's seq 2) arrives after 8 (a's seq 3): out of place if acknowledged, unknown place if indeterminate.
    ids = [0, 1, 2, 3, 4, 6, 7, 8, 5, 9]
    assert PerKeyOrderChecker().check(held_ledger(), deliver(held_ledger(), ids)).valid is True
    result = PerKeyOrderChecker().check(acked_ledger(), deliver(acked_ledger(), ids))
    assert result.valid is False and [v["id"] for v in result.violations] == [8, 5]


def test_order_still_finds_gaps_and_regressions_among_acknowledged_records():
    ledger = make_ledger("aaaaaaa", indeterminate=(1, 2, 5))
    # acknowledged: 0, 3, 4, 6 (seq 0, 3, 4, 6). 4 is missing: 3 -> 6 skips it; 3 then comes again late.
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 1, 6, 3]))
    assert result.valid is False
    assert result.counts["gaps"] == 1 and result.counts["non_monotonic"] == 1
    assert result.violations == [
        {"kind": "gap", "id": 6, "key": "a", "seq": 6, "row": 2, "expected_seq": 3},
        {"kind": "non_monotonic", "id": 3, "key": "a", "seq": 3, "row": 3, "previous_seq": 6},
    ]
    assert PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 3, 4, 6])).valid is True
    # the expected seq skips the indeterminate seqs after the previous one (1 and 2 after 0)
    gap = PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 4, 6]))
    assert gap.violations == [{"kind": "gap", "id": 4, "key": "a", "seq": 4, "row": 1, "expected_seq": 3}]


def test_order_excuses_indeterminate_records_key_by_key():
    # a: 0, 2 (indeterminate), 4;  b: 1, 3, 5. b's seq 1 (id 3) is missing: a gap; a's is excused.
    ledger = make_ledger("ababab", indeterminate=(2,))
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 1, 4, 5]))
    assert result.counts["gaps"] == 1
    assert result.violations == [{"kind": "gap", "id": 5, "key": "b", "seq": 2, "row": 3, "expected_seq": 1}]


def test_order_without_ledger_seqs_cannot_excuse_and_is_unknown():
    ledger = held_ledger().drop(columns="seq")
    result = PerKeyOrderChecker().check(ledger, deliver(held_ledger(), NEVER))
    assert result.valid == UNKNOWN and "'seq' in ledger" in result.error


@pytest.mark.parametrize("fate", FATES)
def test_aggregator_neither_judges_nor_misses_an_indeterminate_record(fate):
    ledger = held_ledger()
    layout = {
        "once": [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 5, 6], 106.0), ("b3", [7, 9, 8], 109.0)],
        "twice": [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 5, 6], 106.0), ("b3", [7, 9, 8, 5], 109.0)],
        "never": [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 6], 106.0), ("b3", [7, 9, 8], 109.0)],
    }[fate]
    result = AGG.check(ledger, batches(ledger, layout))
    assert result.valid is True, result.violations
    assert result.counts["uncommitted_skipped"] == 0
    assert result.data == {"indeterminate_skipped": 0 if fate == "never" else 1}


def test_aggregator_does_not_judge_the_place_nor_the_age_of_an_indeterminate_record():
    # 5 (a's seq 2, produced at 105) goes out after 8 (a's seq 3) in b3, emitted at 109: 4 s old, limit 3.5 s.
    layout = [("b1", [0, 1, 2, 3], 103.0), ("b2", [4, 6], 106.0), ("b3", [7, 9, 8, 5], 109.0)]
    result = AGG.check(held_ledger(), batches(held_ledger(), layout))
    assert result.valid is True, result.violations
    assert result.counts["batch_order"] == 0 and result.counts["late_flushes"] == 0
    acked = AGG.check(acked_ledger(), batches(acked_ledger(), layout))
    assert acked.valid is False
    assert acked.counts["batch_order"] == 1 and acked.counts["late_flushes"] == 1


def test_order_with_indeterminate_records_only_in_keys_never_delivered():
    ledger = make_ledger("aabbb", indeterminate=(3,))
    assert PerKeyOrderChecker().check(ledger, deliver(ledger, [0, 1])).valid is True
    result = PerKeyOrderChecker().check(ledger, deliver(ledger, [1, 0]))
    assert result.counts["non_monotonic"] == 1 and result.counts["gaps"] == 0


@pytest.mark.parametrize(("fate", "valid"), [("once", True), ("twice", False), ("never", True)])
def test_the_exactly_once_set_on_indeterminate_input(fate, valid):
    """The scenario's path: the workload's ledger through ``for_checkers``, every exactly-once checker."""
    from streamcert.harness.run.workload import Ledger

    frame = held_ledger().assign(
        partition=np.int32(0), offset=np.arange(10), acked_at=np.where(np.arange(10) == HELD, np.nan, 200.0)
    )
    ledger = Ledger(frame)
    assert ledger.counts() == {"acked": 9, "indeterminate": 1}
    results = run_checks(exactly_once_checkers(), ledger.for_checkers(), deliver(frame, FATES[fate]))
    assert combined_valid(results) is valid
    assert [r.name for r in results if r.valid is not True] == ([] if valid else ["duplicate"])


# --------------------------------------------------------------------------------------------------
# Missing columns and crashes: unknown, never a pass


@pytest.mark.parametrize(
    ("checker", "frame", "column"),
    [
        (LostChecker(), "ledger", "aborted"),
        (LostChecker(), "output", "id"),
        (DuplicateChecker(), "output", "id"),
        (UnexpectedChecker(), "ledger", "id"),
        (AbortedReadChecker(), "ledger", "aborted"),
        (PerKeyOrderChecker(), "output", "seq"),
        (PerKeyOrderChecker(), "output", "key"),
        (AGG, "output", "seq"),
    ],
    ids=lambda x: x if isinstance(x, str) else type(x).__name__,
)
def test_a_missing_column_makes_the_checker_unknown(checker, frame, column):
    ledger = make_ledger(ABC)
    output = good_batches(ledger)
    if frame == "ledger":
        ledger = ledger.drop(columns=column)
    else:
        output = output.drop(columns=column)
    result = checker.check(ledger, output)
    assert result.valid == UNKNOWN
    assert result.error == f"missing column {column!r} in {frame}"


def test_wrong_column_types_make_the_checker_unknown_not_a_pass():
    ledger = make_ledger(ABC)
    output = deliver(ledger, list(range(10)))
    output["id"] = output["id"].astype(float)
    result = LostChecker().check(ledger, output)
    assert result.valid == UNKNOWN
    assert result.error == "TypeError: column 'id' must be integer, got float64"
    as_text = ledger.assign(aborted=ledger["aborted"].map(str))
    assert AbortedReadChecker().check(as_text, deliver(ledger, [0])).valid == UNKNOWN


class _Exploding:
    name = "exploding"

    def check(self, ledger, output):
        raise RuntimeError("boom")


class _Lazy:
    name = "lazy"

    def check(self, ledger, output):
        return True


def test_a_crashing_checker_is_unknown_and_the_others_still_run():
    ledger = make_ledger(ABC)
    output = deliver(ledger, list(range(10)))
    results = run_checks([_Exploding(), LostChecker(), _Lazy()], ledger, output)
    assert [r.name for r in results] == ["exploding", "lost", "lazy"]
    assert results[0].valid == UNKNOWN and results[0].error == "RuntimeError: boom"
    assert results[1].valid is True
    assert results[2].valid == UNKNOWN and "not CheckResult" in results[2].error
    assert combined_valid(results) == UNKNOWN


def test_a_builtin_checker_that_crashes_inside_is_unknown(monkeypatch):
    import streamcert.harness.verify.checkers as checkers

    def broken(ids):
        raise MemoryError("out of memory")

    monkeypatch.setattr(checkers, "_redeliveries", broken)
    ledger = make_ledger(ABC)
    result = DuplicateChecker().check(ledger, deliver(ledger, list(range(10))))
    assert result.valid == UNKNOWN and result.error == "MemoryError: out of memory"
    assert run_checks([PerKeyOrderChecker()], ledger, deliver(ledger, [0]))[0].valid == UNKNOWN


def test_empty_output_loses_everything_and_judges_nothing_else():
    ledger = make_ledger(ABC)
    empty = pd.DataFrame({"id": [], "key": [], "seq": []})  # object dtypes, as a reader of nothing may give
    results = {r.name: r for r in run_checks(exactly_once_checkers(), ledger, empty)}
    assert results["lost"].valid is False and results["lost"].counts["lost"] == 10
    assert all(results[n].valid is True for n in ("duplicate", "unexpected", "aborted_read", "per_key_order"))


# --------------------------------------------------------------------------------------------------
# Property-style: exact counts on a random ledger


@pytest.mark.parametrize("seed", range(5))
def test_random_ledger_with_k_injected_losses_and_duplicates(seed):
    rng = np.random.default_rng(seed)
    n, k_lost, k_dup = 10_000, int(rng.integers(1, 40)), int(rng.integers(1, 40))
    keys = rng.integers(0, 300, n)
    ledger = make_ledger([f"k{c}" for c in keys], aborted=tuple(rng.choice(n, 25, replace=False)))
    committed = ledger.loc[~ledger.aborted, "id"].to_numpy()
    lost = rng.choice(committed, k_lost, replace=False)
    delivered = committed[~np.isin(committed, lost)]
    duplicated = rng.choice(delivered, k_dup, replace=False)
    # Redeliveries land after the originals, as an at-least-once replay does.
    ids = np.concatenate([delivered, np.sort(duplicated)])
    output = deliver(ledger, ids.tolist())

    results = {r.name: r for r in run_checks(exactly_once_checkers(), ledger, output)}
    assert results["lost"].counts["lost"] == k_lost
    assert sorted(ids_of(results["lost"])) == sorted(np.sort(lost)[:MAX_VIOLATIONS].tolist())
    assert results["duplicate"].counts["extra_deliveries"] == k_dup
    assert results["duplicate"].counts["duplicated_ids"] == k_dup
    assert ids_of(results["duplicate"]) == np.sort(duplicated)[:MAX_VIOLATIONS].tolist()
    assert results["unexpected"].valid is True and results["aborted_read"].valid is True
    order = results["per_key_order"]
    assert order.counts["non_monotonic"] == 0 and order.counts["redeliveries_skipped"] == k_dup
    # A run of lost records inside a key shows as one gap; a lost head or tail shows as none.
    assert order.counts["gaps"] == _gaps_by_runs(ledger, delivered)


def _gaps_by_runs(ledger, delivered):
    """Reference count: per key, jumps of more than one between consecutive delivered seqs."""
    seqs = ledger[ledger.id.isin(delivered)].sort_values("id").groupby("key")["seq"]
    return int(sum((np.diff(s.to_numpy()) > 1).sum() for _, s in seqs))


@pytest.mark.parametrize("seed", range(5))
def test_random_ledger_with_indeterminate_records_delivered_once_twice_or_never(seed):
    rng = np.random.default_rng(seed)
    n = 5_000
    held = rng.choice(n, 300, replace=False)
    aborted = rng.choice(np.setdiff1d(np.arange(n), held), 20, replace=False)
    ledger = make_ledger([f"k{c}" for c in rng.integers(0, 100, n)], aborted=tuple(aborted), indeterminate=tuple(held))
    fate = rng.integers(0, 3, held.size)  # how often each indeterminate record is delivered: 0, 1 or 2 times
    acked = ledger.loc[ledger.status == "acked", "id"].to_numpy()
    lost = rng.choice(acked, 15, replace=False)
    # Acknowledged records in order; indeterminate ones anywhere, a second copy of some anywhere too.
    ids = acked[~np.isin(acked, lost)].tolist()
    for record_id in np.concatenate([held[fate >= 1], held[fate == 2]]):
        ids.insert(int(rng.integers(0, len(ids) + 1)), int(record_id))
    output = deliver(ledger, ids)

    results = {r.name: r for r in run_checks(exactly_once_checkers(), ledger, output)}
    assert results["lost"].counts == {"acknowledged": acked.size, "delivered": acked.size - 15, "lost": 15}
    assert sorted(ids_of(results["lost"])) == np.sort(lost)[:MAX_VIOLATIONS].tolist()
    accounting = results["lost"].data
    assert (accounting["recovered"], accounting["unrecovered"]) == ((fate >= 1).sum(), (fate == 0).sum())
    assert accounting["duplicated"] == (fate == 2).sum() and accounting["attempted"] == n - 20
    assert results["duplicate"].counts["extra_deliveries"] == (fate == 2).sum()
    assert set(ids_of(results["duplicate"])) <= set(held[fate == 2].tolist())
    assert results["unexpected"].valid is True and results["aborted_read"].valid is True
    order = results["per_key_order"]
    assert order.counts["non_monotonic"] == 0 and order.counts["checked"] == acked.size - 15
    assert order.data == {"indeterminate_skipped": (fate >= 1).sum()}
    assert order.counts["gaps"] == _gaps_among_acknowledged(ledger, lost)


def _gaps_among_acknowledged(ledger, lost):
    """Reference count: per key, jumps of more than one between the ranks of delivered acknowledged records."""
    acked = ledger[ledger.status == "acked"].sort_values("seq")
    ranks = acked.groupby("key").cumcount()
    delivered = ranks[~acked.id.isin(lost)].groupby(acked.key[~acked.id.isin(lost)])
    return int(sum((np.diff(np.sort(r.to_numpy())) > 1).sum() for _, r in delivered))


def test_order_excuses_a_failed_commits_records_that_keep_their_seq():
    """A transaction planned to commit whose commit failed was aborted: its records are never delivered, and
    their planned seqs are no gap. A planned abort (seq -1) or an acknowledged record missing still is one."""
    ledger = make_ledger("aaaa")  # seqs 0..3, all acknowledged
    output = deliver(ledger, [0, 3])
    assert PerKeyOrderChecker().check(ledger, output).counts["gaps"] == 1  # 1 and 2 owed: the check can fail
    failed = ledger.assign(status=np.where(ledger["id"].isin([1, 2]), "aborted", ledger["status"]),
                           aborted=ledger["id"].isin([1, 2]).to_numpy())
    assert PerKeyOrderChecker().check(failed, output).valid is True
    assert LostChecker().check(failed, output).valid is True
    one_kept = failed.assign(aborted=failed["id"].isin([1]).to_numpy(),
                             status=np.where(failed["id"] == 1, "aborted", "acked"))
    result = PerKeyOrderChecker().check(one_kept, output)
    assert result.valid is False and result.violations[0]["expected_seq"] == 2
