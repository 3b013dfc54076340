"""A private PostgreSQL server: ``initdb`` into a folder of the run, loopback only.

``max_prepared_transactions`` is on (the two-phase-commit sink needs
``PREPARE TRANSACTION``). ``fsync`` is off because the faults here kill
processes, not the machine: the OS page cache survives a SIGKILL of the
server, so committed and prepared transactions do too. PostgreSQL refuses to
run as root, so when streamcert runs as root the server runs as the
``postgres`` user that Debian's package creates.

The server asks for a password (``scram-sha-256``, also on loopback): each
server gets its own random one at ``initdb``. Clients find it in a libpq
*password file* (0600, the client's user) that the DSN names with
``passfile=``, so the DSN itself, and every result, report and log that
quotes it, holds no secret.
"""

from __future__ import annotations

import os
import pwd
import secrets
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from streamcert.harness.errors import ConfigurationError, PrerequisiteMissing, StartupFailed
from streamcert.harness.stack.diagnosis import with_diagnosis
from streamcert.harness.stack.install import ensure_postgres
from streamcert.harness.stack.ports import LOOPBACK, ensure_port_free, free_port
from streamcert.harness.stack.process import ManagedProcess, ProcessBacked, token_env
from streamcert.harness.stack.readiness import postgres_readiness

__all__ = ["render_postgresql_conf", "postgres_dsn", "LocalPostgres", "HARNESS_APPLICATION"]

#: The ``application_name`` of the harness's own sessions (the output's observer, the faults' look at the server's
#: activity): told apart from the connector's in ``pg_stat_activity``.
HARNESS_APPLICATION = "streamcert-harness"

SUPERUSER = "streamcert"
DATABASE = "streamcert"


def render_postgresql_conf(port: int, max_prepared_transactions: int = 64) -> str:
    """Settings appended to the ``postgresql.conf`` that ``initdb`` wrote (later lines win)."""
    return (
        "\n# streamcert\n"
        f"listen_addresses = '{LOOPBACK}'\n"
        f"port = {port}\n"
        "unix_socket_directories = ''\n"
        f"max_prepared_transactions = {max_prepared_transactions}\n"
        "max_connections = 200\n"
        "shared_buffers = 64MB\n"
        "fsync = off\n"
        "full_page_writes = off\n"
        "synchronous_commit = on\n"
        # the observer orders the transactions it finds in one poll by their commit time
        "track_commit_timestamp = on\n"
        "log_min_messages = warning\n"
        "log_line_prefix = '%m [%p] '\n"
    )


def postgres_dsn(host: str, port: int, dbname: str = DATABASE, user: str = SUPERUSER,
                 passfile: Path | None = None) -> str:
    """A libpq DSN; ``passfile`` names the password file to read the password from."""
    dsn = f"host={host} port={port} dbname={dbname} user={user} connect_timeout=5"
    return dsn + (f" passfile={passfile}" if passfile is not None else "")


#: Seconds a killed server's children may take to be gone (SIGKILLed, they go at once unless the machine stalls).
_CHILDREN_GONE_S = 10.0


