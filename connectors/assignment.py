"""Partition -> reader-task assignment: deterministic and balanced (seed 000's rule).

``start = ((javaHash(topic) * 31) & 0x7FFFFFFF) % n`` and
``task = (start + partition) % n``, with Java's 32-bit ``String.hashCode``.
Consecutive partitions of a topic go to consecutive tasks from a per-topic
starting point, so for one topic the task loads differ by at most one
partition, and different topics start at different tasks. Every restart, at
any parallelism, recomputes the same answer from the offsets alone: nothing
about the assignment has to be stored.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["java_string_hash", "start_index", "task_for", "assign"]


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` in signed 32-bit arithmetic (UTF-16 units)."""
    value = 0
    units = text.encode("utf-16-be")
    for index in range(0, len(units), 2):
        value = (31 * value + int.from_bytes(units[index:index + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def start_index(topic: str, tasks: int) -> int:
    """The task that reads partition 0 of ``topic``."""
    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    # Java: (topic.hashCode() * 31) overflows in int, then the sign bit is masked off.
    return ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % tasks


def task_for(topic: str, partition: int, tasks: int) -> int:
    return (start_index(topic, tasks) + partition) % tasks


def assign(partitions: Iterable[tuple[str, int]], tasks: int) -> list[list[tuple[str, int]]]:
    """Group ``(topic, partition)`` pairs by reader task; each task's list is sorted."""
    by_task: list[list[tuple[str, int]]] = [[] for _ in range(tasks)]
    for topic, partition in partitions:
        by_task[task_for(topic, partition, tasks)].append((topic, partition))
    return [sorted(group) for group in by_task]
