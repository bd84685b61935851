"""The authentication backends: passwords (Django's, unless BATON_LOCAL_LOGIN is off) and
the OpenID Connect provider's sign-in (mozilla-django-oidc's code flow with PKCE).

The provider's backend finds the account by the username claim (BATON_OIDC_USERNAME_CLAIM),
makes it on its first sign-in and brings its groups and rights up to the claims on
every sign-in (approvals.sso.accounts). Its claims are the ID token's, checked for
its signature, issuer and audience, merged with the userinfo endpoint's when one is
configured: a provider that issues its access tokens for Baton's API (an audience
of its own) may refuse them at its userinfo endpoint, so the ID token must then
carry the claims (the groups claim included).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from approvals.sso import accounts
from approvals.sso.claims import Account, UnusableClaims, parse_rule, read_account
from workflows.client_address import client_address

logger = logging.getLogger("baton.sso")


class PasswordBackend(ModelBackend):
    """Django's username and password, refused outright while BATON_LOCAL_LOGIN is off."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if not settings.BATON_LOCAL_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def account_from(found: dict[str, Any]) -> Account:
    """Return the account the provider's claims describe, read by the settings' claim names."""
    return read_account(
        found,
        username_claim=settings.BATON_OIDC_USERNAME_CLAIM,
        groups_claim=settings.BATON_OIDC_GROUPS_CLAIM,
        staff_rule=parse_rule(settings.BATON_OIDC_STAFF_CLAIM),
        operator_rule=parse_rule(settings.BATON_OIDC_OPERATOR_CLAIM),
    )


class ProviderBackend(OIDCAuthenticationBackend):
    """Sign in through the OpenID Connect provider; the account follows its claims."""

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """Check the ID token's signature and nonce (mozilla-django-oidc), then that the
        provider issued it (BATON_OIDC_ISSUER) to Baton (the client id), which
        mozilla-django-oidc leaves unchecked."""
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if settings.BATON_OIDC_ISSUER and payload.get("iss") != settings.BATON_OIDC_ISSUER:
            raise SuspiciousOperation(f"The ID token's issuer is {payload.get('iss')!r}.")
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("The ID token was not issued to Baton's client id.")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        """Return the ID token's claims, with the userinfo endpoint's over them if set."""
        found = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            found.update(super().get_userinfo(access_token, id_token, payload))
        return found

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        try:
            account_from(claims)
        except UnusableClaims as refused:
            logger.warning("single sign-on refused: %s", refused)
            return False
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return get_user_model().objects.filter(username=account_from(claims).username)

    def create_user(self, claims: dict[str, Any]) -> Any:
        return self._sign_in(claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        return self._sign_in(claims)

    def _sign_in(self, claims: dict[str, Any]) -> Any:
        return accounts.sign_in_account(
            account=account_from(claims),
            now=timezone.now(),
            remote_addr=client_address(self.request),
        )
