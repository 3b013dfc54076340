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
        self._status = None

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
    if console.is_terminal:
        with console.status(description) as status:
            current._status = status
            yield current
        console.print(f"[green]✓[/green] {description} ({current.elapsed:.1f}s)")
        return
    print(f"streamcert: {description} ...", file=sys.stderr, flush=True)
    try:
        yield current
    except BaseException:
        print(f"streamcert: {description} failed after {current.elapsed:.1f}s", file=sys.stderr, flush=True)
        raise
    print(f"streamcert: {description} done ({current.elapsed:.1f}s)", file=sys.stderr, flush=True)


def note(text: str) -> None:
    """One line of news for the user (stderr; silent under ``STREAMCERT_QUIET``)."""
    if not _quiet():
        print(f"streamcert: {text}", file=sys.stderr, flush=True)
