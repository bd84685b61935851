"""PgBouncer in transaction mode, started by the tests on a port of its own.

Debian's `pgbouncer` (`make test` installs it when missing), with a generated ini
and user list (auth_type trust), in front of the tests' PostgreSQL server. It
hands each transaction whichever server connection is free, as in production:
the tests that go through it prove that nothing Baton does outlives a
transaction. The fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.ports import free_port


class PgBouncer:
    """A PgBouncer process in front of `host`:`port`, listening on 127.0.0.1:`self.port`."""

    def __init__(self, *, host: str, port: int, pool_size: int = 4) -> None:
        binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
        if binary is None:
            raise RuntimeError(
                "pgbouncer is not installed: `make test` installs Debian's "
                "(apt-get install -y pgbouncer), or install it first."
            )
        # Its own folder, readable by the postgres user it runs as when started as root.
        self.folder = Path(tempfile.mkdtemp(prefix="baton-pgbouncer-"))
        self.port = free_port()
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder / 'userlist.txt'}\n"
            "pool_mode = transaction\n"
            # Few server connections for many clients: transactions of different
            # clients share them, as under load in production.
            f"default_pool_size = {pool_size}\n"
            "max_client_conn = 500\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
        )
        (self.folder / "userlist.txt").write_text('"postgres" ""\n')
        argv = [binary, str(ini)]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            for path in (self.folder, *self.folder.iterdir()):
                shutil.chown(path, "postgres", "postgres")
            argv = [binary, "-u", "postgres", str(ini)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not start: {self.log()}")
            time.sleep(0.05)

    def database(self, settings_dict: dict[str, Any]) -> dict[str, Any]:
        """Return `settings_dict` (Django's) reaching the same database through PgBouncer."""
        from config.settings import database

        url = f"postgres://{settings_dict['USER']}@127.0.0.1:{self.port}/{settings_dict['NAME']}"
        return {**settings_dict, **database(url, pooler="pgbouncer"), "TEST": settings_dict["TEST"]}

    def url(self, name: str, user: str = "postgres") -> str:
        return f"postgres://{user}@127.0.0.1:{self.port}/{name}"

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text()[-3000:] if path.exists() else "(no log)"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True
