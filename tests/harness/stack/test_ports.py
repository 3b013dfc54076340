"""Unit tests: free loopback ports, their reservation across processes, and the error when one is taken."""

import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack import ports
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


def test_ports_are_drawn_below_the_kernels_ephemeral_range(monkeypatch):
    monkeypatch.delenv(ports.PORT_RANGE_VARIABLE, raising=False)
    low, high = ports.port_range()
    ephemeral_low, ephemeral_high = ports._ephemeral_range()
    if ephemeral_low - ports._LOWEST < ports._SMALLEST_RANGE and 65535 - ephemeral_high < ports._SMALLEST_RANGE:
        pytest.skip(f"the ephemeral range {ephemeral_low}-{ephemeral_high} leaves no room outside it")
    assert 1024 <= low <= high < ephemeral_low or ephemeral_high < low <= high <= 65535
    assert all(low <= free_port() <= high for _ in range(20))


def _free_window(size: int) -> tuple[int, int]:
    """``size`` consecutive ports that can all be bound now, in the range streamcert draws from."""
    low, high = ports.port_range()
    for start in range(low + 500, high - size, size):
        if all(port_is_free(port) for port in range(start, start + size)):
            return start, start + size - 1
    pytest.skip("no window of free ports")


@pytest.fixture
def small_range(monkeypatch, tmp_path):
    """A three-port range and a reservation folder of this test's own, shared with the children it starts."""
    low, high = _free_window(3)
    monkeypatch.setenv(ports.PORT_RANGE_VARIABLE, f"{low}-{high}")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(ports, "_handed_out", set())
    return low, high


def _holder() -> subprocess.Popen:
    """A process that reserves two ports, prints them, and holds them until its stdin closes."""
    code = ("from streamcert.harness.stack.ports import free_port; import sys; "
            "print(free_port(), free_port(), flush=True); sys.stdin.read()")
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_port_another_live_process_reserved_is_never_handed_out(small_range):
    low, high = small_range
    holder = _holder()
    try:
        taken = {int(port) for port in holder.stdout.readline().split()}
        assert len(taken) == 2 and taken <= set(range(low, high + 1))
        # Nothing binds the holder's ports: only its reservation keeps them from this process.
        assert all(port_is_free(port) for port in taken)
        (mine,) = set(range(low, high + 1)) - taken
        assert free_port() == mine
        with pytest.raises(StartupFailed) as info:
            free_port()
        assert f"{low}-{high}" in str(info.value) and ports.PORT_RANGE_VARIABLE in str(info.value)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # The holder removed its reservations when it exited, and its ports are handed out again.
    assert sorted(path.name for path in ports._folder_path().iterdir()) == [".lock", str(mine)]
    assert {free_port(), free_port()} == taken


def test_the_reservations_of_a_killed_process_are_taken_over(small_range):
    holder = _holder()
    taken = {int(port) for port in holder.stdout.readline().split()}
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert {free_port(), free_port(), free_port()} == set(range(small_range[0], small_range[1] + 1))
    assert taken < set(range(small_range[0], small_range[1] + 1))


@pytest.mark.parametrize("text", ["20000", "30000-20000", "80-90", "a-b", "20000-70000"])
def test_a_bad_port_range_is_a_configuration_error_with_a_hint(monkeypatch, text):
    monkeypatch.setenv(ports.PORT_RANGE_VARIABLE, text)
    with pytest.raises(ConfigurationError) as info:
        free_port()
    message = str(info.value)
    assert ports.PORT_RANGE_VARIABLE in message and repr(text) in message and "Hint:" in message
