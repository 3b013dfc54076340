"""GEN-2's probe: build and start a connector's query with each of its bad options, and with an unknown one.

A run's procedure (:class:`OptionsProbe`, a :class:`~streamcert.harness.scenario.Scenario`'s ``procedure``): the
scenario runner prepares the scenario's query (input topic, output, jars) and hands its driver spec to
:func:`run_options_probe`, which writes the cases to a file and runs this module as a child process (``python -m
streamcert.harness.options_probe SPEC OUT``). The child holds one Spark session and, for each case, builds the
query with the option in the connector's ``QueryContext.connector_options``
(:func:`streamcert.harness.run.pipeline.build`), starts it on a checkpoint of its own, and waits until it fails or
its first batch commits. Each outcome says at which stage the option was refused (``build``, ``start`` or
``query``), with the error's first lines and how long it took.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from streamcert.harness.results import RunResult
    from streamcert.harness.run.driver import QuerySpec

__all__ = ["UNKNOWN_OPTION", "OptionsProbe", "cases_of", "run_options_probe"]

#: The option no connector documents: it must be refused like a bad value.
UNKNOWN_OPTION = ("streamcertNoSuchOption", "1")


class OptionsProbe(BaseModel):
    """The procedure of a run that probes options instead of running the query through a workload: the scenario's
    query is built and started once per bad option that ``options_of``'s connector declares, and once with
    :data:`UNKNOWN_OPTION`; nothing is loaded and no fault is carried out."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["options_probe"] = "options_probe"
    options_of: Literal["source", "sink", "aggregator"] = Field(
        description="the connector of the scenario whose options are probed")
    case_timeout_s: float = Field(40.0, gt=0, le=600, allow_inf_nan=False,
                                  description="seconds a case may take to be refused (Spark plans and fails the "
                                              "first batch within a few)")


def cases_of(connector: Any) -> list[dict[str, str]]:
    """One case per bad option the connector declares, then the unknown option."""
    return [{name: str(value)} for name, value in connector.bad_options.items()] + [dict([UNKNOWN_OPTION])]


def run_options_probe(env: Any, spec: QuerySpec, procedure: OptionsProbe, connector: Any, workdir: Path,
                      result: RunResult) -> None:
    """Probe ``connector``'s options on the prepared query ``spec`` in a child process; the outcomes (one per
    case, in order) go into ``result.metrics["option_cases"]``. The caller saves the result."""
    from streamcert.harness.stack.process import token_env

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cases = cases_of(connector)
    spec_file, out_file = workdir / "options-probe.json", workdir / "options-probe-out.json"
    spec_file.write_text(json.dumps({"query": json.loads(spec.to_json()), "options_for": procedure.options_of,
                                     "cases": cases, "timeout_s": procedure.case_timeout_s}))
    with open(workdir / "options-probe.log", "ab") as log:
        subprocess.run([sys.executable, "-m", "streamcert.harness.options_probe", str(spec_file), str(out_file)],
                       stdout=log, stderr=subprocess.STDOUT, timeout=120 + procedure.case_timeout_s * len(cases),
                       env=token_env(getattr(env, "run_token", ""), dict(os.environ, PYTHONUNBUFFERED="1")))
    outcomes = json.loads(out_file.read_text()) if out_file.exists() else []
    outcomes += [{"case": case, "refused": None, "stage": None, "message": "the probe did not finish",
                  "seconds": None} for case in cases[len(outcomes):]]
    result.metrics["option_cases"] = outcomes


# -- the child -------------------------------------------------------------------------------

_RAISED = re.compile(r"^\s*([\w.]+(Error|Exception)): (.+)$")


def _what_was_raised(error: BaseException) -> str:
    """The error as a user reads it: the last ``SomeError: message`` line of the text Spark wraps around a Python
    traceback (the connector's own error is raised last), else the text's first line."""
    text = str(error).strip() or type(error).__name__
    raised = [match.group(0).strip() for match in map(_RAISED.match, text.splitlines()) if match]
    return (raised[-1] if raised else text.splitlines()[0])[:1000]


def _committed(checkpoint: str) -> bool:
    from streamcert.harness.run.checkpoint import batch_ids

    return bool(batch_ids(Path(checkpoint), "commits"))


def _one(spark: Any, params: dict[str, Any], case: dict[str, str], checkpoint: str, timeout_s: float) -> dict:
    from streamcert.harness.run.pipeline import build

    began = time.monotonic()

    def outcome(refused: bool | None, stage: str | None, message: str) -> dict[str, Any]:
        return {"case": case, "refused": refused, "stage": stage, "message": message,
                "seconds": round(time.monotonic() - began, 3)}

    def refused(stage: str, error: BaseException) -> dict[str, Any]:
        return outcome(True, stage, _what_was_raised(error))

    try:
        writer = build(spark, {**params, "checkpoint": checkpoint, "connector_options": case})
    except Exception as exc:  # noqa: BLE001 - what the connector raised is the evidence
        return refused("build", exc)
    try:
        query = writer.start()
    except Exception as exc:  # noqa: BLE001
        return refused("start", exc)
    try:
        while time.monotonic() - began < timeout_s:
            error = query.exception()
            if error is not None:
                return refused("query", error)
            if not query.isActive:
                return outcome(False, None, "the query ended without an error")
            if _committed(checkpoint):
                return outcome(False, None, "the query committed a batch with the option set")
            time.sleep(0.2)
        return outcome(False, None, f"the query ran {timeout_s:.0f} s without refusing the option")
    finally:
        try:
            query.stop()
        except Exception:  # noqa: BLE001 - a failed query may refuse to stop; the next case has its own
            pass


def _child(spec_file: str, out_file: str) -> int:
    from streamcert.harness.run.driver import QuerySpec
    from streamcert.harness.stack.spark import SparkConfig, spark_session

    spec = json.loads(Path(spec_file).read_text())
    query = QuerySpec(**{**spec["query"], "packages": tuple(spec["query"].get("packages", ()))})
    spark = spark_session(SparkConfig(master=query.master, conf=query.spark_conf, app_name="streamcert-options"))
    params = {**query.params, "options_for": spec["options_for"]}
    outcomes = []
    for index, case in enumerate(spec["cases"]):
        outcomes.append(_one(spark, params, case, f"{query.checkpoint}-case{index}", spec["timeout_s"]))
        Path(out_file).write_text(json.dumps(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2]))
