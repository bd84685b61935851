"""Lockouts through real gunicorn behind a trusted proxy: one client's bad tokens lock
nobody else out, and a client that bypasses the proxy cannot pass for another.

The test process plays the proxy, as Caddy in docker-compose.yml does: it connects
from 127.0.0.1 (named in BATON_TRUSTED_PROXIES) and appends the address of the
client it relays to X-Forwarded-For. A client reaching gunicorn directly connects
from 127.0.0.2. The default limit applies: five failures lock.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
import requests
from axes.models import AccessAttempt
from django.conf import settings
from django.utils import timezone

from approvals.notify import links
from tests.e2e.test_gunicorn_limits import BIN, ROOT, free_port
from workflows.models import WorkflowRun
from workflows.tokens import issue_token

pytestmark = pytest.mark.e2e

PROXY = "127.0.0.1"
OUTSIDER = "127.0.0.2"  # reaches gunicorn without the proxy
CLIENT_A = "203.0.113.66"  # sends bad tokens
CLIENT_B = "198.51.100.7"  # everyone else
GARBAGE = "baton_000000000000_not-a-token"


@pytest.fixture
def fast_password_hashing() -> None:
    """Keep the real hasher: gunicorn checks the passwords these tests set."""


@pytest.fixture
def server(transactional_db, tmp_path) -> Iterator[str]:
    """gunicorn on the test database, trusting the proxy at 127.0.0.1."""
    port = free_port()
    database = settings.DATABASES["default"]
    log = tmp_path / "gunicorn.log"
    env = {
        **os.environ,
        "DJANGO_DEBUG": "false",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        "BATON_TRUSTED_PROXIES": PROXY,
        "BATON_LOCKOUT_FAILURES": "5",
    }
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
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
                break
            except (requests.ConnectionError, requests.Timeout):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def relayed(client: str) -> requests.Session:
    """A client's browser or script, whose requests the proxy relays, appending its address."""
    session = requests.Session()
    session.headers["X-Forwarded-For"] = client
    return session


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def sign_in(session: requests.Session, server: str, username: str) -> requests.Response:
    page = session.get(f"{server}/accounts/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    return session.post(
        f"{server}/accounts/login/",
        {"username": username, "password": "baton-demo", "csrfmiddlewaretoken": csrf},
        headers={"Referer": f"{server}/accounts/login/"},
        allow_redirects=False,
    )


def direct_token_call(server: str, secret: str, *, forwarded_for: str) -> int:
    """Call the API from OUTSIDER, straight to gunicorn, with a forged X-Forwarded-For."""
    host, port = server.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(
        host, int(port), timeout=30, source_address=(OUTSIDER, 0)
    )
    connection.request(
        "GET",
        "/api/v1/workflows",
        headers={**bearer(secret), "X-Forwarded-For": forwarded_for, "Host": host},
    )
    status = connection.getresponse().status
    connection.close()
    return status


class TestBadTokensFromOneClient:
    def test_lock_out_only_that_clients_bad_tokens(self, server, people, employees, manager_task):
        bobs = issue_token(user=people["bob"])[1]
        attacker = relayed(CLIENT_A)

        statuses = [
            attacker.get(f"{server}/api/v1/workflows", headers=bearer(GARBAGE)).status_code
            for _ in range(6)
        ]

        assert statuses == [401] * 4 + [429] * 2
        everyone = relayed(CLIENT_B)
        assert everyone.get(f"{server}/api/v1/workflows", headers=bearer(bobs)).status_code == 200
        started = everyone.post(
            f"{server}/api/v1/workflows",
            json={
                "type": "expense",
                "input": {"title": "Taxi", "amount": "30.00", "currency": "EUR"},
            },
            headers=bearer(bobs),
        )
        assert started.status_code == 201, started.text
        assert WorkflowRun.objects.filter(pk=started.json()["id"]).exists()

    def test_do_not_stop_carols_sign_in_or_her_email_link_confirmation(
        self, server, people, manager_task
    ):
        attacker = relayed(CLIENT_A)
        for _ in range(6):
            attacker.get(f"{server}/api/v1/workflows", headers=bearer(GARBAGE))
        _, token = links.create_link(
            task=manager_task, recipient=people["carol"], now=timezone.now()
        )

        carol = relayed(CLIENT_B)
        assert sign_in(carol, server, "carol").status_code == 302
        page = carol.get(f"{server}/email/{token}/")
        assert page.status_code == 200
        confirm = re.search(r'name="confirm" value="([^"]+)"', page.text)[1]

        decided = carol.post(
            f"{server}/email/{token}/",
            {"confirm": confirm, "outcome": "approved", "comment": "Fine"},
        )

        assert decided.status_code == 200, decided.text
        manager_task.refresh_from_db()
        assert manager_task.outcome == "approved"

    def test_do_not_stop_a_valid_token_sent_by_the_same_client(self, server, people):
        bobs = issue_token(user=people["bob"])[1]
        attacker = relayed(CLIENT_A)
        for _ in range(6):
            attacker.get(f"{server}/api/v1/workflows", headers=bearer(GARBAGE))

        response = attacker.get(f"{server}/api/v1/workflows", headers=bearer(bobs))

        assert response.status_code == 200


class TestAForgedForwardedFor:
    def test_from_outside_the_trusted_proxy_is_ignored(self, server, people):
        statuses = [direct_token_call(server, GARBAGE, forwarded_for=CLIENT_B) for _ in range(6)]

        relayed_b = relayed(CLIENT_B).get(f"{server}/api/v1/workflows", headers=bearer(GARBAGE))

        assert statuses == [401] * 4 + [429] * 2
        assert relayed_b.status_code == 401
        assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {
            OUTSIDER,
            CLIENT_B,
        }
