"""The default run's test order: each xdist worker's share longest first and as long as the others', cut where
pytest-xdist's ``worksteal`` scheduler cuts, on xdist's own scheduler driven by simulated workers."""

from __future__ import annotations

import heapq
import json
from types import SimpleNamespace

from xdist.scheduler.worksteal import WorkStealingScheduling

from tests.scheduling import UNKNOWN_S, durations_from_junit, load_durations, scheduled_order, slice_sizes


class _Config:
    def __init__(self, workers: int) -> None:
        self._workers = workers

    def getvalue(self, name: str):
        assert name == "tx"
        return [f"{self._workers}*popen"]


class _Worker:
    """A worker as xdist's scheduler sees it: it runs what it is sent, in order, and gives back on a steal what it
    has not started."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down, self.queue, self.steal_asked = False, [], None

    def send_runtest_some(self, indices) -> None:
        self.queue.extend(indices)

    def send_steal(self, indices) -> None:
        self.steal_asked = list(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def simulate(collection: list[str], seconds: dict[str, float], workers: int = 2) -> float:
    """Seconds until the last worker finishes ``collection`` (node IDs in the order given) under xdist's own
    ``WorkStealingScheduling``."""
    scheduler = WorkStealingScheduling(_Config(workers))
    nodes = [_Worker(f"gw{n}") for n in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    clock, running, finished = 0.0, [], []  # running: (ends_at, worker number, index)

    def start_idle() -> None:
        for number, node in enumerate(nodes):
            if node.steal_asked is not None:
                given = [i for i in node.steal_asked if i in node.queue]
                node.queue = [i for i in node.queue if i not in given]
                node.steal_asked = None
                scheduler.remove_pending_tests_from_node(node, given)
            if node.queue and not any(worker == number for _, worker, _ in running):
                index = node.queue.pop(0)
                heapq.heappush(running, (clock + seconds[collection[index]], number, index))

    start_idle()
    while running:
        clock, number, index = heapq.heappop(running)
        finished.append(index)
        scheduler.mark_test_complete(nodes[number], index)
        start_idle()
    assert sorted(finished) == list(range(len(collection)))
    return clock


def _ordered(entries, seconds, workers=2) -> list[str]:
    return [entries[i][0] for i in scheduled_order(entries, seconds, workers)]


def test_the_slices_are_cut_where_xdist_s_worksteal_cuts_them():
    assert slice_sizes(1481, 2) == [740, 741]
    assert slice_sizes(10, 3) == [3, 3, 4]
    scheduler = WorkStealingScheduling(_Config(3))
    nodes = [_Worker(f"gw{n}") for n in range(3)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, [f"t{i}" for i in range(10)])
    scheduler.schedule()
    assert [len(node.queue) for node in nodes] == slice_sizes(10, 3)


def test_each_share_runs_longest_first_and_the_shares_are_as_long_as_each_other():
    """Collection order with the long tests at the end leaves one worker alone on them; the schedule deals them
    out, and each share ends with short tests."""
    seconds = {f"tests/test_a.py::t{i}": 0.1 for i in range(40)}
    seconds |= {"tests/test_z.py::long1": 200.0, "tests/test_z.py::long2": 150.0, "tests/test_z.py::long3": 120.0,
                "tests/test_z.py::long4": 100.0}
    entries = [(node, None) for node in seconds]
    order = _ordered(entries, seconds)
    first, second = order[:slice_sizes(len(order), 2)[0]], order[slice_sizes(len(order), 2)[0]:]
    assert len(first) == len(second) == 22
    for share in (first, second):
        assert [seconds[node] for node in share] == sorted((seconds[node] for node in share), reverse=True)
    assert {first[0], second[0]} == {"tests/test_z.py::long1", "tests/test_z.py::long2"}
    assert abs(sum(seconds[n] for n in first) - sum(seconds[n] for n in second)) <= 30.0
    collection_order = simulate(list(seconds), seconds)
    scheduled = simulate(order, seconds)
    # the best split of the four long ones is 200 + 100 against 150 + 120
    assert scheduled <= 300.0 + 4.0 < collection_order, (scheduled, collection_order)


def test_tests_sharing_a_module_fixture_stay_together_in_their_order():
    seconds = {"tests/test_c.py::a": 5.0, "tests/test_c.py::b": 50.0, "tests/test_c.py::c": 1.0,
               "tests/test_d.py::x": 30.0, "tests/test_d.py::y": 40.0, "tests/test_e.py::z": 0.1}
    entries = [(node, "tests/test_c.py" if "test_c" in node else None) for node in seconds]
    order = _ordered(entries, seconds)
    start = order.index("tests/test_c.py::a")
    assert order[start:start + 3] == ["tests/test_c.py::a", "tests/test_c.py::b", "tests/test_c.py::c"]
    assert order[0] == "tests/test_c.py::a"  # the unit's 56 s make it the longest
    assert sorted(order) == sorted(seconds)


def test_one_worker_runs_the_longest_first_and_a_test_not_measured_counts_as_a_small_integration_test():
    seconds = {"tests/test_a.py::short": 0.5, "tests/test_a.py::long": 9.0}
    entries = [("tests/test_a.py::short", None), ("tests/test_a.py::new", None), ("tests/test_a.py::long", None)]
    assert _ordered(entries, seconds, workers=1) == ["tests/test_a.py::long", "tests/test_a.py::new",
                                                      "tests/test_a.py::short"]
    assert 0.5 < UNKNOWN_S < 9.0


def test_durations_come_from_pytest_s_junit_xml_and_a_missing_file_keeps_collection_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite name="pytest">'
                     '<testcase classname="tests.test_x" name="test_a[1]" time="3.25"/>'
                     '<testcase classname="tests.test_x.TestGroup" name="test_b" time="0.5"/>'
                     '<testcase classname="tests.gone" name="test_c" time="9"/></testsuite></testsuites>')
    assert durations_from_junit(junit) == {"tests/test_x.py::test_a[1]": 3.25,
                                           "tests/test_x.py::TestGroup::test_b": 0.5}
    assert load_durations(tmp_path / "absent.json") == {}
    (tmp_path / "durations.json").write_text(json.dumps({"schema_version": 1, "seconds": {"tests/test_x.py::a": 2}}))
    assert load_durations(tmp_path / "durations.json") == {"tests/test_x.py::a": 2.0}


def test_the_committed_durations_name_tests_that_exist():
    """A stale file only orders worse; one that names none of the tests orders nothing."""
    from pathlib import Path

    durations = load_durations()
    assert durations, "tests/durations.json: write it with python -m tests.scheduling JUNIT_XML"
    files = {node.split("::")[0] for node in durations}
    root = Path(__file__).parent.parent
    assert sum((root / path).exists() for path in files) >= 0.9 * len(files)


_CAPTURE = """
import json, os, pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    given = getattr(session.config, "workerinput", None)
    if given:
        with open(os.path.join(os.environ["CAPTURE_DIR"], given["workerid"] + ".json"), "w") as out:
            json.dump({"dist": given.get("streamcert_dist"), "items": [item.nodeid for item in session.items]}, out)
