"""A PostgreSQL that goes down under a running gunicorn: 503s, warnings, and service again.

The server here is a throwaway cluster of this test's own (initdb into a temporary
directory, on a port of its own), never the shared one the other tests use: it is
stopped in the middle of the test, as a restart or a failover would, then started
again. Gunicorn serves Baton on it as in production (DEBUG off, JSON log lines).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ports import free_port

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)), None)
# Every wait below ends; these bound it (seconds).
START_TIMEOUT = 60
COMMAND_TIMEOUT = 180


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class Postgres:
    """A PostgreSQL cluster of the test's own, run as a user that is not root."""

    directory: Path
    port: int
    user: str | None  # the OS user to run it as, when the tests run as root

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/baton"

    def _run(self, *command: str) -> None:
        if self.user:
            command = ("runuser", "-u", self.user, "--", *command)
        subprocess.run(command, check=True, capture_output=True, timeout=COMMAND_TIMEOUT)

    def init(self) -> None:
        self._run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.directory / "data"),
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.directory / "data"),
            "-l",
            str(self.directory / "postgres.log"),
            "-o",
            options,
            "-w",
            "-t",
            str(START_TIMEOUT),
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.directory / "data"),
            "-m",
            mode,
            "-w",
            "-t",
            str(START_TIMEOUT),
            "stop",
        )


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    if PG_BIN is None:
        pytest.fail("This test needs PostgreSQL's server programs (initdb, pg_ctl).")
    user = "postgres" if os.geteuid() == 0 else None
    directory = Path(tempfile.mkdtemp(prefix="baton-outage-"))
    if user:
        entry = pwd.getpwnam(user)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    server = Postgres(directory=directory, port=free_port(), user=user)
    server.init()
    server.start()
    try:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=server.port, user="postgres", dbname="postgres", autocommit=True
        ) as admin:
            admin.execute("CREATE DATABASE baton")
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            server.stop("immediate")
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Site:
    port: int
    log: Path
    token: str
    session: str

    def get(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read().decode()
        finally:
            connection.close()

    def api(self) -> tuple[int, dict[str, str], str]:
        return self.get("/api/v1/workflows", {"Authorization": f"Bearer {self.token}"})

    def inbox(self) -> tuple[int, dict[str, str], str]:
        return self.get("/", {"Cookie": f"sessionid={self.session}"})


SETUP = """
from django.contrib.auth.models import User
from django.test import Client
from workflows.tokens import issue_token

alice = User.objects.create_user("alice", password="not-used-here")
_, secret = issue_token(user=alice)
client = Client()
client.force_login(alice)
print("credentials", secret, client.cookies["sessionid"].value)
"""


@pytest.fixture(scope="module")
def site(postgres, tmp_path_factory) -> Iterator[Site]:
    """gunicorn serving Baton on the throwaway cluster, with alice's token and session."""
    env = {
        **os.environ,
        "DATABASE_URL": postgres.url,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "database-outage-test-only",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_SESSION_COOKIE_SECURE": "false",
        "BATON_LOG_FORMAT": "json",
    }
    manage = [str(BIN / "python"), "manage.py"]
    run = {"cwd": ROOT, "env": env, "check": True, "timeout": COMMAND_TIMEOUT}
    subprocess.run([*manage, "migrate", "--noinput"], capture_output=True, **run)
    made = subprocess.run([*manage, "shell", "-c", SETUP], capture_output=True, text=True, **run)
    [credentials] = [line for line in made.stdout.splitlines() if line.startswith("credentials ")]
    _, token, session = credentials.split()

    port = free_port()
    log = tmp_path_factory.mktemp("outage") / "gunicorn.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(BIN / "gunicorn"), "config.wsgi:application", "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        server = Site(port=port, log=log, token=token, session=session)

        def answering() -> bool:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited:\n{log.read_text()[-3000:]}")
            try:
                return server.get("/healthz", {})[0] == 200
            except OSError:
                return False

        wait_until(answering, timeout=START_TIMEOUT, what="gunicorn to answer")
        yield server
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def log_lines(log: Path, since: int) -> list[dict]:
    lines = log.read_text()[since:].splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


class TestADatabaseRestart:
    def test_requests_get_503_while_it_is_down_and_are_served_again_once_it_is_up(
        self, postgres, site
    ):
        assert site.api()[0] == 200
        assert site.inbox()[0] == 200
        logged_before = len(site.log.read_text())

        postgres.stop()
        try:
            # Twice each: the first meets the connection the server closed, the next
            # a server that refuses to connect.
            api = [site.api() for _ in range(2)]
            pages = [site.inbox() for _ in range(2)]
        finally:
            postgres.start()
        wait_until(lambda: site.api()[0] == 200, timeout=START_TIMEOUT, what="the API again")

        for status, headers, body in api:
            assert status == 503
            assert headers["Content-Type"] == "application/problem+json"
            assert headers["Retry-After"] == "5"
            assert json.loads(body)["title"] == "Service unavailable"
        for status, headers, body in pages:
            assert status == 503
            assert headers["Retry-After"] == "5"
            assert "Baton is briefly unavailable" in body
        assert site.inbox()[0] == 200
        lines = log_lines(site.log, logged_before)
        warnings = [line for line in lines if line["message"] == "database.unavailable"]
        assert len(warnings) == 4
        assert {line["levelname"] for line in warnings} == {"WARNING"}
        assert [line for line in lines if line["levelname"] in {"ERROR", "CRITICAL"}] == []
        assert not any("exc_info" in line for line in lines)
        assert "Traceback" not in site.log.read_text()[logged_before:]
