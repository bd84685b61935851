"""Accept the OpenID Connect provider's access tokens at the API, beside Baton's own.

An access token is accepted when it is a JWT signed by one of the provider's keys
(its JWKS, fetched by PyJWT's PyJWKClient and kept for `KEYS_LIFESPAN` seconds per
process, so a key the provider withdrew stops working within that time; a token
signed by a key not seen yet fetches the set again, at most once per PyJWT's
cooldown of 30 seconds, so forged key ids cannot make Baton hammer the provider),
with the configured algorithm, issuer
(BATON_OIDC_ISSUER) and audience (BATON_OIDC_API_AUDIENCE), not expired, and naming
an active account by the username claim. An ID token is refused even where its
audience is the API's (Entra ID's tokens for an app's own API name its client id):
it carries the `nonce` of Baton's sign-in, which no access token does.

Accounts are made and their groups synced only by signing in (approvals.sso.accounts):
a token for someone who never signed in names no account and is refused.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model

logger = logging.getLogger("baton.sso")

# How long a process keeps the provider's keys before fetching them again.
KEYS_LIFESPAN = 300

_clients: dict[str, jwt.PyJWKClient] = {}
_clients_lock = threading.Lock()


def accepts_provider_tokens() -> bool:
    """Whether the API takes the provider's access tokens: SSO on and an audience set."""
    return bool(
        settings.BATON_OIDC_ENABLED
        and settings.BATON_OIDC_API_AUDIENCE
        and settings.OIDC_OP_JWKS_ENDPOINT
    )


def looks_like_jwt(token: str) -> bool:
    """A compact JWS: three base64url parts, the first a JSON object ("eyJ")."""
    return token.startswith("eyJ") and token.count(".") == 2


def user_for(token: str) -> Any | None:
    """Return the active account a valid provider access token names, else None."""
    if not (accepts_provider_tokens() and looks_like_jwt(token)):
        return None
    try:
        key = _keys(settings.OIDC_OP_JWKS_ENDPOINT).get_signing_key_from_jwt(token)
        payload = jwt.decode(
            token,
            key.key,
            algorithms=[settings.OIDC_RP_SIGN_ALGO],
            audience=settings.BATON_OIDC_API_AUDIENCE,
            issuer=settings.BATON_OIDC_ISSUER or None,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.PyJWKClientConnectionError as error:
        logger.warning("the provider's keys could not be fetched: %s", error)
        return None
    except (jwt.PyJWKClientError, jwt.InvalidTokenError):
        return None
    if "nonce" in payload:
        return None
    username = payload.get(settings.BATON_OIDC_USERNAME_CLAIM)
    if not isinstance(username, str) or not username:
        return None
    return get_user_model().objects.filter(username=username, is_active=True).first()


def _keys(uri: str) -> jwt.PyJWKClient:
    """Return this process's key client for the provider's JWKS at `uri`."""
    with _clients_lock:
        client = _clients.get(uri)
        if client is None:
            client = jwt.PyJWKClient(
                uri, cache_jwk_set=True, lifespan=KEYS_LIFESPAN, timeout=settings.OIDC_TIMEOUT
            )
            _clients[uri] = client
        return client
