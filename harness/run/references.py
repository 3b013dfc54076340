"""``module:attr`` references, as scenarios name query builders and connectors, resolved with errors that say
which part was wrong. Runs wherever a reference is followed: in the harness (to fail fast, before a run) and in
the driver process (to build the query)."""

from __future__ import annotations

import importlib
from typing import Any

from streamcert.harness.errors import ConfigurationError

__all__ = ["resolve"]


def resolve(reference: str, what: str, example: str, form: str = "module:attr") -> Any:
    """The object ``module:attr`` names; a ConfigurationError naming ``what`` (e.g. "query builder") otherwise.

    ``form`` is how the error spells the expected shape (``module:function`` for a builder)."""
    module_name, _, attr = reference.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{what.capitalize()} {reference!r} is not of the form {form}.",
                                 hint=f"For example {example}.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"Cannot import {module_name!r} for {what} {reference!r}: {exc}.",
                                 hint="Is the package installed in this interpreter (pip install -e .)?") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        public = ", ".join(name for name in dir(module) if not name.startswith("_"))
        raise ConfigurationError(f"Module {module_name!r} has no {attr!r} ({what} {reference!r}).",
                                 hint=f"Check the name after the colon; the module defines: {public[:200]}") from None
