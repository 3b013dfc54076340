"""Secrets out of everything streamcert writes for people: results, reports, printed endpoints.

A user's own servers (the external provider) come with DSNs and URLs that may carry a password; the local stack's
carry none (PostgreSQL's password sits in a password file). :func:`redact` replaces the secret part of libpq
``password=`` settings and of ``scheme://user:secret@host`` URLs in any JSON-like value, keeping the rest
readable, so a result still says which server it ran against.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MASK", "redact", "redact_text"]

MASK = "***"

_LIBPQ_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)", re.IGNORECASE)
_URL_SECRET = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)([^@\s/]+)(@)", re.IGNORECASE)
_SECRET_KEYS = re.compile(r"pass(word|wd)?$|secret|token$", re.IGNORECASE)
#: Keys that end like a secret but are not one.
_NOT_SECRETS = frozenset({"run_token", "passfile"})


def redact_text(text: str) -> str:
    """``text`` with each libpq password and URL password replaced by :data:`MASK`."""
    text = _LIBPQ_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    return _URL_SECRET.sub(lambda m: m.group(1) + MASK + m.group(3), text)


def redact(value: Any) -> Any:
    """A copy of a JSON-like ``value`` (dicts, lists, strings) with secrets masked; values under secret-named keys
    (``password``, ``secret``, ``sasl.password``...) are masked whole."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {key: MASK if _secret_key(key) and value[key] not in (None, "") else redact(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


def _secret_key(key: Any) -> bool:
    return isinstance(key, str) and key not in _NOT_SECRETS and bool(_SECRET_KEYS.search(key))
