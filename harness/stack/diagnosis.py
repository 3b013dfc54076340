"""Why a server or tool failed, read from what it printed: the hint should name the real cause.

A server that dies while starting leaves its reason in its last lines; a generic hint ("a slow machine may need a
longer start timeout") sends the user the wrong way when those lines say the heap was too small or the disk full.
:func:`diagnose_failure` recognises the causes a user can act on; :func:`with_diagnosis` puts the matching hint on
a :class:`~streamcert.harness.errors.StreamcertError` in place of the generic one.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from streamcert.harness.errors import StreamcertError

__all__ = ["Cause", "diagnose_failure", "with_diagnosis"]


@dataclass(frozen=True)
class Cause:
    """A recognised cause: what the output showed (``seen``) and what to do about it (``hint``)."""

    name: str
    seen: str
    hint: str


# (name, pattern, hint); the first match wins, so the more specific come first.
_CAUSES: tuple[tuple[str, str, str], ...] = (
    ("heap too small", r"OutOfMemoryError: Java heap space|Too small (?:maximum|initial) heap|"
     r"Initial heap size set to a larger value than the maximum heap size|GC overhead limit exceeded",
     "The JVM's heap is too small for it: give it more ({heap_hint})."),
    ("memory exhausted", r"Could not reserve enough space for (?:object heap|.*heap)|Cannot allocate memory|"
     r"insufficient memory for the Java Runtime|out of memory|OutOfMemoryError: unable to create native thread",
     "The machine ran out of memory: stop other work on it, or lower the heap sizes ({heap_hint})."),
    ("disk full", r"No space left on device|ENOSPC|could not extend file|Disk quota exceeded",
     "The disk is full{where}: free space there, or point TMPDIR (work folders) and STREAMCERT_CACHE at a "
     "larger disk."),
    ("port taken", r"Address already in use|could not bind|BindException",
     "Another process took the port between streamcert choosing it and the server binding it; retry, and look "
     "for leftovers with `streamcert env check`."),
    ("permission denied", r"Permission denied|Operation not permitted|AccessDeniedException",
     "The server's user cannot use a file or folder it needs: check the ownership and mode of the folders "
     "named above (PostgreSQL runs as the `postgres` user when streamcert runs as root)."),
)


#: Lines that look like a cause and never are: PostgreSQL's programs, started as ``postgres`` from a folder that user
#: cannot enter, say so and go on.
_HARMLESS = re.compile(r"could not change directory to", re.IGNORECASE)
#: Lines a server marks as its failure; a cause is looked for in these before the rest.
_SEVERE = re.compile(r"\b(?:FATAL|PANIC|ERROR|SEVERE)\b|Exception|\bError\b|error:")


def diagnose_failure(output: str, *, folder: Path | None = None, heap_hint: str = "a larger -Xmx") -> Cause | None:
    """The first recognised cause in ``output`` (a server's last lines, a tool's output), or None: looked for in the
    lines marked as failures first (FATAL, ERROR, exceptions), then in the others, never in known harmless ones."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not _HARMLESS.search(line)]
    severe = [line for line in lines if _SEVERE.search(line)]
    for candidates in (severe, lines):
        for name, pattern, hint in _CAUSES:
            line = next((line for line in candidates if re.search(pattern, line, flags=re.IGNORECASE)), None)
            if line is not None:
                return Cause(name, line[:200], hint.format(heap_hint=heap_hint, where=_free_space(folder)))
    return None


def with_diagnosis(error: StreamcertError, *outputs: str, folder: Path | None = None,
                   heap_hint: str = "a larger -Xmx") -> StreamcertError:
    """``error`` with the hint of the cause its details (or ``outputs``) show, when one is recognised."""
    text = "\n".join(part for part in (error.details or "", *outputs) if part)
    cause = diagnose_failure(text, folder=folder, heap_hint=heap_hint)
    if cause is not None:
        error.message = f"{error.message.rstrip()} Cause: {cause.name} (seen: {cause.seen})."
        error.hint = cause.hint
    return error


def _free_space(folder: Path | None) -> str:
    if folder is None:
        return ""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            usage = shutil.disk_usage(candidate)
            return f" ({candidate}: {usage.free / 2**20:.0f} MiB free now, of {usage.total / 2**20:.0f} MiB)"
    return ""
