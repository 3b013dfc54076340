"""Unit tests: free loopback ports and the error when one is taken."""

import socket

import pytest

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.ports import ensure_port_free, free_port, port_is_free


def test_free_ports_are_distinct_and_bindable():
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(port_is_free(port) for port in ports[:5])


def test_a_listening_port_is_not_free_and_the_error_names_it():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not port_is_free(port)
        with pytest.raises(StartupFailed) as info:
            ensure_port_free(port, "Kafka (internal listener)")
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "already in use" in message
    assert "Hint:" in message and f"sport = :{port}" in message
    ensure_port_free(port, "anything")  # free again once closed
