"""Reading a connector's Spark option map: case-insensitive names, typed values, errors that name the option.

Runs on the driver when Spark builds the reader or writer. A connector declares its options once, as an
:class:`OptionRules`, and reads Spark's map with one call::

    _RULES = OptionRules({"dsn": "a libpq connection string (required)", ...}, "my-sink sink",
                         required=("dsn",), spark_own=SPARK_WRITER_OPTIONS)

    values = _RULES.read(options)          # names, unknown options, reserved settings, required options
    dsn = values.text("dsn")
    batch = values.integer("batchSize", default=100, minimum=1)

Every problem is a :class:`~streamcert.spi.errors.ConfigurationError` naming the option and what it takes.
Used by the reference connectors' option modules (:mod:`streamcert.connectors.kafka_options`,
:mod:`streamcert.connectors.kafka_sink_options`, :mod:`streamcert.connectors.pg_sink`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from streamcert.spi.errors import ConfigurationError

__all__ = ["OptionRules", "OptionValues", "SPARK_READER_OPTIONS", "SPARK_WRITER_OPTIONS"]

#: Names Spark itself puts in a reader's option map (``load(path)``); lower-case.
SPARK_READER_OPTIONS = frozenset({"path"})
#: Names Spark itself puts in a writer's option map (``start(path)``, ``checkpointLocation``); lower-case.
SPARK_WRITER_OPTIONS = frozenset({"path", "checkpointlocation"})


@dataclass(frozen=True)
class OptionRules:
    """The documented options of one connector and what it is called in errors.

    - ``known``: documented name -> what it takes (shown in errors; the order is the order of the hint);
    - ``connector``: how errors name the connector ("streamcert-kafka source");
    - ``required``: documented names that must be given, not blank;
    - ``aliases``: a former name -> its documented name; accepted with the same behaviour, not listed;
    - ``passthrough``: the prefix of settings handed to a client library (``"kafka."``): any name with it is
      accepted, lower-cased; ``passthrough_hint`` says so in the unknown-option error;
    - ``reserved``: pass-through settings the connector sets itself (lower-case), refused with ``reserved_hint``;
    - ``spark_own``: names Spark adds to the map itself (:data:`SPARK_READER_OPTIONS`,
      :data:`SPARK_WRITER_OPTIONS`), accepted and dropped.
    """

    known: Mapping[str, str]
    connector: str
    required: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    passthrough: str = ""
    passthrough_hint: str = ""
    reserved: frozenset[str] = frozenset()
    reserved_hint: str = ""
    spark_own: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        undocumented = [name for name in (*self.required, *self.aliases.values()) if name not in self.known]
        if undocumented:
            raise ValueError(f"OptionRules of the {self.connector}: {undocumented} are not in known")

    def read(self, options: Mapping[str, object]) -> OptionValues:
        """Spark's option map, checked in this order: unknown names, reserved settings, required options.

        Raises :class:`ConfigurationError` on the first problem; typed values are read from the result.
        """
        values = {name: value for name, value in self.canonical(options).items()
                  if name.lower() not in self.spark_own}
        unknown = [name for name in values if name not in self.known and not self._passes_through(name)]
        if unknown:
            extra = f"; {self.passthrough_hint.rstrip('.')}" if self.passthrough_hint else ""
            raise ConfigurationError(f"Unknown option(s) for the {self.connector}: {', '.join(sorted(unknown))}.",
                                     hint=f"Known options: {', '.join(self.known)}{extra}.")
        reserved = sorted(name for name in values if name in self.reserved)
        if reserved:
            raise ConfigurationError(
                f"Option(s) {', '.join(reserved)} are set by the {self.connector} itself and cannot be overridden.",
                hint=self.reserved_hint or None)
        for name in self.required:
            if name not in values:
                raise ConfigurationError(f"Option {name} is missing for the {self.connector}.",
                                         hint=f"{name} takes {self.known[name]}.")
            if not str(values[name]).strip():
                raise self.bad(name, values[name])
        return OptionValues(self, values)

    def canonical(self, options: Mapping[str, object]) -> dict[str, object]:
        """Spark option names are case-insensitive (it may hand them over lower-cased): use the documented
        spelling (also for an alias); pass-through settings are lower-cased; unknown names stay as written
        (for errors). Two spellings of one option with different values are refused."""
        by_lower = {name.lower(): name for name in self.known}
        by_lower.update({alias.lower(): name for alias, name in self.aliases.items()})
        out: dict[str, object] = {}
        spelled: dict[str, str] = {}
        for key, value in options.items():
            lower = key.lower()
            name = by_lower.get(lower, lower if self._passes_through(lower) else key)
            if name in out and out[name] != value:
                raise ConfigurationError(
                    f"Options {spelled[name]}={out[name]!r} and {key}={value!r} set the same option {name} "
                    f"of the {self.connector} differently.", hint=f"Set {name} once; it takes {self.known[name]}."
                    if name in self.known else f"Set {name} once.")
            out[name], spelled[name] = value, key
        return out

    def bad(self, option: str, value: object) -> ConfigurationError:
        """The error for a value ``option`` cannot take."""
        return ConfigurationError(f"Option {option}={value!r} is not valid for the {self.connector}.",
                                  hint=f"{option} takes {self.known[option]}.")

    def integer(self, options: Mapping[str, object], name: str, default: int | None, minimum: int,
                maximum: int | None = None) -> int | None:
        """``name`` as an integer in ``[minimum, maximum]``, or ``default`` when it is not given."""
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

    def choice(self, options: Mapping[str, object], name: str, allowed: tuple[str, ...]) -> str:
        """One of ``allowed``; the first is the default."""
        value = str(options.get(name, allowed[0])).strip()
        if value not in allowed:
            raise self.bad(name, value)
        return value

    def _passes_through(self, name: str) -> bool:
        return bool(self.passthrough) and name.lower().startswith(self.passthrough)


class OptionValues(Mapping[str, object]):
    """What :meth:`OptionRules.read` returns: the option map under documented names, with typed getters."""

    def __init__(self, rules: OptionRules, values: Mapping[str, object]) -> None:
        self.rules = rules
        self._values = dict(values)

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"OptionValues({self._values!r})"

    def text(self, name: str, default: str | None = None) -> str | None:
        """``name`` stripped of surrounding blanks; ``default`` when it is not given or blank."""
        value = str(self._values.get(name, "")).strip()
        return value or default

    def integer(self, name: str, default: int | None, minimum: int, maximum: int | None = None) -> int | None:
        return self.rules.integer(self._values, name, default, minimum, maximum)

    def choice(self, name: str, allowed: tuple[str, ...]) -> str:
        return self.rules.choice(self._values, name, allowed)

    def bad(self, name: str, value: object = None) -> ConfigurationError:
        """The error for ``name``'s value (the given one unless ``value`` says otherwise)."""
        return self.rules.bad(name, self._values.get(name) if value is None else value)

    def passthrough(self) -> dict[str, str]:
        """The pass-through settings that are not documented options, without the prefix (librdkafka's names)."""
        prefix = self.rules.passthrough
        if not prefix:
            return {}
        return {name.removeprefix(prefix): str(value) for name, value in self._values.items()
                if name.startswith(prefix) and name not in self.rules.known}
