"""What was on a link when a fault struck it: the connections awaiting an answer, and the server's statements.

A fault aimed at a moment of the query (:mod:`streamcert.harness.faults.at_moment`) reads this with the driver
frozen, just before it strikes, so its event can say a request was in flight rather than hope one was. Two views,
neither needs the connector's cooperation:

- :func:`connections_to`: the kernel's own account of each TCP connection to the link's listening ports (``ss``
  from iproute2: bytes each way, milliseconds since the last send and the last receive, the owning process). A
  request/response client (Kafka, PostgreSQL, HTTP) whose last send is more recent than its last receive has a
  request out and no answer yet: that connection is *awaiting* one.
- :func:`postgres_statements`: the statements PostgreSQL runs for the connector's sessions (``pg_stat_activity``,
  the harness's own left out by their ``application_name``), each with
  its kind (:func:`statement_kind`: ``COPY``, ``INSERT``, ``PREPARE TRANSACTION``, ``COMMIT PREPARED``...).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from streamcert.harness.stack.postgres import HARNESS_APPLICATION

__all__ = ["Connection", "connections_to", "awaiting", "postgres_statements", "statement_kind", "SS_MISSING"]

#: What a fault records when this machine has no ``ss``: the in-flight view is then unknown, never empty.
SS_MISSING = "ss (iproute2) is not installed: the connections on the link cannot be read"

_FIELD = re.compile(r"\b(bytes_sent|bytes_received|lastsnd|lastrcv):(\d+)")
_OWNER = re.compile(r'users:\(\("([^"]*)",pid=(\d+)')
_OWNERS = re.compile(r"pid=(\d+)")
#: The statement kinds told apart, longest first (a two-word kind before its first word).
_KINDS = ("PREPARE TRANSACTION", "COMMIT PREPARED", "ROLLBACK PREPARED", "START TRANSACTION", "COPY", "INSERT",
          "UPDATE", "DELETE", "MERGE", "SELECT", "BEGIN", "COMMIT", "END", "ROLLBACK", "CREATE", "DROP", "ALTER",
          "TRUNCATE", "LOCK", "SAVEPOINT", "RELEASE", "WITH", "SET")


@dataclass(frozen=True)
class Connection:
    """One client connection to a link, as the kernel saw it at one instant."""

    local: str
    remote_port: int
    process: str | None
    pid: int | None
    bytes_sent: int
    bytes_received: int
    #: milliseconds since the client last sent / received data on it (None: never)
    last_send_ms: int | None
    last_receive_ms: int | None
    #: every process holding the socket (a forked process shares its parent's)
    owners: tuple[int, ...] = ()

    @property
    def awaiting_answer(self) -> bool:
        """Whether the client sent something after the last thing it received: a request without its answer yet."""
        if not self.bytes_sent or self.last_send_ms is None:
            return False
        # a connection that never received data reports its last receive at its start
        return not self.bytes_received or self.last_receive_ms is None or self.last_send_ms < self.last_receive_ms

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        del found["owners"]
        return {**found, "awaiting_answer": self.awaiting_answer}


def connections_to(ports: list[int] | tuple[int, ...], owners: set[int] | None = None) -> list[Connection] | None:
    """The established TCP connections to any of ``ports`` on this machine (the clients' side), of a process in
    ``owners`` when given; None when ``ss`` is not installed. Runs ``ss`` once (a few milliseconds)."""
    ss = shutil.which("ss")
    if ss is None:
        return None
    wanted = set(ports)
    done = subprocess.run([ss, "-tinpH", "state", "established"], capture_output=True, text=True, timeout=10,
                          check=False)
    return [found for found in _parse(done.stdout) if found.remote_port in wanted
            and (owners is None or bool(set(found.owners) & owners))]


def _parse(text: str) -> list[Connection]:
    """``ss -tinpH``'s lines: one line of addresses (and owner), then an indented line of TCP details."""
    found, head = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            head = line
            continue
        if head is not None:
            connection = _connection(head, line)
            if connection is not None:
                found.append(connection)
            head = None
    return found


def _connection(head: str, details: str) -> Connection | None:
    parts = head.split()
    if len(parts) < 4:
        return None
    local, remote = parts[2], parts[3]
    try:
        remote_port = int(remote.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None
    owner = _OWNER.search(head)
    fields = {name: int(value) for name, value in _FIELD.findall(details)}
    return Connection(local=local, remote_port=remote_port, process=owner.group(1) if owner else None,
                      pid=int(owner.group(2)) if owner else None, bytes_sent=fields.get("bytes_sent", 0),
                      bytes_received=fields.get("bytes_received", 0), last_send_ms=fields.get("lastsnd"),
                      last_receive_ms=fields.get("lastrcv"),
                      owners=tuple(int(pid) for pid in _OWNERS.findall(head)))


def awaiting(connections: list[Connection] | None) -> list[dict[str, Any]]:
    """The connections awaiting an answer, as an event records them."""
    return [found.as_dict() for found in connections or [] if found.awaiting_answer]


def statement_kind(query: str | None) -> str:
    """The kind of a SQL statement by its leading keywords (comments and whitespace skipped): ``COPY``,
    ``PREPARE TRANSACTION``...; ``OTHER`` for anything else, ``NONE`` for no statement."""
    text = re.sub(r"^(\s|--[^\n]*\n|/\*.*?\*/)+", "", query or "", flags=re.S).upper()
    if not text:
        return "NONE"
    words = " ".join(text.split()[:2])
    return next((kind for kind in _KINDS if words == kind or words.startswith(kind + " ")
                 or words.startswith(kind + ";") or words.startswith(kind + "(")), "OTHER")


_ACTIVITY = ("SELECT pid, state, query, wait_event_type, wait_event, "
             "extract(epoch FROM now() - coalesce(query_start, now()))::float AS running_s "
             "FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
             f"AND application_name <> '{HARNESS_APPLICATION}' "
             "AND state IS NOT NULL AND state <> 'idle'")


def postgres_statements(connection: Any) -> list[dict[str, Any]] | None:
    """The statements PostgreSQL runs, or holds a transaction open after, for the other sessions, read on
    ``connection`` (an autocommit psycopg connection, straight to the server): each with its ``state``
    (``active``: running now; ``idle in transaction``: its last statement done, the transaction open), ``kind``, the
    statement's first 200 characters and how long it has run. None when the server does not answer."""
    import psycopg

    try:
        rows = connection.execute(_ACTIVITY).fetchall()
    except psycopg.Error:
        return None
    return [{"pid": pid, "state": state, "kind": statement_kind(query), "statement": (query or "")[:200],
             "wait": f"{wait_type}:{wait}" if wait_type else None, "running_s": round(running or 0.0, 3)}
            for pid, state, query, wait_type, wait, running in rows]
