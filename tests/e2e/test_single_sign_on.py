"""Single sign-on through a real OpenID Connect provider (tests/oidc/provider.mjs: panva's
oidc-provider under Node, on a loopback port), in Debian's Chromium.

People sign in at the provider; their Baton account is made at the first sign-in
and its groups follow the provider's groups claim at every one; the API takes the
provider's access tokens. The provider's directory is a file the tests rewrite.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

import jwt
import pytest
import requests
from auditlog.models import LogEntry
from axes.models import AccessAttempt
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import Page, expect

from approvals.human_tasks import inbox_entries
from tests import oidc_provider
from tests.e2e import test_inbox_browser as inbox
from tests.e2e.conftest import end_process, start_process, wait_until
from tests.oidc_provider import People

pytestmark = pytest.mark.e2e

# The inbox's browser tests' Chromium, shared: every page is watched.
browser = inbox.browser
watched = inbox.watched

User = get_user_model()
ALICE_PASSWORD = "alice-at-the-provider"
BOB_PASSWORD = "bob-at-the-provider"


@dataclass
class Provider:
    issuer: str
    people: People
    redirect_uri: str


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory) -> Iterator[Provider]:
    """The provider, up for this module, its only client Baton's live server."""
    node = oidc_provider.node_and_package()
    folder = tmp_path_factory.mktemp("oidc-provider")
    people = People(folder / "people.json")
    people.add("alice", password=ALICE_PASSWORD, groups=["legal", "employees"])
    log = folder / "provider.log"
    redirect_uri = f"{live_server.url}/oidc/callback/"
    process = start_process(
        "oidc-provider",
        [node, str(oidc_provider.HERE / "provider.mjs")],
        env={
            **os.environ,
            "OIDC_USERS": str(people.path),
            "OIDC_CLIENT_ID": oidc_provider.CLIENT_ID,
            "OIDC_CLIENT_SECRET": oidc_provider.CLIENT_SECRET,
            "OIDC_REDIRECT_URI": redirect_uri,
            "OIDC_AUDIENCE": oidc_provider.AUDIENCE,
        },
        log=log,
        shared=True,
    )
    try:
        wait_until(
            lambda: b"ready " in log.read_bytes() or process.poll() is not None,
            timeout=60,
            what="the OpenID Connect provider to listen",
        )
        found = re.search(rb"ready (\S+)", log.read_bytes())
        assert found, f"the provider did not start:\n{log.read_text()}"
        yield Provider(found.group(1).decode(), people, redirect_uri)
    finally:
        end_process(process)


@pytest.fixture
def sso(settings, provider) -> Provider:
    """Baton pointed at the provider, its directory back to alice alone."""
    for name, value in oidc_provider.settings_for(provider.issuer).items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [
        *settings.AUTHENTICATION_BACKENDS,
        "approvals.sso.backends.ProviderBackend",
    ]
    provider.people.people.clear()
    provider.people.add("alice", password=ALICE_PASSWORD, groups=["legal", "employees"])
    return provider


def sign_in_through_provider(page: Page, *, username: str, password: str | None) -> None:
    """Press the SSO button; at the provider, sign in unless its session is still open."""
    page.goto("/accounts/login/")
    page.get_by_role("link", name="Sign in with the test provider").click()
    if password is not None:
        page.get_by_label("Provider username").fill(username)
        page.get_by_label("Provider password").fill(password)
        page.get_by_role("button", name="Sign in to the provider").click()
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()


