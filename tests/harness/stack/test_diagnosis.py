"""Failure causes read from what a server printed: the hint names the real cause, or stays as it was."""

from __future__ import annotations

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.diagnosis import diagnose_failure, with_diagnosis

# Lines as the servers print them (Kafka's StorageTool with -Xmx16m, the JVM refusing a heap, initdb on a full disk).
_KAFKA_OOM = 'Formatting metadata directory /tmp/x/data\nException in thread "main" java.lang.OutOfMemoryError: ' \
             'Java heap space\n\tat java.base/java.nio.HeapByteBuffer.<init>(HeapByteBuffer.java:64)'
_JVM_RESERVE = "Error occurred during initialization of VM\nCould not reserve enough space for 4194304KB object heap"
_PG_FULL = 'running bootstrap script ... FATAL:  could not write to file "pg_wal/xlogtemp.1": No space left on device'


def test_each_cause_is_recognised_from_real_lines(tmp_path):
    assert diagnose_failure(_KAFKA_OOM, heap_hint="--kafka-heap-mb").name == "heap too small"
    assert "--kafka-heap-mb" in diagnose_failure(_KAFKA_OOM, heap_hint="--kafka-heap-mb").hint
    assert diagnose_failure(_JVM_RESERVE).name == "memory exhausted"
    full = diagnose_failure(_PG_FULL, folder=tmp_path / "gone" / "pg")
    assert full.name == "disk full" and "No space left on device" in full.seen
    assert f"{tmp_path}: " in full.hint and "MiB free now" in full.hint  # the nearest folder that still exists
    assert diagnose_failure("java.net.BindException: Address already in use").name == "port taken"
    assert diagnose_failure("server started\nlistening on 127.0.0.1:5432") is None


def test_a_harmless_line_is_never_the_cause_and_a_failure_s_own_line_comes_first():
    """PostgreSQL run as ``postgres`` from /root says it cannot enter /root (Permission denied) and goes on: the
    server's FATAL line is the cause; without one, nothing is blamed."""
    cwd = 'could not change directory to "/root": Permission denied'
    assert diagnose_failure(f"{cwd}\nLOG:  database system is ready") is None
    shared = f"{cwd}\nFATAL:  could not create shared memory segment: No space left on device"
    assert diagnose_failure(shared).name == "disk full"
    both = ("LOG:  could not write temporary statistics file: No space left on device\n"
            'FATAL:  could not open lock file "/run/postgresql/.s.PGSQL.5432.lock": Permission denied')
    assert diagnose_failure(both).name == "permission denied"  # the failure's own line before a softer one


def test_with_diagnosis_replaces_a_generic_hint_and_leaves_an_unexplained_error_alone():
    error = StartupFailed("Formatting Kafka storage failed (exit code 1).", hint="Check the Java version (17+).",
                          details=_KAFKA_OOM)
    assert with_diagnosis(error, heap_hint="--kafka-heap-mb") is error
    assert "Cause: heap too small" in error.message and "Java heap space" in error.message
    assert error.hint.startswith("The JVM's heap is too small") and "Java version" not in error.hint
    plain = StartupFailed("Kafka did not answer in 60 s.", hint="A slow machine may need a longer start timeout.",
                          details="still starting")
    with_diagnosis(plain, "nothing of note")
    assert plain.hint == "A slow machine may need a longer start timeout." and "Cause" not in plain.message


def test_quoted_stack_traces_keep_their_first_frames_only():
    text = str(StartupFailed("failed", details=_KAFKA_OOM + "".join(f"\n\tat frame{i}" for i in range(30))))
    assert "java.lang.OutOfMemoryError" in text and "frame1" in text and "frame20" not in text
    assert len(text.splitlines()) < 10
