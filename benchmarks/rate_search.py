"""``--rate max``: the highest input rate a connector sustains with a bounded backlog.

A probe runs the pipeline at one rate for a while and says whether it kept up (its backlog stayed bounded). The
search doubles the rate until a probe fails, then bisects between the last rate that held and the first that did
not, until they are within ``precision`` of each other. Each probe is measured, not assumed; the result keeps
every probe, so a reader sees how the ceiling was found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streamcert.harness.errors import ConfigurationError

__all__ = ["Probe", "RateSearch", "find_max_rate", "confirm_rate"]


@dataclass(frozen=True)
class Probe:
    """One rate tried: records/s asked for, whether the backlog stayed bounded, what was measured."""

    rate: float
    sustained: bool
    details: dict = field(default_factory=dict)


@dataclass
class RateSearch:
    """The search's outcome: ``max_rate`` (None when even the lowest rate failed) and every probe in order."""

    max_rate: float | None
    probes: list[Probe]
    ceiling_reached: bool
    #: the longer runs that confirmed (or lowered) ``max_rate``; see :func:`confirm_rate`
    confirmations: list[Probe] = field(default_factory=list)
    confirmed: bool | None = None

    def as_dict(self) -> dict:
        return {"max_rate": self.max_rate, "ceiling_reached": self.ceiling_reached,
                "probes": [{"rate": p.rate, "sustained": p.sustained, **p.details} for p in self.probes],
                "confirmed": self.confirmed,
                "confirmations": [{"rate": p.rate, "sustained": p.sustained, **p.details}
                                  for p in self.confirmations]}


def find_max_rate(probe: Callable[[float], Probe], start: float = 1000.0, limit: float = 1_000_000.0,
                  precision: float = 0.1, max_probes: int = 12) -> RateSearch:
    """Search with ``probe(rate)`` from ``start`` records/s up to ``limit``; stop when the bracket is within
    ``precision`` (a fraction of the rate that held) or after ``max_probes`` probes."""
    if not 0 < start <= limit or not 0 < precision < 1 or max_probes < 1:
        raise ConfigurationError(f"A rate search needs 0 < start <= limit and 0 < precision < 1 (got start={start}, "
                                 f"limit={limit}, precision={precision}, max_probes={max_probes}).",
                                 hint="Start at a rate the connector surely sustains, e.g. 1000 records/s.")
    probes: list[Probe] = []
    held, failed = None, None
    rate = start
    while len(probes) < max_probes:
        result = probe(rate)
        probes.append(result)
        if result.sustained:
            held = rate
            if failed is None:
                if rate >= limit:
                    return RateSearch(held, probes, ceiling_reached=False)
                rate = min(rate * 2, limit)
                continue
        else:
            failed = rate
            if held is None:
                if len(probes) >= 3:
                    return RateSearch(None, probes, ceiling_reached=True)
                rate = rate / 4  # the start was already too fast: step down before bisecting
                continue
        if failed - held <= precision * held:
            break
        rate = (held + failed) / 2
    return RateSearch(held, probes, ceiling_reached=failed is not None)


def confirm_rate(search: RateSearch, probe: Callable[[float], Probe], step: float = 0.1,
                 max_tries: int = 3) -> RateSearch:
    """Run ``probe`` (as long as the measured runs) at the search's rate; while it does not hold, step down by
    ``step`` and try again, at most ``max_tries`` times.

    Short probes miss what takes longer to show (a backlog growing slowly, a stall now and then): the rate the
    measured runs use must hold for as long as they last. ``max_rate`` becomes the rate that held; if none did, the
    lowest one tried, with ``confirmed`` False (the measured runs then say the case was not sustained).
    """
    if search.max_rate is None:
        return search
    rate = search.max_rate
    for _ in range(max_tries):
        result = probe(rate)
        search.confirmations.append(result)
        if result.sustained:
            search.max_rate, search.confirmed = rate, True
            return search
        rate = rate * (1 - step)
    search.max_rate, search.confirmed = search.confirmations[-1].rate, False
    return search
