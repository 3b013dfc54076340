"""A tiny commit-log server: a kind of external system streamcert does not ship, started by a test's own
:class:`~streamcert.spi.external.ExternalSystem` (``python -m tests.external_system.ledger_server PORT DATA``).

One JSON request per line over TCP, one JSON answer per line:

- ``{"op": "commit", "table": T, "txn": ID, "records": [[key_b64, value_b64], ...]}``: appends the records to table
  ``T`` as one commit, once per ``txn`` (a second commit of the same id is acknowledged and ignored: the idempotence
  a sink builds on);
- ``{"op": "scan", "table": T, "from": N}``: the records of ``T`` at positions >= N, each
  ``[position, commit, key_b64, value_b64]``;
- ``{"op": "count", "table": T}``: how many records and commits ``T`` has;
- ``{"op": "stage", "table": T, "records": [...]}``: takes the records and never makes them visible (what a writer
  that failed before its commit leaves: a source must not read it).

Each commit is one line of ``DATA`` (flushed and fsynced before the answer), read back when the server starts.
"""

from __future__ import annotations

import json
import os
import socketserver
import sys
import threading

_lock = threading.Lock()
_tables: dict[str, list[list]] = {}
_commits: dict[str, int] = {}
_txns: set[tuple[str, str]] = set()
_staged: dict[str, int] = {}


def _load(path: str) -> None:
    if not os.path.exists(path):
        return
    with open(path) as data:
        for line in data:
            try:
                commit = json.loads(line)
            except ValueError:  # a commit cut by a kill was never acknowledged
                break
            _apply(commit)


def _apply(commit: dict) -> None:
    table = commit["table"]
    _txns.add((table, commit["txn"]))
    records = _tables.setdefault(table, [])
    number = _commits.get(table, 0)
    for key, value in commit["records"]:
        records.append([len(records), number, key, value])
    _commits[table] = number + 1


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            request = json.loads(line)
            answer = _answer(request, self.server.data_path)
            self.wfile.write((json.dumps(answer) + "\n").encode())
            self.wfile.flush()


def _answer(request: dict, data_path: str) -> dict:
    op, table = request.get("op"), str(request.get("table"))
    with _lock:
        if op == "commit":
            if (table, request["txn"]) in _txns:
                return {"ok": True, "duplicate": True}
            commit = {"table": table, "txn": request["txn"], "records": request["records"]}
            with open(data_path, "a") as data:
                data.write(json.dumps(commit) + "\n")
                data.flush()
                os.fsync(data.fileno())
            _apply(commit)
            return {"ok": True}
        if op == "stage":
            _staged[table] = _staged.get(table, 0) + len(request["records"])
            return {"ok": True, "staged": _staged[table]}
        if op == "scan":
            return {"records": _tables.get(table, [])[int(request.get("from", 0)):]}
        if op == "count":
            return {"records": len(_tables.get(table, [])), "commits": _commits.get(table, 0),
                    "staged": _staged.get(table, 0)}
    return {"error": f"unknown op {op!r}"}


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main(port: int, data_path: str) -> None:
    _load(data_path)
    server = _Server(("127.0.0.1", port), _Handler)
    server.data_path = data_path
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
