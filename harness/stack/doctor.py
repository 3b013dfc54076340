"""``streamcert env check``: what the chosen provider needs, what is there, what is missing.

:func:`diagnose` runs every prerequisite check. Each says whether it is
required, what was found, and a hint when it fails; nothing here installs
anything or starts a server. (The checkers of a run's output are
:mod:`streamcert.harness.verify.checkers`, a different thing.)
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import socket
import sys
from dataclasses import asdict, dataclass
from typing import Callable

from streamcert.harness.errors import PrerequisiteMissing, StreamcertError
from streamcert.harness.stack.cache import cache_dir
from streamcert.harness.stack.jvm_start import class_archive_state
from streamcert.harness.stack.ports import free_port, port_range
from streamcert.harness.stack.install import (KAFKA_VERSION, TOXIPROXY_VERSION, find_go, find_java, kafka_lib_dir,
                                              postgres_bin_dir, toxiproxy_binary)
from streamcert.harness.stack.providers import docker_available
from streamcert.harness.stack.runs import survey

__all__ = ["Check", "CHECKS", "diagnose", "required_failures", "stray_processes"]

_PACKAGES = ("pyspark", "confluent_kafka", "psycopg", "pyarrow", "pandas", "numpy", "toxiproxy", "locust",
             "testcontainers", "requests", "rich")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    required: bool
    detail: str
    hint: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    return Check("python", sys.version_info >= (3, 11), True, f"{version} at {sys.executable}",
                 "" if sys.version_info >= (3, 11) else "streamcert needs Python 3.11 or newer.")


def _packages() -> Check:
    # find_spec, not import: importing locust monkey-patches the whole process with gevent.
    missing = [name for name in _PACKAGES if importlib.util.find_spec(name) is None]
    found = [name for name in _PACKAGES if name not in missing]
    try:
        spark_version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        spark_version = "absent"
    ok = not missing and spark_version.startswith("4.3")
    detail = f"pyspark {spark_version}; " + (f"missing: {', '.join(missing)}" if missing else f"{len(found)} ok")
    return Check("python packages", ok, True, detail,
                 "" if ok else "Install streamcert into this interpreter: `pip install -e .` (pyspark 4.3.x).")


def _java() -> Check:
    try:
        info = find_java()
    except StreamcertError as exc:
        return Check("java", False, True, exc.message, exc.hint or "")
    return Check("java", True, True, f"{info.version_line} ({info.path})")


def _docker() -> Check:
    up = docker_available()
    return Check("docker daemon", up, False,
                 "answers: provider auto = testcontainers" if up else "not answering: provider auto = local")


def _kafka() -> Check:
    lib = kafka_lib_dir()
    if (lib / ".complete").exists() or any(lib.glob("kafka_2.13-*.jar")):
        return Check(f"kafka {KAFKA_VERSION} jars", True, True, f"cached in {lib}")
    mvn = shutil.which("mvn")
    return Check(f"kafka {KAFKA_VERSION} jars", bool(mvn), True,
                 f"not cached; Maven {'found: will resolve them on first start' if mvn else 'missing'}",
                 "" if mvn else "Install Maven (`apt-get install maven`) or set STREAMCERT_KAFKA_LIB.")


def _toxiproxy() -> Check:
    binary = toxiproxy_binary()
    if binary.exists():
        return Check(f"toxiproxy {TOXIPROXY_VERSION}", True, True, f"cached at {binary}")
    go = find_go()
    return Check(f"toxiproxy {TOXIPROXY_VERSION}", bool(go), True,
                 f"not cached; Go {'found: will build it on first start' if go else 'missing'}",
                 "" if go else "Install Go 1.22+ or set STREAMCERT_TOXIPROXY_BIN.")


def _postgres() -> Check:
    found = postgres_bin_dir()
    if found is not None and (found / "postgres").exists():
        return Check("postgresql server", True, True, f"{found}")
    can_install = os.geteuid() == 0 and bool(shutil.which("apt-get"))
    return Check("postgresql server", can_install, True,
                 "not installed; " + ("will apt-get install it on first start" if can_install
                                      else "cannot install it (not root, or no apt-get)"),
                 "" if can_install else "Install the postgresql package or set STREAMCERT_PG_BIN.")


def _cache() -> Check:
    try:
        folder = cache_dir()
        probe = folder / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return Check("cache folder", False, True, str(exc), "Set STREAMCERT_CACHE to a writable folder.")
    return Check("cache folder", True, True, str(folder))


def _loopback() -> Check:
    try:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
    except OSError as exc:
        return Check("loopback", False, True, str(exc), "streamcert binds 127.0.0.1 only; enable loopback.")
    try:
        low, high = port_range()
        free_port()
    except StreamcertError as exc:  # a bad STREAMCERT_PORT_RANGE, or no free port in it
        return Check("loopback", False, True, exc.message, exc.hint or "")
    return Check("loopback", True, True, f"127.0.0.1 bindable; servers listen on ports {low}-{high}")


def _class_archive() -> Check:
    try:
        state, detail = class_archive_state()
    except PrerequisiteMissing as exc:  # no Java: the java check says so
        return Check("spark class archive", False, False, exc.message)
    return Check("spark class archive", state != "failed", False, f"{state}: {detail}",
                 "Spark still starts, only more slowly." if state == "failed" else "")


def _checkpoint_hold() -> Check:
    from streamcert.harness.stack.checkpoint_hold import ensure_hold_jar

    try:
        jar = ensure_hold_jar()
    except PrerequisiteMissing as exc:
        return Check("checkpoint hold", False, False, exc.message,
                     (exc.hint or "") + " Without it the kills with commits/N held cannot run: SNK-4 and AGG-4 stay "
                                        "unknown.")
    return Check("checkpoint hold", True, False, f"built: {jar}")


def stray_processes() -> list[int]:
    """Pids of the processes of orphaned runs: runs whose owner was killed before it could stop them."""
    return sorted(pid for state in survey() if state.orphan for pid in state.pids)


def _strays() -> Check:
    states = survey()
    orphans = [state for state in states if state.orphan]
    live = [state for state in states if not state.orphan and state.owner_pid != os.getppid()]
    others = (f"; {len(live)} live run(s) of other processes, left alone: "
              + "; ".join(state.describe() for state in live[:3])) if live else ""
    if not orphans:
        return Check("leftover processes", True, False, "no orphaned runs" + others)
    pids = [pid for state in orphans for pid in state.pids]
    return Check("leftover processes", False, False,
                 f"{len(orphans)} orphaned run(s), {len(pids)} process(es) {pids[:10]}: "
                 + "; ".join(state.describe() for state in orphans[:3]) + others,
                 "Their owners were killed; they hold ports and memory. `streamcert env clean` reaps them (the next "
                 "start of a stack does too); live runs of other processes are never touched.")


_CHECK_NAMES = {"_kafka": f"kafka {KAFKA_VERSION} jars", "_toxiproxy": f"toxiproxy {TOXIPROXY_VERSION}",
                "_postgres": "postgresql server", "_cache": "cache folder", "_class_archive": "spark class archive",
                "_checkpoint_hold": "checkpoint hold", "_strays": "leftover processes"}

CHECKS: tuple[Callable[[], Check], ...] = (_python, _packages, _java, _docker, _kafka, _toxiproxy, _postgres,
                                           _cache, _loopback, _class_archive, _checkpoint_hold, _strays)


def diagnose() -> list[Check]:
    """Every prerequisite check, in order: what the stack needs and whether this machine has it.

    A setting that a check cannot even read (an override pointing at the wrong thing, an unusable cache folder)
    fails that check with the setting's own error; the other checks still run.
    """
    return [_guarded(check) for check in CHECKS]


def _guarded(check: Callable[[], Check]) -> Check:
    try:
        return check()
    except StreamcertError as exc:
        return Check(_CHECK_NAMES.get(check.__name__, check.__name__.strip("_")), False, True, exc.message,
                     exc.hint or "")


def required_failures(checks: list[Check]) -> list[Check]:
    return [check for check in checks if check.required and not check.ok]