@dataclass
class LocalPostgres(ProcessBacked):
    """One PostgreSQL server process. ``stop`` is a fast shutdown (SIGINT); prepared transactions survive it."""

    workdir: Path
    port: int = field(default_factory=free_port)
    max_prepared_transactions: int = 64
    run_token: str = ""
    start_timeout: float = 60.0
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)
    _password: str = field(default_factory=lambda: secrets.token_urlsafe(24), init=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def dsn(self) -> str:
        """DSN straight to the server (bypasses Toxiproxy; for admin and recovery checks)."""
        return postgres_dsn(LOOPBACK, self.port, passfile=self.passfile)

    @property
    def passfile(self) -> Path:
        """The clients' password file (any host and port: the proxy's links lead to this server too)."""
        return self.workdir / "client.pgpass"

    @property
    def log_file(self) -> Path:
        return self.workdir / "postgres.log"

    def start(self) -> None:
        if self._process is not None and self._process.is_running():
            return
        bindir = ensure_postgres()
        user = _server_user()
        ensure_port_free(self.port, "PostgreSQL")
        self.workdir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workdir, 0o700)  # the data, the log and the clients' password file: the server's user only
        if user:
            _give_to(user, self.workdir)
        env = token_env(self.run_token, dict(os.environ, LC_ALL="C"))
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(bindir, user, env)
            self._write_passfile()
        self._process = ManagedProcess(
            "PostgreSQL", [str(bindir / "postgres"), "-D", str(self.data_dir)], self.log_file,
            env=env, user=user, stop_signal=signal.SIGINT,
        )
        self._process.start()
        # The `postgres` database exists from initdb on; ours is created once the server answers.
        self._process.wait_ready(postgres_readiness(self._admin_dsn, hint=f"Look at {self.log_file}."),
                                 self.start_timeout)
        self._ensure_database()

    def kill(self) -> None:
        """SIGKILL the server and every process it forked: a crash. PostgreSQL's children leave the postmaster's
        process group (each calls ``setsid()``), so killing the group alone leaves its backends and helpers to
        notice the death by themselves, holding the shared memory a restart needs ("pre-existing shared memory
        block is still in use"); they are killed here too, and waited for."""
        import psutil

        children = []
        if self._process is not None and self._process.is_running():
            try:
                children = psutil.Process(self._process.pid).children(recursive=True)
            except psutil.Error:  # it ended while we looked
                children = []
        super().kill()
        for child in children:
            try:
                child.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(children, timeout=_CHILDREN_GONE_S)

    @property
    def _admin_dsn(self) -> str:
        return postgres_dsn(LOOPBACK, self.port, dbname="postgres", passfile=self.passfile)

    def _initdb(self, bindir: Path, user: str | None, env: dict[str, str]) -> None:
        pwfile = self.workdir / "initdb.pw"  # read by initdb as the server's user, gone right after
        pwfile.write_text(self._password + "\n")
        os.chmod(pwfile, 0o600)
        if user:
            entry = pwd.getpwnam(user)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        try:
            result = subprocess.run(
                [str(bindir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=scram-sha-256",
                 f"--pwfile={pwfile}", "-E", "UTF8", "--no-locale", "--no-sync"],
                capture_output=True, text=True, env=env, user=user, timeout=120,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            error = StartupFailed(f"initdb into {self.data_dir} failed (exit code {result.returncode}).",
                                  hint="Check that the folder is empty and writable by the server user.",
                                  details=(result.stdout + result.stderr)[-3000:])
            raise with_diagnosis(error, folder=self.workdir)
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write(render_postgresql_conf(self.port, self.max_prepared_transactions))

    def _write_passfile(self) -> None:
        """``host:port:database:user:password``; libpq ignores a file others may read, hence 0600 from the start."""
        handle = os.open(self.passfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(handle, "w") as out:
            out.write(f"*:*:*:{SUPERUSER}:{self._password}\n")

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self._admin_dsn, autocommit=True) as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (DATABASE,)).fetchone()
            if not exists:
                conn.execute(f"create database {DATABASE}")


def _server_user() -> str | None:
    """The account the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PrerequisiteMissing(
            "PostgreSQL refuses to run as root and there is no `postgres` user to run it as.",
            hint="Create one (`useradd --system postgres`) or run streamcert as an ordinary user.",
        ) from None
    return "postgres"


def _give_to(user: str, folder: Path) -> None:
    entry = pwd.getpwnam(user)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    for parent in folder.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise ConfigurationError(
                f"The PostgreSQL folder {folder} is inside {parent}, which the `{user}` user cannot enter.",
                hint="Use a work folder under /tmp (the default) or one every user can traverse.",
            )
