"""A connector to a kind of system streamcert does not ship, declared entirely outside the package: the commit-log
server of :mod:`tests.external_system.ledger_server`, its :class:`~streamcert.spi.external.ExternalSystem` (a local
process behind a Toxiproxy link, read back by commit, loaded by its writer), two sinks that write it with
``foreachBatch``: ``SINK`` commits each batch under an id made of the run and the batch (a replayed batch is ignored:
exactly-once), ``AT_LEAST_ONCE_SINK`` under a fresh id each time (a replay is written again); and ``SOURCE``, a
Python data source that reads a table by position through the link (its offsets in Spark's checkpoint)."""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from streamcert.spi import ConfigurationError, QueryContext, SinkConnector, SourceConnector
from streamcert.spi.external import (Endpoint, ExternalSystem, InputWriter, Leftovers, OutputReader,
                                     VisibleRecord)

_ALL = {f"SNK-{n}" for n in range(1, 9)} | {f"GEN-{n}" for n in range(1, 4)}
_ALL_SRC = {f"SRC-{n}" for n in range(1, 12)} | {f"GEN-{n}" for n in range(1, 4)}


def request(address: str, payload: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """One request to the server at ``host:port`` and its answer."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall((json.dumps(payload) + "\n").encode())
        answer = connection.makefile("rb").readline()
    if not answer:
        raise ConnectionError(f"the ledger server at {address} closed the connection without answering")
    return json.loads(answer)


class LedgerReader(OutputReader):
    """Reads table ``name`` by position; records of one commit share its order."""

    idle_s = 0.1

    def __init__(self, name: str, address: str) -> None:
        self.name, self.address, self._next = name, address, 0

    def read_new(self) -> list[VisibleRecord]:
        rows = request(self.address, {"op": "scan", "table": self.name, "from": self._next})["records"]
        self._next += len(rows)
        return [VisibleRecord(base64.b64decode(value), base64.b64decode(key), commit,
                              {"ledger_position": position, "commit": commit})
                for position, commit, key, value in rows]

    def visible_mark(self) -> int:
        return request(self.address, {"op": "count", "table": self.name})["records"]

    def leftovers(self) -> Leftovers:
        # a commit is one request: the server holds nothing a failed writer could leave half done
        return Leftovers(found=(), counts=request(self.address, {"op": "count", "table": self.name}))

    def transient(self, error: Exception) -> bool:
        return isinstance(error, OSError)


class LedgerWriter(InputWriter):
    """Writes table ``name``: a committed write is one commit; an uncommitted one is staged, never visible."""

    writes_uncommitted = True

    def __init__(self, name: str, address: str) -> None:
        self.name, self.address = name, address

    def write(self, records, commit: bool = True) -> None:
        rows = [[_b64(r.key), _b64(r.value)] for r in records]
        payload = ({"op": "commit", "table": self.name, "txn": uuid.uuid4().hex, "records": rows} if commit
                   else {"op": "stage", "table": self.name, "records": rows})
        if not request(self.address, payload, timeout=60).get("ok"):
            raise RuntimeError(f"the ledger refused a write to {self.name}")


class LedgerSystem(ExternalSystem):
    """The ledger server as a local process: killed and restarted on the same port and data."""

    name = "test-ledger"
    endpoint_names = ("ledger",)

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._port = 0
        self._folder: Path | None = None

    def start(self, workdir: str) -> None:
        self._folder = Path(workdir)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self._port = probe.getsockname()[1]
        self._spawn()

    def _spawn(self) -> None:
        assert self._folder is not None
        log = open(self._folder / "server.log", "ab")
        self._process = subprocess.Popen([sys.executable, "-m", "tests.external_system.ledger_server",
                                          str(self._port), str(self._folder / "ledger.jsonl")], stdout=log,
                                         stderr=subprocess.STDOUT, cwd=str(Path(__file__).resolve().parents[2]))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                request(f"127.0.0.1:{self._port}", {"op": "count", "table": "-"}, timeout=1)
                return
            except OSError:
                if self._process.poll() is not None:
                    break
                time.sleep(0.05)
        raise ConfigurationError(f"The ledger server did not answer on port {self._port}.",
                                 hint=f"Look at {self._folder / 'server.log'}.")

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None

    def endpoints(self) -> dict[str, Endpoint]:
        return {"ledger": Endpoint("127.0.0.1", self._port)}

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        return f"{stem}-{run_id}"

    def input_name(self, stem: str, run_id: str, workdir: str) -> str:
        return f"{stem}-in-{run_id}"

    def reader(self, name: str, endpoints: dict[str, str]) -> LedgerReader:
        return LedgerReader(name, endpoints["ledger"])

    def writer(self, name: str, endpoints: dict[str, str]) -> LedgerWriter:
        return LedgerWriter(name, endpoints["ledger"])

    def pause(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(10)
            self._process = None

    def restart(self) -> None:
        self.kill()
        self._spawn()


SYSTEM = LedgerSystem()


class LedgerSink(SinkConnector):
    """Writes each micro-batch as one commit of the ledger table ``context.output``, from the driver."""

    name = "test-ledger-sink"
    output_system = SYSTEM
    claims = frozenset({"SNK-1", "SNK-7"})
    unclaimed = {req: "the tests certify SNK-1 and plan SNK-7 only" for req in sorted(_ALL - {"SNK-1", "SNK-7"})}
    #: whether a replayed batch keeps its commit id (the exactly-once one) or gets a new one
    idempotent = True

    def write(self, frame: Any, context: QueryContext) -> Any:
        address, table, run_id, idempotent = context.endpoint("ledger"), context.output, context.run_id, self.idempotent

        def commit(batch: Any, batch_id: int) -> None:
            rows = [[_b64(row["key"]), _b64(row["value"])] for row in batch.select("key", "value").collect()]
            txn = f"{run_id}-{batch_id}" if idempotent else uuid.uuid4().hex
            answer = request(address, {"op": "commit", "table": table, "txn": txn, "records": rows}, timeout=60)
            if not answer.get("ok"):
                raise RuntimeError(f"the ledger refused batch {batch_id}: {answer}")

        return frame.writeStream.foreachBatch(commit).option("checkpointLocation", context.checkpoint)


def _b64(data: Any) -> str:
    return base64.b64encode(bytes(data or b"")).decode()


class AtLeastOnceLedgerSink(LedgerSink):
    name = "test-ledger-sink-at-least-once"
    idempotent = False


SINK = LedgerSink()
AT_LEAST_ONCE_SINK = AtLeastOnceLedgerSink()

#: How long the source keeps asking a server that does not answer (killed, paused, cut off) before the query fails.
_RETRY_S = 90.0


def _patient_request(address: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A request retried while the server is away: the source rides out a fault instead of failing the query."""
    deadline = time.monotonic() + _RETRY_S
    while True:
        try:
            return request(address, payload, timeout=10)
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _ledger_datasource() -> type:
    """The Python data source class (made here: pyspark is imported only in the query's driver)."""
    from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    class LedgerStreamReader(SimpleDataSourceStreamReader):
        """Runs in the driver's Python data source runner: offsets are positions of the table, kept by Spark's
        checkpoint; a replayed batch reads the same positions again."""

        def __init__(self, options: dict[str, str]) -> None:
            self.address, self.table = options["address"], options["table"]
            self.limit = int(options.get("maxRecordsPerBatch", "100"))
            self.skips_on_error = options.get("skipsOnError") == "true"

        def initialOffset(self) -> dict:
            return {"position": 0}

        def read(self, start: dict):
            scan = {"op": "scan", "table": self.table, "from": start["position"]}
            if self.skips_on_error:  # the planted bug: a server that does not answer costs a batch's records
                try:
                    rows = request(self.address, scan, timeout=2)["records"][:self.limit]
                except (OSError, ValueError):
                    return iter([]), {"position": start["position"] + self.limit}
            else:
                rows = _patient_request(self.address, scan)["records"][:self.limit]
            return iter(_rows(rows)), {"position": start["position"] + len(rows)}

        def readBetweenOffsets(self, start: dict, end: dict):
            rows = _patient_request(self.address, {"op": "scan", "table": self.table, "from": start["position"]})
            return iter(_rows(rows["records"][:end["position"] - start["position"]]))

        def commit(self, end: dict) -> None:
            pass

    class LedgerDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "test_ledger"

        def schema(self):
            return StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                               StructField("offset", LongType())])

        def simpleStreamReader(self, schema):
            return LedgerStreamReader(self.options)

    return LedgerDataSource