def sign_out(page: Page) -> None:
    page.get_by_role("button", name="Log out").click()
    page.goto("/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


class TestSigningIn:
    def test_alice_is_made_at_her_first_sign_in_with_the_groups_of_her_claim(
        self, sso, watched, transactional_db
    ):
        Group.objects.create(name="legal")
        assert not User.objects.filter(username="alice").exists()
        page = watched.open().new_page()

        sign_in_through_provider(page, username="alice", password=ALICE_PASSWORD)

        alice = User.objects.get(username="alice")
        assert sorted(alice.groups.values_list("name", flat=True)) == ["employees", "legal"]
        assert (alice.email, alice.first_name) == ("alice@example.com", "Alice")
        assert not alice.has_usable_password()
        assert not alice.is_staff

    def test_a_group_removed_at_the_provider_takes_its_tasks_from_bobs_queue(
        self, sso, watched, finance_task, bob
    ):
        sso.people.add("bob", password=BOB_PASSWORD, groups=["finance", "security"])
        bob.groups.clear()  # until the provider says otherwise, bob is in no group
        page = watched.open().new_page()
        sign_in_through_provider(page, username="bob", password=BOB_PASSWORD)
        page.goto("/?tab=queue")
        expect(page.locator(f"#row-{finance_task.pk}")).to_be_visible()
        sign_out(page)

        sso.people.set_groups("bob", ["security"])
        sign_in_through_provider(page, username="bob", password=None)  # still signed in there
        page.goto("/?tab=queue")

        expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
        expect(page.locator(f"#row-{finance_task.pk}")).to_have_count(0)
        assert list(bob.groups.values_list("name", flat=True)) == ["security"]
        assert inbox_entries.entries_for(finance_task)  # the task is still the group's
        synced = LogEntry.objects.filter(additional_data__event="account_synced", actor=bob)
        assert synced.latest("pk").changes_dict["groups"] == [["finance", "security"], ["security"]]

    def test_with_passwords_off_the_page_offers_only_the_provider_and_refuses_a_password(
        self, sso, settings, watched, client, bob
    ):
        settings.BATON_LOCAL_LOGIN = False
        page = watched.open().new_page()

        page.goto("/accounts/login/")
        refused = client.post(
            "/accounts/login/", {"username": "bob", "password": "baton-demo"}, follow=False
        )
        refused_by_admin = client.post(
            "/admin/login/", {"username": "bob", "password": "baton-demo"}, follow=False
        )

        expect(page.get_by_role("link", name="Sign in with the test provider")).to_be_visible()
        expect(page.get_by_label("Password")).to_have_count(0)
        assert refused.status_code == refused_by_admin.status_code == 403
        assert "Signing in with a password is turned off here" in refused.content.decode()
        assert "_auth_user_id" not in client.session


def provider_access_token(provider: Provider, *, username: str, password: str) -> str:
    """Sign in at the provider as a client would (code flow with PKCE), return the access token."""
    http = requests.Session()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    answer = http.get(
        f"{provider.issuer}/auth",
        params={
            "client_id": oidc_provider.CLIENT_ID,
            "response_type": "code",
            "scope": "openid email profile groups",
            "redirect_uri": provider.redirect_uri,
            "state": secrets.token_urlsafe(16),
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
        },
        timeout=30,
    )
    uid = answer.url.rsplit("/", 1)[1]
    answer = http.post(
        f"{provider.issuer}/interaction/{uid}/login",
        data={"login": username, "password": password},
        allow_redirects=False,
        timeout=30,
    )
    location = answer.headers["Location"]
    while not location.startswith(provider.redirect_uri):
        answer = http.get(
            location if location.startswith("http") else provider.issuer + location,
            allow_redirects=False,
            timeout=30,
        )
        location = answer.headers["Location"]
    tokens = http.post(
        f"{provider.issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": parse_qs(urlparse(location).query)["code"][0],
            "redirect_uri": provider.redirect_uri,
            "client_id": oidc_provider.CLIENT_ID,
            "client_secret": oidc_provider.CLIENT_SECRET,
            "code_verifier": verifier,
        },
        timeout=30,
    ).json()
    return tokens["access_token"]


def forged_like(token: str) -> str:
    """The same claims and key id, signed with a key the provider never had."""
    claims = jwt.decode(token, options={"verify_signature": False})
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(claims, key, algorithm="RS256", headers=jwt.get_unverified_header(token))


class TestApiTokens:
    def test_the_api_takes_alices_provider_token_and_refuses_a_forged_one_as_a_failure(
        self, sso, live_server, alice
    ):
        token = provider_access_token(sso, username="alice", password=ALICE_PASSWORD)
        tasks = f"{live_server.url}/api/v1/tasks"

        accepted = requests.get(tasks, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        forged = requests.get(
            tasks, headers={"Authorization": f"Bearer {forged_like(token)}"}, timeout=30
        )
        anonymous = requests.get(tasks, timeout=30)

        assert accepted.status_code == 200, accepted.text
        assert forged.status_code == 401
        assert forged.headers["Content-Type"] == "application/problem+json"
        assert forged.json()["detail"] == anonymous.json()["detail"]
        # Counted like any token naming no token, against the sender's address, once:
        # the accepted token counted nothing.
        counted = AccessAttempt.objects.values_list("username", "failures_since_start")
        assert list(counted) == [(None, 1)]
