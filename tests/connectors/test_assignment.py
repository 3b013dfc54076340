"""Partition assignment: the seed's test vectors, Java hash compatibility, balance and determinism."""

import pytest

from streamcert.connectors.assignment import assign, java_string_hash, start_index, task_for


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("a", 97), ("hello", 99_162_322), ("Aa", 2112), ("BB", 2112), ("polygenelubricants", -2_147_483_648),
])
def test_java_string_hash_matches_java(text, expected):
    assert java_string_hash(text) == expected


def test_seed_vector_five_tasks():
    """Seed 000: topic test-topic, 11 partitions, 5 tasks -> start 1, task 0 reads partitions 4 and 9."""
    assert start_index("test-topic", 5) == 1
    groups = assign([("test-topic", p) for p in range(11)], 5)
    assert groups[0] == [("test-topic", 4), ("test-topic", 9)]


def test_seed_vector_six_tasks():
    """Seed 000: with 6 tasks -> start 0, task 0 reads partitions 0 and 6."""
    assert start_index("test-topic", 6) == 0
    assert assign([("test-topic", p) for p in range(11)], 6)[0] == [("test-topic", 0), ("test-topic", 6)]


@pytest.mark.parametrize("partitions, tasks", [(11, 5), (3, 8), (64, 7), (1, 1), (100, 3)])
def test_balanced_for_one_topic(partitions, tasks):
    loads = [len(group) for group in assign([("orders", p) for p in range(partitions)], tasks)]
    assert sum(loads) == partitions and max(loads) - min(loads) <= 1


def test_deterministic_and_complete():
    pairs = [(t, p) for t in ("a", "b", "c") for p in range(5)]
    first, second = assign(pairs, 4), assign(list(reversed(pairs)), 4)
    assert first == second
    assert sorted(x for group in first for x in group) == sorted(pairs)
    assert all(task_for(t, p, 4) == i for i, group in enumerate(first) for t, p in group)


def test_non_ascii_topics_hash_as_java_utf16():
    # Java hashes UTF-16 units: "😀" is the surrogate pair 0xD83D 0xDE00 -> 55357 * 31 + 56832.
    assert java_string_hash("é") == 233
    assert java_string_hash("😀") == 55357 * 31 + 56832


def test_zero_tasks_is_refused():
    with pytest.raises(ValueError):
        start_index("t", 0)
