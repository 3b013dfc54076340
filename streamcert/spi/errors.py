"""Errors a user can act on: each says what was seen and gives a hint.

Connectors raise :class:`ConfigurationError` for an option they cannot use (on the driver, when Spark builds the
reader or writer); the harness raises subclasses of :class:`StreamcertError` for everything else it can explain.
The CLI prints any of them as one paragraph and exits with code 2; anything else that escapes is a bug.
"""

from __future__ import annotations

__all__ = ["StreamcertError", "ConfigurationError"]


class StreamcertError(Exception):
    """Base class for user-facing errors.

    ``message`` says what went wrong and what was seen, ``hint`` what to try,
    ``details`` optional evidence (such as the last lines of a server log).
    """

    def __init__(self, message: str, hint: str | None = None, details: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        text = self.message.rstrip()
        if self.hint:
            text += f" Hint: {self.hint.rstrip()}"
        if self.details:
            text += "\n" + _indent(self.details.rstrip())
        return text


class ConfigurationError(StreamcertError):
    """An option, provider name or input file has a value streamcert (or a connector) cannot use."""


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in _without_frame_walls(text.splitlines()))


def _without_frame_walls(lines: list[str], keep: int = 3) -> list[str]:
    """Stack traces quoted as evidence keep their first ``keep`` frames of each run; the error line says enough."""
    kept: list[str] = []
    run = 0
    for line in lines:
        frame = line.lstrip().startswith(("at ", "File \"")) and line[:1].isspace()
        run = run + 1 if frame else 0
        if run <= keep:
            kept.append(line)
        elif run == keep + 1:
            kept.append(line[: len(line) - len(line.lstrip())] + "...")
    return kept
