"""The pytest plugin (entry point ``pytest11``): the requirement catalogue as parametrised tests.

``pytest --pyargs streamcert.conformance --streamcert-connector mypkg.module:MyConnector`` runs one test per
requirement x connector (``test_SNK_1[my-sink]``), each with a docstring carrying the requirement's ID, statement,
procedure and pass condition, so pytest's own ``--junitxml`` gives one test case per requirement. The verdicts come
from one certification per session (the same :func:`~streamcert.conformance.certify.certify` as ``streamcert
certify``): pass passes, fail fails with the checker findings, skip skips with the connector's reason, and unknown
fails (a requirement that could not be decided is not a pass); a failure's message ends with the command that
replays it. Requirements that apply to none of the connectors given are deselected.

The plugin is loaded by every pytest session where streamcert is installed and does nothing until a test of
:mod:`streamcert.conformance.test_requirements` is collected: importing it costs nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "pytest_generate_tests", "pytest_collection_modifyitems",
           "streamcert_certification", "verdict_of", "apply_verdict", "REQUIREMENT_ATTRIBUTE"]

#: The attribute a requirement's test function carries: the requirement's ID.
REQUIREMENT_ATTRIBUTE = "streamcert_requirement"
_PLAN = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamcert", "streamcert conformance suite")
    group.addoption("--streamcert-connector", action="append", default=None, metavar="NAME|module:attr",
                    help="a connector under test (repeatable; default: every reference connector)")
    group.addoption("--streamcert-requirements", action="append", default=None, metavar="IDS",
                    help="only these requirement IDs, comma-separated (repeatable)")
    group.addoption("--streamcert-seed", type=int, default=1, help="seed of workloads and fault schedules")
    group.addoption("--streamcert-quick", action="store_true", help="fewer scenarios and faults")
    group.addoption("--streamcert-out", default=None, metavar="DIR",
                    help="where results.json and the runs' evidence go (default: a folder under pytest's temp)")
    group.addoption("--streamcert-provider", default="auto", help="where the servers come from (default: auto)")
    group.addoption("--streamcert-no-strict", action="store_true",
                    help="allow requirements a connector neither claims nor waives")


def pytest_configure(config: pytest.Config) -> None:
    """Check the connectors and requirements asked for at once: a bad one is a usage error (one paragraph, exit
    4) before any test is collected."""
    if config.getoption("--streamcert-connector") or _wanted(config):
        _plan(config)


def _wanted(config: pytest.Config) -> list[str] | None:
    values = config.getoption("--streamcert-requirements") or []
    wanted = [item.strip() for value in values for item in value.split(",") if item.strip()]
    return wanted or None


def _plan(config: pytest.Config) -> Any:
    """The session's :class:`~streamcert.conformance.certify.Certification`, prepared once; a bad connector or
    requirement is a usage error (one paragraph, exit 4), not a traceback."""
    if _PLAN not in config.stash:
        from streamcert.conformance.certify import prepare
        from streamcert.harness.errors import StreamcertError

        try:
            config.stash[_PLAN] = prepare(config.getoption("--streamcert-connector"), _wanted(config),
                                          seed=config.getoption("--streamcert-seed"),
                                          quick=config.getoption("--streamcert-quick"),
                                          strict=not config.getoption("--streamcert-no-strict"))
        except StreamcertError as exc:
            raise pytest.UsageError(f"streamcert: {exc}") from None
    return config.stash[_PLAN]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each requirement's test over the connectors it applies to."""
    requirement_id = getattr(metafunc.function, REQUIREMENT_ATTRIBUTE, None)
    if requirement_id is None:
        return
    from streamcert.conformance.catalogue import CLUSTER_SUBJECT, ids_for

    certification = _plan(metafunc.config)
    if requirement_id in certification.cluster_requirements():  # the cluster under the failover runs (BRK)
        metafunc.parametrize("streamcert_connector", [CLUSTER_SUBJECT], ids=[CLUSTER_SUBJECT])
        return
    references = [ref for ref, connector in certification.connectors.items()
                  if requirement_id in ids_for(connector.kind)]
    metafunc.parametrize("streamcert_connector", references, ids=[certification.connectors[r].name
                                                                  for r in references])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out requirements that were not asked for (``--streamcert-requirements``) or that apply to none of the
    connectors (an empty parameter set)."""
    wanted = _wanted(config)
    from streamcert.conformance.catalogue import requirement

    wanted_ids = {requirement(req_id).id for req_id in wanted} if wanted else None
    keep, drop = [], []
    for item in items:
        requirement_id = getattr(getattr(item, "function", None), REQUIREMENT_ATTRIBUTE, None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        parametrised = isinstance(params.get("streamcert_connector"), str)  # not pytest's empty-set stand-in
        unwanted = requirement_id is not None and (
            not parametrised or (wanted_ids is not None and requirement_id not in wanted_ids))
        (drop if unwanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def streamcert_certification(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's certification, run once when the first requirement's test needs it."""
    from streamcert.conformance.certify import certify
    from streamcert.reports.render import render_reports

    config = request.config
    out = config.getoption("--streamcert-out")
    out = Path(out) if out else tmp_path_factory.mktemp("streamcert-certification")
    return certify(_plan(config), out, provider=config.getoption("--streamcert-provider"),
                   command="pytest --pyargs streamcert.conformance", render=render_reports)


def verdict_of(result: Any, connector_name: str, requirement_id: str) -> Any:
    """The verdict of ``requirement_id`` for the connector called ``connector_name`` in a certification result."""
    for verdict in result.verdicts:
        if verdict.connector == connector_name and verdict.requirement == requirement_id:
            return verdict
    return None


def apply_verdict(verdict: Any) -> None:
    """Turn a verdict into the test's outcome (called inside each requirement's test)."""
    if verdict is None:
        pytest.fail("the certification gave no verdict for this requirement (it stopped early)", pytrace=False)
    if verdict.verdict == "skip":
        pytest.skip(verdict.reason)
    if verdict.verdict == "fail":
        pytest.fail(f"FAIL: {verdict.reason}\nreplay: {verdict.evidence.get('replay', '')}", pytrace=False)
    if verdict.verdict == "unknown":
        pytest.fail(f"UNKNOWN (not a pass): {verdict.reason}\nreplay: {verdict.evidence.get('replay', '')}",
                    pytrace=False)
