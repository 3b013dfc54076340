"""How the write-ahead protocol classifies the errors confluent-kafka raises (no broker needed)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from streamcert.connectors.kafka_write_ahead import _kafka_exception


def test_a_kafka_exception_is_itself():
    exc = KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))
    assert _kafka_exception(exc) is exc


def test_a_fatal_error_chained_to_a_system_error_is_unwrapped():
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    wrapped = SystemError("<built-in method flush of cimpl.Producer object> returned a result with an exception set")
    wrapped.__context__ = fenced  # what Python sets when the callback's exception is pending
    assert _kafka_exception(wrapped) is fenced


def test_a_fatal_error_the_client_lost_is_a_fatal_kafka_error():
    # seen in CI: a fenced staging producer's flush raised this with no exception behind it
    lost = SystemError("<method 'flush' of 'cimpl.Producer' objects> returned NULL without setting an exception")
    found = _kafka_exception(lost)
    assert found is not None and found.args[0].fatal() and found.args[0].code() == KafkaError._FATAL
    assert "returned NULL" in found.args[0].str()


def test_other_errors_are_not_kafka_errors():
    assert _kafka_exception(SystemError("error return without exception set")) is None
    assert _kafka_exception(ValueError("a bug of ours")) is None
    assert _kafka_exception(None) is None
