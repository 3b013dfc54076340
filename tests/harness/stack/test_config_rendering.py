"""Unit tests: the configuration files the harness writes for its servers."""

from pathlib import Path

from streamcert.harness.stack.install import render_kafka_pom
from streamcert.harness.stack.kafka import KafkaPorts, new_cluster_id, render_log4j2, render_server_properties
from streamcert.harness.stack.postgres import postgres_dsn, render_postgresql_conf


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_kafka_advertises_the_proxy_to_clients_and_itself_to_the_broker():
    props = _props(render_server_properties(KafkaPorts(9001, 9002, 9003), ("127.0.0.1", 7000), Path("/d")))
    assert props["advertised.listeners"] == "INTERNAL://127.0.0.1:9001,EXTERNAL://127.0.0.1:7000"
    assert props["listeners"] == ("INTERNAL://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002,"
                                  "EXTERNAL://127.0.0.1:9003")
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9002"
    assert props["process.roles"] == "broker,controller"
    assert props["log.dirs"] == "/d"


def test_kafka_binds_loopback_only_and_uses_replication_factor_one():
    props = _props(render_server_properties(KafkaPorts(1, 2, 3), ("127.0.0.1", 4), Path("/d")))
    for listener in props["listeners"].split(","):
        assert "//127.0.0.1:" in listener
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "share.coordinator.state.topic.replication.factor"):
        assert props[key] == "1", key


def test_kafka_overrides_win():
    props = _props(render_server_properties(KafkaPorts(1, 2, 3), ("127.0.0.1", 4), Path("/d"),
                                            {"num.partitions": "7"}))
    assert props["num.partitions"] == "7"


def test_cluster_id_is_22_char_urlsafe_and_random():
    first, second = new_cluster_id(), new_cluster_id()
    assert len(first) == 22 and first != second
    assert set(first) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_log4j2_writes_to_the_given_file():
    text = render_log4j2(Path("/tmp/x/server.log"))
    assert "appender.file.fileName = /tmp/x/server.log" in text
    assert "rootLogger.appenderRef.file.ref = FILE" in text


def test_kafka_pom_pins_version_and_a_logging_binding():
    pom = render_kafka_pom("4.3.1")
    assert "<artifactId>kafka_2.13</artifactId><version>4.3.1</version>" in pom
    assert "log4j-slf4j2-impl" in pom and "log4j-core" in pom and "slf4j-api" in pom


def test_postgresql_conf_enables_prepared_transactions_on_loopback():
    conf = render_postgresql_conf(6543, max_prepared_transactions=64)
    assert "max_prepared_transactions = 64" in conf
    assert "listen_addresses = '127.0.0.1'" in conf
    assert "port = 6543" in conf
    assert "unix_socket_directories = ''" in conf
    # Durability across SIGKILL needs synchronous commit (fsync off is safe: the OS cache survives).
    assert "synchronous_commit = on" in conf


def test_postgres_dsn():
    assert postgres_dsn("127.0.0.1", 5) == "host=127.0.0.1 port=5 dbname=streamcert user=streamcert connect_timeout=5"


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    """Kafka's storage tool reads "-..." as an option; one random id in 64 starts so and must be drawn again."""
    import uuid

    from streamcert.harness.stack import kafka

    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    assert kafka.new_cluster_id() == kafka.base64.urlsafe_b64encode(b"\x01" * 16).rstrip(b"=").decode()


def test_the_log_cleaner_s_buffer_fits_the_smallest_heap_a_broker_runs_with():
    """The cleaner allocates its dedupe buffer in one piece as the broker starts: Kafka's 128 MiB default on the
    test clusters' 256 MiB heaps killed a restarted node (OutOfMemoryError starting the LogManager)."""
    props = _props(render_server_properties(KafkaPorts(1, 2, 3), ("127.0.0.1", 4), Path("/d")))
    assert int(props["log.cleaner.dedupe.buffer.size"]) <= 256 * 1024 * 1024 // 8
