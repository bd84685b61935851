"""Read what an OpenID Connect provider's claims say about an account: its username,
names, email, groups, and whether it is staff or an operator. Pure: no ORM, no settings.

A rule for a right is "claim" (it holds when the claim is true, or the string
"true") or "claim=value" (it holds when the claim is that value, or a list of
strings holding it), so one setting fits a boolean claim, a role list (Entra ID's
`roles`) or a group list (Keycloak's `groups`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Django's Group.name and User.username are at most this long.
GROUP_NAME_MAX = 150
USERNAME_MAX = 150


class UnusableClaims(Exception):
    """The claims do not name an account Baton can sign in."""


@dataclass(frozen=True)
class Rule:
    """A right granted by a claim: `claim` true, or holding `value` when one is given."""

    claim: str
    value: str | None = None


@dataclass(frozen=True)
class Account:
    """An account as the provider describes it at one sign-in.

    `groups` None: the claims carry no groups claim, and the account's groups are
    left as they are. `is_staff`/`is_operator` None: no rule is configured for it.
    """

    username: str
    email: str
    first_name: str
    last_name: str
    groups: frozenset[str] | None
    is_staff: bool | None
    is_operator: bool | None


def parse_rule(text: str) -> Rule | None:
    """Return the rule a setting writes ("claim" or "claim=value"), or None if empty."""
    claim, equals, value = text.strip().partition("=")
    if not claim.strip():
        return None
    return Rule(claim=claim.strip(), value=value.strip() if equals else None)


def holds(rule: Rule, claims: Mapping[str, Any]) -> bool:
    """Say whether the claims grant what `rule` describes."""
    found = claims.get(rule.claim)
    if rule.value is None:
        return found is True or (isinstance(found, str) and found.lower() == "true")
    if isinstance(found, str):
        return found == rule.value
    if isinstance(found, list | tuple):
        return rule.value in found
    return False


def groups_in(claims: Mapping[str, Any], claim: str) -> frozenset[str] | None:
    """Return the group names a claim lists (a list of strings, or one string), or None
    when the claims have no such claim. Names too long for a Django group, and
    anything that is not a string, are left out."""
    if claim not in claims:
        return None
    found = claims[claim]
    names = [found] if isinstance(found, str) else found if isinstance(found, list) else []
    return frozenset(
        name.strip()
        for name in names
        if isinstance(name, str) and name.strip() and len(name.strip()) <= GROUP_NAME_MAX
    )


def read_account(
    claims: Mapping[str, Any],
    *,
    username_claim: str,
    groups_claim: str,
    staff_rule: Rule | None,
    operator_rule: Rule | None,
) -> Account:
    """Return the account the claims describe; raise UnusableClaims if they name none."""
    username = claims.get(username_claim)
    if not isinstance(username, str) or not username.strip():
        raise UnusableClaims(f"The provider's claims have no {username_claim!r} to sign in by.")
    username = username.strip()
    if len(username) > USERNAME_MAX:
        raise UnusableClaims(f"The {username_claim!r} claim is over {USERNAME_MAX} characters.")
    return Account(
        username=username,
        email=_text(claims, "email", limit=254),
        first_name=_text(claims, "given_name", limit=150),
        last_name=_text(claims, "family_name", limit=150),
        groups=groups_in(claims, groups_claim),
        is_staff=holds(staff_rule, claims) if staff_rule else None,
        is_operator=holds(operator_rule, claims) if operator_rule else None,
    )


def _text(claims: Mapping[str, Any], name: str, *, limit: int) -> str:
    """Return a text claim as Django's field can hold it ("" if absent or too long)."""
    found = claims.get(name)
    text = found.strip() if isinstance(found, str) else ""
    return text if len(text) <= limit else ""
