"""Progress for long steps (downloads, waits), written to stderr.

On a terminal a spinner shows the step, its elapsed time and the latest line
of the tool doing the work; elsewhere (CI logs) one line when a step starts and
one when it ends, so stdout stays clean for machine-readable output.
Set ``STREAMCERT_QUIET=1`` to silence it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator

from rich.console import Console

__all__ = ["Step", "step", "note", "console"]

console = Console(stderr=True, highlight=False)


def _quiet() -> bool:
    return os.environ.get("STREAMCERT_QUIET", "") not in ("", "0")


class Step:
    """One long step; ``update(text)`` shows what it is doing now."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.started = time.monotonic()
        self.failure: str | None = None
        self._status = None

    def fail(self, reason: str) -> None:
        """Mark the step failed (a tool's non-zero exit, say) without raising: its end line says so."""
        self.failure = reason

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def update(self, text: str) -> None:
        if self._status is not None:
            line = text.strip().replace("[", r"\[")[:100]
            self._status.update(f"{self.description} [dim]({self.elapsed:.0f}s) {line}[/dim]")


@contextlib.contextmanager
def step(description: str) -> Iterator[Step]:
    """Show ``description`` while the body runs, then how long it took."""
    current = Step(description)
    if _quiet():
        yield current
        return
    terminal = console.is_terminal
    if not terminal:
        print(f"streamcert: {description} ...", file=sys.stderr, flush=True)
    try:
        if terminal:
            with console.status(description) as status:
                current._status = status
                yield current
        else:
            yield current
    except BaseException as exc:
        _end(current, terminal, _reason(exc))
        raise
    _end(current, terminal, current.failure)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return type(exc).__name__


def _end(current: Step, terminal: bool, failure: str | None) -> None:
    took = f"{current.elapsed:.1f}s"
    if terminal:
        mark = "[green]✓[/green]" if failure is None else "[red]✗[/red]"
        tail = f"({took})" if failure is None else f"failed: {failure} ({took})"
        console.print(f"{mark} {current.description} {tail}")
    else:
        tail = f"done ({took})" if failure is None else f"failed: {failure} (after {took})"
        print(f"streamcert: {current.description} {tail}", file=sys.stderr, flush=True)


def note(text: str) -> None:
    """One line of news for the user (stderr; silent under ``STREAMCERT_QUIET``)."""
    if not _quiet():
        print(f"streamcert: {text}", file=sys.stderr, flush=True)
