"""``module:attr`` references, as scenarios name query builders and connectors, resolved with errors that say
which part was wrong. Runs wherever a reference is followed: in the harness (to fail fast, before a run) and in
the driver process (to build the query)."""

from __future__ import annotations

import importlib
import traceback
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
        if _missing_module(exc, module_name):
            raise ConfigurationError(f"Cannot import {module_name!r} for {what} {reference!r}: {exc}.",
                                     hint="Is the package installed in this interpreter (pip install -e .)?") from None
        raise _raised_on_import(module_name, what, reference, exc) from None
    except Exception as exc:  # noqa: BLE001 - the module's own code failed: the author's error, said as theirs
        raise _raised_on_import(module_name, what, reference, exc) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        public = ", ".join(name for name in dir(module) if not name.startswith("_"))
        raise ConfigurationError(f"Module {module_name!r} has no {attr!r} ({what} {reference!r}).",
                                 hint=f"Check the name after the colon; the module defines: {public[:200]}") from None


def _missing_module(exc: ImportError, module_name: str) -> bool:
    """Whether ``exc`` says the module itself (or a package on its path) is not there, rather than that its code
    failed to import something."""
    missing = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and bool(missing) and (
        module_name == missing or module_name.startswith(missing + "."))


def _raised_on_import(module_name: str, what: str, reference: str, exc: BaseException) -> ConfigurationError:
    """The error of a module whose own code raised while it was imported: the author's error, with the last frames
    of its traceback (theirs, not streamcert's)."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [frame for frame in frames if "importlib" not in frame.filename and frame.filename != __file__][-3:]
    where = "; ".join(f"{frame.filename}:{frame.lineno} in {frame.name}" for frame in own)
    return ConfigurationError(
        f"Importing {module_name!r} for {what} {reference!r} raised {type(exc).__name__}: {exc}"
        + (f" (at {where})" if where else "") + ".",
        hint="The error is in that module's code, not in streamcert: run `python -c \"import "
             f"{module_name}\"` to see the whole traceback.")
