"""The conformance catalogue as pytest tests: one function per requirement, parametrised by the connectors under
test (the plugin :mod:`streamcert.conformance.pytest_plugin` does that, and runs the certification once).

Run it with ``pytest --pyargs streamcert.conformance --streamcert-connector my_pkg.module:CONNECTOR``. Each
test's docstring is its requirement: ID, statement, procedure, pass condition and the checks that decide it.
"""

from __future__ import annotations

from collections.abc import Callable

from streamcert.conformance.catalogue import CATALOGUE, Requirement
from streamcert.conformance.pytest_plugin import REQUIREMENT_ATTRIBUTE, apply_verdict, verdict_of

__all__: list[str] = []


def _docstring(req: Requirement) -> str:
    return (f"{req.id} ({req.kind}{', optional' if req.optional else ''}): {req.statement}\n\n"
            f"Purpose: {req.statement} ({req.origin})\n"
            f"Procedure: {req.procedure}\n"
            f"Pass condition: {req.pass_condition}\n"
            f"Runs: {', '.join(req.runs) or 'none yet'}; faults: {', '.join(req.fault_families) or 'none'}"
            + (f" (kills reaching every planned cell of {', '.join(req.moments)})" if req.moments else "")
            + f"; decided by: {', '.join(req.checks)}.\n")


def _requirement_test(req: Requirement) -> Callable[..., None]:
    def test(streamcert_connector, streamcert_certification) -> None:
        name = _connectors(streamcert_certification)[streamcert_connector]
        apply_verdict(verdict_of(streamcert_certification, name, req.id))

    test.__name__ = test.__qualname__ = "test_" + req.id.replace("-", "_")
    test.__doc__ = _docstring(req)
    setattr(test, REQUIREMENT_ATTRIBUTE, req.id)
    return test


def _connectors(result) -> dict[str, str]:
    """Reference (as named on the command line) -> connector name, from the certification's declarations."""
    return {summary.reference: name for name, summary in result.declarations.items()}


for _req in CATALOGUE:
    globals()["test_" + _req.id.replace("-", "_")] = _requirement_test(_req)
del _req
