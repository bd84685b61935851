"""API tokens: issued once, stored as a digest, checked in constant time, revocable."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.utils import timezone
from django.utils.crypto import constant_time_compare

from workflows.models import ApiToken

_SCHEME = "baton"


def issue_token(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for `user`; return its row and the secret (shown this once only)."""
    prefix = secrets.token_hex(6)
    secret = f"{_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(user=user, name=name, prefix=prefix, digest=_digest(secret))
    return token, secret


def claimed_token(secret: str) -> ApiToken | None:
    """Return the live token that a presented secret's public prefix names, or None.

    The rest of the secret is not checked here: this names the account a
    presented token claims, so failures can be counted against it.
    """
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != _SCHEME:
        return None
    return (
        ApiToken.objects.select_related("user")
        .filter(prefix=parts[1], revoked_at__isnull=True, user__is_active=True)
        .first()
    )


def accept_token(token: ApiToken | None, secret: str) -> Any | None:
    """Return the token's user if `secret` is its secret (and note its use), else None."""
    if token is None or not constant_time_compare(token.digest, _digest(secret)):
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
