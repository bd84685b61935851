"""Throttling wrong API tokens: per account and per address, answered as problem+json 429."""

from __future__ import annotations

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


class TestWrongTokens:
    def test_wrong_tokens_up_to_the_limit_then_even_a_good_one_is_refused_with_429(self, token_of):
        good = token_of("alice")
        statuses = [call("baton_000000000000_nope", address="10.0.0.1") for _ in range(LIMIT)]

        response = call(good, address="10.0.0.1")

        assert [r.status_code for r in statuses] == [401] * (LIMIT - 1) + [429]
        assert response.status_code == 429
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["title"] == "Too many failed attempts"
        assert "Try again in" in response.json()["detail"]
        assert 0 < int(response["Retry-After"]) <= 15 * 60

    def test_wrong_secrets_for_an_account_lock_that_account_from_every_address(self, token_of):
        good = token_of("alice")
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            call(wrong_secret_for(good), address=address)

        response = call(good, address="10.0.0.4")

        assert response.status_code == 429

    def test_another_account_from_another_address_is_unaffected(self, token_of):
        alices = token_of("alice")
        for _ in range(LIMIT):
            call(wrong_secret_for(alices), address="10.0.0.1")
        assert call(alices, address="10.0.0.2").status_code == 429

        response = call(token_of("bob"), address="10.0.0.2")

        assert response.status_code == 200

    def test_tokens_nobody_holds_lock_only_their_address(self, token_of):
        for address in ("10.0.0.1", "10.0.0.2"):
            for _ in range(LIMIT - 1):
                call("baton_000000000000_nope", address=address)

        response = call(token_of("alice"), address="10.0.0.3")

        assert response.status_code == 200

    def test_a_token_lockout_is_audited_with_the_api_channel(self, token_of, people):
        good = token_of("alice")
        for _ in range(LIMIT):
            call(wrong_secret_for(good), address="10.0.0.1")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_pk == str(people["alice"].pk)
        assert entry.additional_data["channel"] == "api"

    def test_a_token_lockout_also_stops_password_guessing_from_that_address(self, token_of):
        for _ in range(LIMIT):
            call("baton_000000000000_nope", address="10.0.0.1")

        response = Client(REMOTE_ADDR="10.0.0.1").post(
            "/accounts/login/", {"username": "bob", "password": "baton-demo"}
        )

        assert response.status_code == 429

    def test_the_limit_is_documented_in_the_api_schema(self, client):
        schema = client.get("/api/v1/openapi.json").json()

        responses = schema["paths"]["/api/v1/workflows"]["get"]["responses"]
        assert "application/problem+json" in responses["429"]["content"]


class TestUnlockingTokens:
    def test_resetting_the_address_lets_its_good_tokens_in_again(self, token_of):
        good = token_of("alice")
        for _ in range(LIMIT):
            call("baton_000000000000_nope", address="10.0.0.1")
        assert call(good, address="10.0.0.1").status_code == 429

        call_command("axes_reset_ip", "10.0.0.1")

        assert call(good, address="10.0.0.1").status_code == 200