"""


def test_each_worker_of_a_worksteal_run_collects_the_scheduled_order(tmp_path):
    """On real pytest-xdist workers (whose own config says dist "no"): both collect the same order, the longest test
    first and the second longest where xdist cuts the second worker's share."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    module = "tests/reports/test_compare.py"
    root = Path(__file__).parent.parent
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p",
                                "no:cacheprovider", module], cwd=root, capture_output=True, text=True).stdout
    nodes = [line for line in collected.splitlines() if line.startswith(module + "::")]
    assert len(nodes) >= 6
    seconds = {node: 0.01 for node in nodes} | {nodes[-1]: 100.0, nodes[-2]: 90.0}
    (tmp_path / "durations.json").write_text(json.dumps({"schema_version": 1, "seconds": seconds}))
    (tmp_path / "capture_order.py").write_text(_CAPTURE)
    environment = {**os.environ, "STREAMCERT_TEST_DURATIONS": str(tmp_path / "durations.json"),
                   "CAPTURE_DIR": str(tmp_path),
                   "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "worksteal", "-p",
                          "capture_order", "-p", "no:cacheprovider", module], cwd=root, env=environment,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:]
    orders = [json.loads((tmp_path / f"gw{n}.json").read_text()) for n in range(2)]
    assert orders[0] == orders[1] and orders[0]["dist"] == "worksteal"
    items = orders[0]["items"]
    cut = slice_sizes(len(items), 2)[0]
    assert (items[0], items[cut]) == (nodes[-1], nodes[-2])
