"""The harness's user-facing errors: the SPI's two, plus what can go wrong starting the stack.

Each says what was seen and gives a hint; the CLI prints them as one paragraph and exits non-zero.
"""

from __future__ import annotations

from streamcert.spi.errors import ConfigurationError, StreamcertError

__all__ = [
    "StreamcertError",
    "PrerequisiteMissing",
    "StartupFailed",
    "ConfigurationError",
]


class PrerequisiteMissing(StreamcertError):
    """A tool or package the requested provider needs is not installed and cannot be installed."""


class StartupFailed(StreamcertError):
    """A server did not become ready: it exited, or did not answer in time."""
