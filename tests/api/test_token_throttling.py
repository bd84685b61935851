"""Throttling wrong API tokens: per token, or per address for tokens that name none,
answered as problem+json 429; a right token is never refused."""

from __future__ import annotations

from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import call_command
from django.test import Client

from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db

LIMIT = 3


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT


def call(secret: str, *, address: str):
    return Client(REMOTE_ADDR=address).get(
        "/api/v1/workflows", headers={"Authorization": f"Bearer {secret}"}
    )


def wrong_secret_for(secret: str) -> str:
    """The same public prefix (the same account) with another secret part."""
    scheme, prefix, _ = secret.split("_", 2)
    return f"{scheme}_{prefix}_{'x' * 43}"


@pytest.fixture
def token_of(people):
    def make(username: str) -> str:
        return issue_token(user=people[username])[1]

    return make


GARBAGE = "baton_000000000000_nope"


class TestWrongTokens:
    def test_tokens_naming_nothing_up_to_the_limit_then_more_are_refused_with_429(self):
        statuses = [call(GARBAGE, address="10.0.0.1").status_code for _ in range(LIMIT)]

        response = call(GARBAGE, address="10.0.0.1")

        assert statuses == [401] * (LIMIT - 1) + [429]
        assert response.status_code == 429
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["title"] == "Too many failed attempts"
        assert "Try again in" in response.json()["detail"]
        assert 0 < int(response["Retry-After"]) <= 15 * 60

    def test_a_good_token_is_accepted_from_an_address_locked_by_others_garbage(self, token_of):
        for _ in range(LIMIT + 3):
            call(GARBAGE, address="10.0.0.1")

        response = call(token_of("bob"), address="10.0.0.1")

        assert response.status_code == 200

    def test_tokens_naming_nothing_lock_only_their_address(self):
        for _ in range(LIMIT):
            call(GARBAGE, address="10.0.0.1")

        response = call(GARBAGE, address="10.0.0.2")

        assert response.status_code == 401

    def test_wrong_secrets_for_a_token_lock_that_token_from_every_address(self, token_of):
        good = token_of("alice")
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            call(wrong_secret_for(good), address=address)

        response = call(wrong_secret_for(good), address="10.0.0.4")

        assert response.status_code == 429

    def test_its_holder_keeps_using_a_token_whose_secret_others_guess(self, token_of):
        good = token_of("alice")
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            call(wrong_secret_for(good), address=address)

        response = call(good, address="10.0.0.1")

        assert response.status_code == 200

    def test_another_token_of_the_same_account_is_unaffected(self, token_of):
        first, second = token_of("alice"), token_of("alice")
        for _ in range(LIMIT):
            call(wrong_secret_for(first), address="10.0.0.1")

        response = call(wrong_secret_for(second), address="10.0.0.1")

        assert response.status_code == 401

    def test_a_token_lockout_is_audited_with_the_api_channel_naming_the_token(
        self, token_of, people
    ):
        good = token_of("alice")
        prefix = good.split("_")[1]
        for _ in range(LIMIT):
            call(wrong_secret_for(good), address="10.0.0.1")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_pk == str(people["alice"].pk)
        assert entry.object_repr == f"Locked out: API token {prefix} of account alice"
        assert entry.additional_data["channel"] == "api"

    def test_a_token_lockout_does_not_stop_anyones_sign_in_from_that_address(self, people):
        for _ in range(LIMIT + 3):
            call(GARBAGE, address="10.0.0.1")

        response = Client(REMOTE_ADDR="10.0.0.1").post(
            "/accounts/login/", {"username": "carol", "password": "baton-demo"}
        )

        assert response.status_code == 302

    def test_a_signed_in_session_is_served_from_an_address_locked_by_garbage(self, people):
        for _ in range(LIMIT + 3):
            call(GARBAGE, address="10.0.0.1")
        browser = Client(REMOTE_ADDR="10.0.0.1")
        browser.force_login(people["carol"])

        response = browser.get("/api/v1/workflows")

        assert response.status_code == 200

    def test_the_limit_is_documented_in_the_api_schema(self, client):
        schema = client.get("/api/v1/openapi.json").json()

        responses = schema["paths"]["/api/v1/workflows"]["get"]["responses"]
        assert "application/problem+json" in responses["429"]["content"]


class TestUnlockingAToken:
    def test_unlocking_a_token_lets_its_wrong_secrets_be_answered_401_again(self, token_of):
        good = token_of("alice")
        prefix = good.split("_")[1]
        for _ in range(LIMIT):
            call(wrong_secret_for(good), address="10.0.0.1")
        assert call(wrong_secret_for(good), address="10.0.0.2").status_code == 429

        call_command(
            "unlock", token=prefix, by="olga", reason="alice rotated it", stdout=StringIO()
        )

        assert call(wrong_secret_for(good), address="10.0.0.2").status_code == 401
        entry = LogEntry.objects.get(additional_data__event="unlocked")
        assert entry.object_repr == f"Unlocked: API token {prefix}"
