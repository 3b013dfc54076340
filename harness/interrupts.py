"""SIGTERM handled as Ctrl-C: a cancelled CI job or a ``kill`` tears down what a command started (stacks, drivers,
servers), as an interrupt does, instead of ending the process with its children left running.

A command's ``main`` calls :func:`terminate_as_interrupt` first, in the main thread; its ``with`` blocks then stop
their resources on the way out, and the command says it was interrupted.
"""

from __future__ import annotations

import signal

__all__ = ["terminate_as_interrupt"]


def _raise_interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises :class:`KeyboardInterrupt` in the main thread (called from the main thread)."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
