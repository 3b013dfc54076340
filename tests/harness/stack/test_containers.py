"""Unit tests for the testcontainers provider's configuration (Docker itself is not needed)."""

from pathlib import PurePosixPath

from streamcert.harness.stack.containers import KAFKA_IMAGE, kafka_container_env
from streamcert.harness.stack.install import KAFKA_VERSION
from streamcert.harness.stack.kafka import KafkaPorts, render_server_properties


def test_properties_become_the_images_environment_variables():
    env = kafka_container_env("a.b=1\nc_d.e=2\nf-g.h=3\n# comment\n\n")
    assert env == {"KAFKA_A_B": "1", "KAFKA_C__D_E": "2", "KAFKA_F___G_H": "3"}


def test_container_broker_binds_all_interfaces_but_advertises_loopback():
    props = render_server_properties(KafkaPorts(40001, 9093, 9094), ("127.0.0.1", 40002),
                                     PurePosixPath("/tmp/kraft-combined-logs"), bind_host="0.0.0.0")
    env = kafka_container_env(props)
    assert env["KAFKA_LISTENERS"] == "INTERNAL://0.0.0.0:40001,CONTROLLER://0.0.0.0:9093,EXTERNAL://0.0.0.0:9094"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://127.0.0.1:40001,EXTERNAL://127.0.0.1:40002"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"


def test_the_image_matches_the_local_broker_version():
    assert KAFKA_IMAGE == f"apache/kafka:{KAFKA_VERSION}"