def _rows(rows: list) -> list[tuple]:
    return [(base64.b64decode(key), base64.b64decode(value), position) for position, _commit, key, value in rows]


class LedgerSource(SourceConnector):
    """``test-ledger-source``: reads table ``context.input_topic`` by position through the ledger's link, at most
    ``max_records_per_batch`` records a batch, retrying a server that is away for up to 90 s."""

    name = "test-ledger-source"
    input_system = SYSTEM
    claims = frozenset({"SRC-8"})
    unclaimed = {req: "the tests certify SRC-8 only" for req in sorted(_ALL_SRC - {"SRC-8"})}
    #: the planted bug of :data:`SKIPPING_SOURCE`: a read the server does not answer in 2 s skips a batch's worth
    skips_on_error = False

    def read(self, spark: Any, context: QueryContext) -> Any:
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the data source runner imports no tests
        source = _ledger_datasource()
        spark.dataSource.register(source)
        return (spark.readStream.format(source.name()).option("address", context.endpoint("ledger"))
                .option("table", context.input_topic)
                .option("maxRecordsPerBatch", str(context.option("max_records_per_batch", 100)))
                .option("skipsOnError", str(self.skips_on_error).lower())
                .options(**context.connector_options).load())


class SkippingLedgerSource(LedgerSource):
    name = "test-ledger-source-skipping"
    skips_on_error = True


SOURCE = LedgerSource()
SKIPPING_SOURCE = SkippingLedgerSource()
