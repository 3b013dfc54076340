"""Shards merged on the real stack: each shard runs its part and leaves what it cannot judge alone unknown, naming
the shard that has the rest; the merge of all of them gives the verdicts of the unsharded certification, and refuses
shards that are not one plan's. Runs on two jobs, each with a stack of its own, give them too."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcert.conformance.certify import certify, prepare
from streamcert.conformance.merge import merge
from streamcert.conformance.shards import parse_shard
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.results import RunResult
from streamcert.reports.render import render_reports

pytestmark = pytest.mark.integration

_CONNECTORS, _REQUIREMENTS = ["streamcert-kafka"], ["SRC-7", "SRC-9"]  # baseline judges SRC-9, bounded both


def _verdicts(result) -> list[tuple[str, str, str, str]]:
    return [(v.connector, v.requirement, v.verdict, v.reason) for v in result.verdicts]


@pytest.fixture(scope="module")
def whole(stack, tmp_path_factory) -> tuple[Path, object]:
    """The unsharded certification: its folder and its result."""
    folder = tmp_path_factory.mktemp("whole")
    return folder, certify(prepare(_CONNECTORS, _REQUIREMENTS), folder, environment=stack)


def test_merged_shards_give_the_verdicts_of_the_whole_plan(stack, whole, tmp_path):
    whole_folder, whole = whole
    parts = [certify(prepare(_CONNECTORS, _REQUIREMENTS, shard=parse_shard(f"{index}/2")), tmp_path / f"part{index}",
                     environment=stack, render=render_reports) for index in (1, 2)]
    assert sorted(len(part.runs) for part in parts) == [1, 1] and {part.shard for part in parts} == {"1/2", "2/2"}
    for part in parts:  # SRC-9 needs both runs: no shard can pass it alone
        [src9] = [v for v in part.verdicts if v.requirement == "SRC-9"]
        assert src9.verdict == "unknown" and "in shard" in src9.reason and "streamcert merge" in src9.reason
        assert src9.evidence["here"] == "pass" and list(src9.evidence["elsewhere"].values()) != [part.shard]
        assert part.passed() and part.passed_here(src9)  # the shard's exit: it found nothing
    merged = merge([tmp_path / "part1", tmp_path / "part2" / "results.json"], tmp_path / "merged",
                   render=render_reports)
    assert _verdicts(merged) == _verdicts(whole) and all(v.verdict == "pass" for v in merged.verdicts)
    assert merged.complete and merged.shard is None and len(merged.merged_from) == 2
    assert "merged from 2 shards" in (tmp_path / "merged" / "report.html").read_text()
    assert "shard 1/2" in (tmp_path / "part1" / "report.html").read_text()
    assert all((tmp_path / "merged" / run.folder / "results.json").exists() for run in merged.runs)
    again = merge([tmp_path / "part2", tmp_path / "part1"], tmp_path / "merged")  # an earlier merge is replaced
    assert _verdicts(again) == _verdicts(whole)

    with pytest.raises(ConfigurationError, match="missing 2/2"):
        merge([tmp_path / "part1"], tmp_path / "m1")
    with pytest.raises(ConfigurationError, match="given twice 1/2"):
        merge([tmp_path / "part1", tmp_path / "part1", tmp_path / "part2"], tmp_path / "m2")
    with pytest.raises(ConfigurationError, match="ran the whole plan"):
        merge([whole_folder, tmp_path / "part1"], tmp_path / "m3")
    with pytest.raises(ConfigurationError, match="no merge wrote"):
        merge([tmp_path / "part1", tmp_path / "part2"], whole_folder)


@pytest.mark.slow  # two more stacks at once: beside the default run's other worker, timing-sensitive tests suffer
def test_two_jobs_on_stacks_of_their_own_give_the_verdicts_of_one(whole, tmp_path):
    both = certify(prepare(_CONNECTORS, _REQUIREMENTS), tmp_path / "jobs", provider="local", jobs=2)
    assert _verdicts(both) == _verdicts(whole[1]) and both.complete
    assert sorted(run.scenario for run in both.runs) == ["baseline", "bounded"]
    first, second = [RunResult.load(tmp_path / "jobs" / run.folder / "results.json") for run in both.runs]
    assert first.started_at < second.started_at + second.duration_s  # the two ran at once
    assert second.started_at < first.started_at + first.duration_s
