"""argparse types for the command lines (``streamcert`` and the benchmark modules): a bad value is refused
while the arguments are parsed, with a message naming it, before anything starts."""

from __future__ import annotations

import argparse
import math

__all__ = ["positive_int", "non_negative_int", "seed", "positive_seconds"]


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _integer(text, "a positive integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = _integer(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def seed(text: str) -> int:
    """A seed: an integer >= 0."""
    value = _integer(text, "an integer seed")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a seed >= 0, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text}")
    return value
