"""SIGTERM handled as Ctrl-C (streamcert.harness.interrupts)."""

from __future__ import annotations

import os
import signal

import pytest

from streamcert.harness.interrupts import terminate_as_interrupt


def test_sigterm_raises_keyboard_interrupt_where_the_main_thread_is():
    before = signal.getsignal(signal.SIGTERM)
    try:
        terminate_as_interrupt()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs as the call returns
    finally:
        signal.signal(signal.SIGTERM, before)
