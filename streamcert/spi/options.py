"""Reading a connector's Spark option map: case-insensitive names, typed values, errors that name the option.

Runs on the driver when Spark builds the reader or writer. Shared by the reference connectors' option
modules (:mod:`streamcert.connectors.kafka_options`, :mod:`streamcert.connectors.kafka_sink_options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamcert.spi.errors import ConfigurationError

__all__ = ["OptionRules"]


@dataclass(frozen=True)
class OptionRules:
    """The documented options of one connector (``known``: name -> what it takes) and what it is called."""

    known: Mapping[str, str]
    connector: str

    def canonical(self, options: Mapping[str, str]) -> dict[str, str]:
        """Spark option names are case-insensitive (it may hand them over lower-cased): use the documented
        spelling; ``kafka.*`` pass-through settings are lower-cased; unknown names stay as written (for errors)."""
        by_lower = {name.lower(): name for name in self.known}
        return {by_lower.get(key.lower(), key.lower() if key.lower().startswith("kafka.") else key): value
                for key, value in options.items()}

    def bad(self, option: str, value: object) -> ConfigurationError:
        return ConfigurationError(f"Option {option}={value!r} is not valid for the {self.connector}.",
                                  hint=f"{option} takes {self.known[option]}.")

    def integer(self, options: Mapping[str, str], name: str, default: int | None, minimum: int,
                maximum: int | None = None) -> int | None:
        raw = options.get(name)
        if raw is None:
            return default
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise self.bad(name, raw) from None
        if value < minimum or (maximum is not None and value > maximum):
            raise self.bad(name, raw)
        return value

    def choice(self, options: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
        """One of ``allowed``; the first is the default."""
        value = str(options.get(name, allowed[0])).strip()
        if value not in allowed:
            raise self.bad(name, value)
        return value
