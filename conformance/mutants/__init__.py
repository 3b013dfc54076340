"""Mutants: connectors BROKEN ON PURPOSE, each with one plausible bug, to prove the suite catches what it claims to.

Every module here holds one mutant: a subclass of a reference connector with a single mistake a real author could
make, in code no fault point marks, and its declaration (claims copied from the reference). :data:`MUTANTS` says,
for each, which requirements the bug must fail and which requirements the same runs judge that it must still pass.
``tests/conformance/test_mutants.py`` certifies every mutant on those requirements with the connectors' own fault
points off (the default test run: the mutants whose bug every run shows; ``tox -e long``: all of them), and
``tox -e mutants`` measures the mutation score: each mutant certified over seeds 1-5, how often it is caught
(:mod:`streamcert.benchmarks.mutation`). ``streamcert certify --no-cooperative --connector
streamcert.conformance.mutants.<module>:CONNECTOR`` runs one by hand. Never use these connectors for anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Mutant", "MUTANTS"]


@dataclass(frozen=True)
class Mutant:
    """A broken connector and what the certification must say about it."""

    #: ``module:attr`` of its declaration
    reference: str
    #: the bug, in one line
    bug: str
    #: requirements its certification must fail
    breaks: frozenset[str]
    #: further requirements certified with it (judged by the same runs) that it must still pass
    keeps: frozenset[str] = frozenset()
    #: the certification's seed for the test (the schedule it gives is in the test's evidence)
    seed: int = 1
    #: certified on the quick plan by the test; False for a bug only the full plan's runs (rescale, network) reach
    #: (the mutation score certifies every mutant on the full plan)
    quick: bool = True

    @property
    def requirements(self) -> list[str]:
        return sorted(self.breaks | self.keeps)


def _ref(module: str) -> str:
    return f"streamcert.conformance.mutants.{module}:CONNECTOR"


MUTANTS: tuple[Mutant, ...] = (
    Mutant(_ref("source_offsets_in_memory"), "plans each batch from the end it remembers in driver memory, not from "
           "the start offsets Spark restored: a restarted driver reads everything again",
           frozenset({"SRC-1"})),
    Mutant(_ref("source_even_split"), "splits the partitions evenly across tasks when it plans its first batch "
           "(restored offsets, seed 000's ListState mistake) instead of by the assignment rule",
           frozenset({"SRC-3"}), frozenset({"SRC-2", "SRC-6", "GEN-1", "GEN-3"})),
    Mutant(_ref("source_off_by_one"), "stops one record before the end of each range",
           frozenset({"SRC-6"}), frozenset({"GEN-1"})),
    Mutant(_ref("source_read_uncommitted"), "reads with isolation.level=read_uncommitted: aborted transactions' "
           "records reach the query",
           frozenset({"SRC-6"}), frozenset({"GEN-1", "GEN-3"})),
    Mutant(_ref("sink_commit_in_write"), "commits each task's rows in write() instead of preparing them: a retried "
           "task, a zombie attempt or a replayed batch writes them again",
           frozenset({"SNK-2", "SNK-6"})),
    Mutant(_ref("sink_decision_overwritten"), "records a replayed batch's decision with an upsert and prepares it "
           "again: the replay of a committed batch commits a second copy",
           frozenset({"SNK-1", "SNK-3", "SNK-4", "SNK-5"})),
    Mutant(_ref("sink_never_rolls_back"), "never rolls back the prepared transactions of a failed attempt",
           frozenset({"SNK-2"})),
    Mutant(_ref("kafka_ledger_outside_txn"), "writes the batch's decision record outside the copy's transaction "
           "(before it commits): a crash in between marks the batch done with its rows never copied",
           frozenset({"SNK-1", "SNK-3"}), seed=2),
    Mutant(_ref("aggregator_waits_for_input"), "registers no timer: a group's time flush waits for that group's "
           "next input, so what it holds when the input stops is never emitted (seed 004, trap 2)",
           frozenset({"AGG-3"}), frozenset({"AGG-2"})),
    Mutant(_ref("aggregator_emits_after_barrier"), "clears a flushed group's buffer in this micro-batch's state and "
           "emits the batch in the next one, from scratch space (seed 004, method 3: emitting behind the barrier)",
           frozenset({"AGG-4"})),
    Mutant(_ref("sink_commit_before_decision"), "commits the prepared transactions before it records the decision: "
           "a driver that dies in between leaves the rows committed and the batch undecided, and the replay commits "
           "a second copy", frozenset({"SNK-1", "SNK-3", "SNK-4", "SNK-5"})),
    Mutant(_ref("sink_orphans_from_messages"), "rolls back the batch's prepared transactions that this commit's "
           "messages do not name, not those the recorded decision does not name: the replay of a decided batch "
           "rolls its rows back", frozenset({"SNK-1", "SNK-3", "SNK-4"})),
    Mutant(_ref("kafka_ledger_after_copy"), "records the batch in the decision log in a transaction of its own, "
           "after the copy's committed: a driver that dies in between leaves the rows visible and the batch "
           "unrecorded, and the replay copies them again", frozenset({"SNK-1", "SNK-3", "SNK-4", "SNK-5"})),
    Mutant(_ref("kafka_replay_not_checked"), "never reads the decision log before it copies: Spark's replayed "
           "commit of a batch already copied copies it again", frozenset({"SNK-1", "SNK-3", "SNK-4", "SNK-5"})),
    Mutant(_ref("source_resumes_from_group"), "commits each batch's end offsets to a consumer group as it plans the "
           "batch and resumes from the group after a start, not from Spark's restored start: a batch planned but not "
           "committed when the driver died is skipped", frozenset({"SRC-1"})),
    Mutant(_ref("source_commits_on_read"), "reader tasks commit their progress to a consumer group as they finish "
           "and a started driver resumes from there: a batch read but not committed is skipped after a crash",
           frozenset({"SRC-1"})),
    Mutant(_ref("aggregator_virtual_keys"), "groups records by hash(key) % state partitions (virtual keys, seed 004 "
           "method 1) with nothing pinning the count to the checkpoint: a rescale moves keys to other buffers",
           frozenset({"AGG-5"}), quick=False),
    Mutant(_ref("source_drift_after_restart"), "switches its event-time alignment on in initialOffset(), which a "
           "query restarted from its checkpoint never calls: after a restart a partition far ahead in event time "
           "is read uncapped", frozenset({"SRC-11"}), quick=False),
    Mutant(_ref("source_new_partitions_at_end"), "starts a partition discovered while the query runs at the end "
           "offset it was found with, not at its earliest: what was written into it before that batch is never read",
           frozenset({"SRC-5"}), quick=False),
    Mutant(_ref("sink_forgets_decision"), "deletes a batch's decision record once its commit committed every "
           "prepared transaction (cleanup): a driver that dies before Spark's commits/N replays the batch, which finds "
           "no decision and is written again", frozenset({"SNK-4"})),
    Mutant(_ref("source_ignores_unknown_options"), "drops the options it does not know instead of refusing them: a "
           "misspelt option silently does nothing", frozenset({"GEN-2"}), frozenset({"SRC-7", "SRC-9"})),
    Mutant(_ref("source_available_now_unbounded"), "fixes no end when an AvailableNow run starts: each batch reads to "
           "the broker's latest offsets, past the end the run started with", frozenset({"SRC-7"}),
           frozenset({"SRC-9", "GEN-2"})),
    Mutant(_ref("source_limit_per_partition"), "caps each partition's range at maxRecordsPerBatch instead of the "
           "batch's: a batch over N partitions reads up to N times the limit", frozenset({"SRC-9"}),
           frozenset({"SRC-7", "GEN-2"})),
    Mutant(_ref("sink_retry_resends_tail"), "retries a prepare that lost its connection with only the rows the lost "
           "try's COPY had not read: the rows it had sent died with its transaction", frozenset({"SNK-7"}),
           quick=False),
    Mutant(_ref("aggregator_size_over_limit"), "cuts a size batch once a group holds more than the limit: every "
           "size-flushed batch holds one record too many", frozenset({"AGG-2"}), frozenset({"AGG-1", "AGG-3"})),
    Mutant(_ref("aggregator_new_before_buffered"), "plans a flush from the new records followed by the buffered ones: "
           "a batch cut from both holds a key's newer records before its older ones", frozenset({"AGG-1"}),
           frozenset({"AGG-2"})),
    Mutant(_ref("source_groups_rows_by_key"), "sorts each chunk of records by key with an unstable sort: a key's "
           "records of one partition leave the reader out of offset order", frozenset({"SRC-2"}),
           frozenset({"SRC-6"})),
    Mutant(_ref("source_idle_task_waits"), "plans a task for every reader slot and reads until a record came: a task "
           "with no partition polls for ever and its batch never ends", frozenset({"SRC-10"}), quick=False),
    Mutant(_ref("source_quiet_partition_done"), "ends a reader task that got no record for a second with what it "
           "read: a range cut short by a network or broker fault is committed as read", frozenset({"SRC-8"}),
           quick=False),
)
