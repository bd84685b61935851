"""The single sign-on provider's access tokens at the API (approvals.sso.access_tokens):
JWTs checked against the provider's keys, served here over real HTTP as a JWKS."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.test import Client

from approvals.sso import access_tokens

pytestmark = pytest.mark.django_db

ISSUER = "https://sso.example.com/realms/acme"
AUDIENCE = "baton-api"
LIMIT = 3
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Keys:
    """The provider's JWKS endpoint, on a loopback port, counting how often it is read."""

    def __init__(self) -> None:
        self.reads = 0
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
        body = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]})
        keys = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                keys.reads += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/certs"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def keys(settings) -> Iterator[Keys]:
    served = Keys()
    settings.BATON_OIDC_ENABLED = True
    settings.BATON_OIDC_ISSUER = ISSUER
    settings.BATON_OIDC_API_AUDIENCE = AUDIENCE
    settings.OIDC_OP_JWKS_ENDPOINT = served.uri
    settings.AXES_FAILURE_LIMIT = LIMIT
    yield served
    served.server.shutdown()
    access_tokens._clients.clear()


def token(*, key=KEY, kid: str = "k1", **claims: Any) -> str:
    now = int(time.time())
    payload = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "0b7c",
        "preferred_username": "alice",
        "iat": now,
        "exp": now + 300,
        **claims,
    }
    return jwt.encode(
        {name: value for name, value in payload.items() if value is not None},
        key,
        algorithm="RS256",
        headers={"kid": kid, "typ": "at+jwt"},
    )


def call(bearer: str, *, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).get(
        "/api/v1/tasks", headers={"Authorization": f"Bearer {bearer}"}
    )


class TestProviderTokens:
    def test_a_valid_token_names_its_account_and_the_keys_are_fetched_once(self, keys, alice):
        first = call(token())
        second = call(token(preferred_username="alice"))

        assert (first.status_code, second.status_code) == (200, 200)
        assert keys.reads == 1

    @pytest.mark.parametrize(
        "claims",
        [
            {"exp": int(time.time()) - 600},
            {"aud": "someone-else"},
            {"iss": "https://elsewhere.example.com"},
            {"exp": None},
            {"nonce": "an-id-token-s"},
            {"preferred_username": "nobody-signed-in"},
        ],
        ids=["expired", "audience", "issuer", "no-expiry", "id-token", "unknown-account"],
    )
    def test_a_token_that_fails_a_check_gets_the_same_401_as_a_wrong_token(
        self, keys, alice, claims
    ):
        refused = call(token(**claims))
        wrong = call("baton_000000000000_nope", address="10.0.0.2")

        assert refused.status_code == 401
        assert refused.json()["detail"] == wrong.json()["detail"]

    def test_a_token_signed_with_another_key_is_refused(self, keys, alice):
        assert call(token(key=OTHER_KEY)).status_code == 401

    def test_an_inactive_account_s_token_is_refused(self, keys, alice):
        alice.is_active = False
        alice.save()

        assert call(token()).status_code == 401

    def test_forged_tokens_count_against_the_address_and_lock_it_out(self, keys, alice):
        statuses = [call(token(key=OTHER_KEY)).status_code for _ in range(LIMIT)]

        elsewhere = call(token(key=OTHER_KEY), address="10.0.0.9")
        genuine = call(token())

        assert statuses == [401] * (LIMIT - 1) + [429]
        assert elsewhere.status_code == 401
        assert genuine.status_code == 200  # a right token goes through a lockout

    def test_without_an_audience_the_api_takes_no_provider_token(self, keys, settings, alice):
        settings.BATON_OIDC_API_AUDIENCE = ""

        assert call(token()).status_code == 401
        assert keys.reads == 0
