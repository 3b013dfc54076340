"""The run registry: which streamcert runs hold servers on this machine, and which of them were orphaned.

A run is one :class:`~streamcert.harness.stack.environment.Environment`: its
token, its owner (the process that started it), and its work folder. The
environment registers itself when it starts and unregisters when it stops;
a run whose owner was killed (SIGKILL, OOM, a closed terminal) stays in the
registry with its servers still running. Such a run is an *orphan*:

- its owner is dead (pid gone, or now naming a process started later), and
- its servers carry its token (:mod:`streamcert.harness.stack.process`).

:func:`survey` lists every run it can see, live or orphaned, from the
registry and from the processes' own environments (a run missing from the
registry is still found by its servers). :func:`reap_orphans` kills an
orphan's processes and removes the work folder it created; a run whose owner
lives is never touched, whoever owns it. Every environment start reaps
orphans first, and ``streamcert env clean`` does it on request.

The registry is a folder of small JSON files, one per run, readable by its
user only: ``$STREAMCERT_RUNS`` or ``<tmp>/streamcert-runs-<uid>`` (beside
the work folders, so both disappear with the machine's temporary files).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from streamcert.harness.stack.settings import writable_folder
from streamcert.harness.stack.process import Owner, carriers_with_owner, processes_with_token, reap

__all__ = ["RUNS_VAR", "RunRecord", "RunState", "ReapReport", "registry_dir", "register_run", "unregister_run",
           "registered_runs", "survey", "reap_orphans"]

RUNS_VAR = "STREAMCERT_RUNS"


@dataclass(frozen=True)
class RunRecord:
    """What the registry keeps of one run."""

    token: str
    owner_pid: int
    owner_started: float
    workdir: str | None
    own_workdir: bool
    started_at: float
    command: str
    extra_folders: tuple[str, ...] = ()  # other folders the run created (PostgreSQL's), removed with it

    @classmethod
    def for_this_process(cls, token: str, workdir: Path | None, own_workdir: bool,
                         extra_folders: tuple[Path, ...] = ()) -> "RunRecord":
        owner = Owner.of()
        return cls(token, owner.pid, owner.started, str(workdir) if workdir else None, own_workdir, time.time(),
                   " ".join(sys.argv)[:300], tuple(str(folder) for folder in extra_folders))

    def folders(self) -> list[str]:
        """The folders that are the run's to remove."""
        return ([self.workdir] if self.own_workdir and self.workdir else []) + list(self.extra_folders)

    @property
    def owner(self) -> Owner:
        return Owner(self.owner_pid, self.owner_started)


@dataclass
class RunState:
    """One run as :func:`survey` sees it: live (its owner runs) or an orphan."""

    token: str
    orphan: bool
    owner_pid: int | None
    pids: list[int] = field(default_factory=list)
    record: RunRecord | None = None

    def describe(self) -> str:
        what = f"run {self.token[:8]}: {len(self.pids)} process(es)"
        if self.record is not None and self.record.workdir:
            what += f", folder {self.record.workdir}"
        owner = f"owner pid {self.owner_pid}" if self.owner_pid else "owner unknown"
        return f"{what} ({owner}, {'dead' if self.orphan else 'alive'})"


@dataclass
class ReapReport:
    """What :func:`reap_orphans` did."""

    runs: list[str] = field(default_factory=list)
    processes: int = 0
    folders: list[str] = field(default_factory=list)
    still_alive: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        if not self.runs:
            return "no orphaned runs"
        text = (f"reaped {len(self.runs)} orphaned run(s): {self.processes} process(es) killed, "
                f"{len(self.folders)} work folder(s) removed")
        if self.still_alive:
            text += f"; still alive (stuck in the kernel?): {self.still_alive[:10]}"
        return text


def registry_dir() -> Path:
    """The registry folder (created, owner-only, when missing)."""
    explicit = os.environ.get(RUNS_VAR)
    folder = Path(explicit).expanduser() if explicit else Path(tempfile.gettempdir()) / f"streamcert-runs-{os.getuid()}"
    if not folder.is_dir():
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            pass  # writable_folder below says what is wrong with it
    source = f"{RUNS_VAR}={explicit}" if explicit else f"The run registry {folder} (under TMPDIR)"
    return writable_folder(folder, source, f"Point {RUNS_VAR} at a folder you can write (it lists the runs of "
                                           "this machine's stacks, so orphans can be found).")


def register_run(record: RunRecord) -> None:
    """Record a starting run (atomically: a reader never sees half a file)."""
    folder = registry_dir()
    partial = folder / f".{record.token}.json.partial"
    partial.write_text(json.dumps(asdict(record)))
    os.chmod(partial, 0o600)
    partial.replace(folder / f"{record.token}.json")


def unregister_run(token: str) -> None:
    """Forget a run that stopped; nothing happens when it was not registered."""
    try:
        (registry_dir() / f"{token}.json").unlink()
    except FileNotFoundError:
        pass


def registered_runs() -> dict[str, RunRecord]:
    """Token -> record of every registered run; unreadable entries (a foreign or torn file) are skipped."""
    found = {}
    for path in registry_dir().glob("*.json"):
        try:
            fields = json.loads(path.read_text())
            record = RunRecord(**{**fields, "extra_folders": tuple(fields.get("extra_folders", ()))})
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        found[record.token] = record
    return found


def survey() -> list[RunState]:
    """Every run on this machine that the registry or a running process names, live or orphaned.

    The owner comes from the registry, else from the processes' environment, else (servers started by a streamcert
    without owners) from their parents: a run whose processes all hang from init or from each other is an orphan.
    """
    carriers: dict[str, list[psutil.Process]] = {}
    owners: dict[str, Owner] = {}
    for proc, token, owner in carriers_with_owner():
        carriers.setdefault(token, []).append(proc)
        if owner is not None:
            owners.setdefault(token, owner)
    records = registered_runs()
    states = []
    for token in sorted(set(carriers) | set(records)):
        procs = carriers.get(token, [])
        record = records.get(token)
        owner = record.owner if record is not None else owners.get(token)
        if owner is not None:
            alive, owner_pid = owner.alive(), owner.pid
        else:
            owner_pid = _parent_outside(procs)
            alive = owner_pid is not None
        states.append(RunState(token, not alive, owner_pid, sorted(p.pid for p in procs), record))
    return states


def reap_orphans() -> ReapReport:
    """Kill every orphaned run's processes, remove the work folders they created, forget them."""
    report = ReapReport()
    for state in survey():
        if not state.orphan:
            continue
        report.runs.append(state.token)
        report.processes += reap(state.token)
        report.still_alive.extend(processes_with_token(state.token))
        for folder in state.record.folders() if state.record is not None else []:
            if Path(folder).exists():
                shutil.rmtree(folder, ignore_errors=True)
                report.folders.append(folder)
        unregister_run(state.token)
    return report


def _parent_outside(procs: list[psutil.Process]) -> int | None:
    """The pid of a live parent of ``procs`` that is not one of them and not init, if any: the run's owner."""
    members = {proc.pid for proc in procs}
    for proc in procs:
        try:
            parent = proc.ppid()
        except psutil.Error:
            continue
        if parent not in members and parent > 1 and psutil.pid_exists(parent):
            return parent
    return None
