"""Errors a user can act on: each says what was seen and gives a hint.

The CLI prints these as one paragraph and exits non-zero; anything else that
escapes is a bug in streamcert and is reported as such.
"""

from __future__ import annotations

__all__ = [
    "StreamcertError",
    "PrerequisiteMissing",
    "StartupFailed",
    "ConfigurationError",
]


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


class PrerequisiteMissing(StreamcertError):
    """A tool or package the requested provider needs is not installed and cannot be installed."""


class StartupFailed(StreamcertError):
    """A server did not become ready: it exited, or did not answer in time."""


class ConfigurationError(StreamcertError):
    """An option, provider name or input file has a value streamcert cannot use."""


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
