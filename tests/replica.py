"""A PostgreSQL primary and its streaming replica, started by the tests on ports of their own.

The shared server allows no replication (its pg_hba.conf has no line for it, and
it is not the tests' to reconfigure), so the tests make a pair of their own in a
temporary folder: `initdb` a primary (wal_level=replica, trust on loopback, a
replication line), create Baton's database on it and migrate it, then
`pg_basebackup -R` a hot standby from it, which streams the primary's WAL. Both
run as the postgres user when the tests run as root (PostgreSQL refuses root).
The fixtures are in tests/conftest.py; every wait is bounded and scaled by
BATON_TEST_SLOWDOWN.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.e2e.conftest import scaled
from tests.ports import free_port

BIN = Path(os.environ.get("BATON_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
ROOT = Path(__file__).resolve().parents[1]
DATABASE = "baton"
# Seconds for a server to start or stop, and for migrate (times the slowdown).
START = 60
MIGRATE = 300


class Server:
    """One PostgreSQL server whose data is in `data`, listening on 127.0.0.1:`port`."""

    def __init__(self, data: Path, port: int) -> None:
        self.data = data
        self.port = port

    def start(self) -> None:
        _run(
            "pg_ctl", "start", "-D", self.data, "-l", self.data.parent / f"{self.data.name}.log",
            "-o", f"-p {self.port}", "-w", "-t", str(int(scaled(START))),
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server if it runs (fast: its clients are disconnected)."""
        if (self.data / "postmaster.pid").exists():
            _run(
                "pg_ctl", "stop", "-D", self.data, "-m", "fast", "-w", "-t", str(int(scaled(START)))
            )

    def sql(self, statement: str, database: str = DATABASE) -> Any:
        """Run `statement` in autocommit and return the first column of its first row."""
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as db:
            cursor = db.execute(statement)  # type: ignore[arg-type]
            row = cursor.fetchone() if cursor.description else None
        return row[0] if row else None

    def url(self, database: str = DATABASE) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        path = self.data.parent / f"{self.data.name}.log"
        return path.read_text()[-3000:] if path.exists() else "(no log)"


class ReplicaPair:
    """A primary holding Baton's migrated database, and a hot standby streaming from it."""

    def __init__(self) -> None:
        # A folder the postgres user owns, holding both data directories and their sockets.
        self.folder = Path(tempfile.mkdtemp(prefix="baton-replica-"))
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self.primary = Server(self.folder / "primary", free_port())
        self.replica = Server(self.folder / "replica", free_port())
        try:
            self._start_primary()
            self._migrate()
            self._start_replica()
        except BaseException:
            self.stop()
            raise

    def _start_primary(self) -> None:
        _run("initdb", "-D", self.primary.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-sync")  # fmt: skip
        with (self.primary.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.folder}'\n"
                "wal_level = replica\n"
                "max_wal_senders = 4\n"
                # The replica (which copies this file) reconnects at once after a restart.
                "wal_retrieve_retry_interval = '100ms'\n"
                "shared_buffers = 32MB\n"
                "max_connections = 40\n"
                # A throwaway server: durability buys nothing here, speed does. Commits
                # stay synchronous (cheap without fsync): a commit has then reached the
                # WAL position `wait_for_replay` reads, which it may not have yet with
                # synchronous_commit off, and the replica could pause before replaying it.
                "fsync = off\n"
                "full_page_writes = off\n"
            )
        with (self.primary.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self.primary.start()
        self.primary.sql(f"CREATE DATABASE {DATABASE}", database="postgres")

    def _migrate(self) -> None:
        """Migrate the primary's database as `manage.py migrate` does a real one."""
        env = {**os.environ, "DATABASE_URL": self.primary.url(), "BATON_DB_POOLER": ""}
        env.pop("DATABASE_REPLICA_URL", None)
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(MIGRATE),
        )
        if result.returncode:
            raise RuntimeError(f"migrate failed on the test primary: {result.stderr[-3000:]}")

    def _start_replica(self) -> None:
        _run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
            "-D", self.replica.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync",
        )  # fmt: skip
        self.replica.start()
        wait_until(
            lambda: self.replica.sql("SELECT status FROM pg_stat_wal_receiver") == "streaming",
            timeout=START,
            what="the replica to stream from the primary",
        )

    def caught_up(self) -> bool:
        """Say whether the replica has replayed all that the primary wrote until now."""
        written = self.primary.sql("SELECT pg_current_wal_lsn()")
        return bool(self.replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{written}'::pg_lsn"))

    def wait_for_replay(self) -> None:
        """Wait until the replica shows all that the primary committed so far."""
        written = self.primary.sql("SELECT pg_current_wal_lsn()")
        wait_until(
            lambda: self.replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{written}'::pg_lsn"),
            timeout=30,
            what="the replica to replay the primary's writes",
        )

    def pause_replay(self) -> None:
        """Stop the replica replaying the WAL it receives: it lags from now on.

        It first replays all the primary has written: paused between a transaction's
        lock and its commit (the previous test's flush TRUNCATEs every table), the
        replica would hold that ACCESS EXCLUSIVE lock, and every query of the lagging
        page would wait on it until the test timed out (seen on a loaded machine)."""
        self.wait_for_replay()
        self.replica.sql("SELECT pg_wal_replay_pause()")
        wait_until(
            lambda: self.replica.sql("SELECT pg_get_wal_replay_pause_state()") == "paused",
            timeout=30,
            what="the replica's replay to pause",
        )

    def resume_replay(self) -> None:
        self.replica.sql("SELECT pg_wal_replay_resume()")

    def stop(self) -> None:
        for server in (self.replica, self.primary):
            # The folder goes anyway: a server left running stops without its data directory.
            with contextlib.suppress(subprocess.SubprocessError, OSError, RuntimeError):
                server.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def wait_until(condition: Callable[[], object], *, timeout: float, what: str) -> None:
    """Wait until `condition()` is true, for at most `timeout` seconds (scaled); a server
    not yet accepting connections counts as not yet."""
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except psycopg.OperationalError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {scaled(timeout):g}s waiting for {what}")


def _run(program: str, *args: object) -> None:
    """Run one of PostgreSQL's programs, as the postgres user when root; fail with its output."""
    result = subprocess.run(
        [str(BIN / program), *map(str, args)],
        user="postgres" if os.geteuid() == 0 else None,
        cwd=tempfile.gettempdir(),  # a folder the postgres user may enter
        capture_output=True,
        text=True,
        timeout=scaled(START) + 10,
    )
    if result.returncode:
        raise RuntimeError(f"{program} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
