"""Throttle failed credentials with django-axes, so that one client's failures never
lock out anyone else's good credentials.

django-axes counts failures in its database table, which every web process shares
(PostgreSQL in production, the demo's SQLite), and refuses what is locked until
its cool-off has passed or an operator unlocks it (`manage.py unlock`, which is
audited; the admin's *Access attempts*). What is counted and locked together:

- a password, per account *and* address (axes' combination): a guesser at one
  address locks that account at that address only, never the account's owner
  elsewhere nor anyone else at the guesser's address (one office behind NAT, or
  every client behind a proxy that is not trusted: see workflows.client_address).
  A locked pair is refused before the password is checked, so a guesser cannot
  tell a right guess from a wrong one.
- an API token that names a live token (its public prefix), per token, from
  every address: a guesser who learnt the prefix cannot go on trying its secret
  part anywhere. A token that names none (garbage, a revoked or unknown prefix),
  per address: it has no identity, so only its sender is slowed.
- an email link opened by a signed-in person who is not its recipient, per
  account and address; a forged or tampered link opened signed out, per address.

Tokens and email links are checked *before* any lockout is consulted, and a good
one always goes through: each carries 256 bits of secret (a token) or an HMAC
signature (a link) that no number of guesses reaches, so refusing the genuine
holder would only hand a stranger a way to lock them out. Failures are reported
with `record_failure`, after asking `lockout_of` whether the sender is already
locked (its failures are then refused without counting).

A lockout answers 429 with `Retry-After` and says why and when to retry, and is
written to the audit log, attributed to the system.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt, AccessBase
from axes.signals import user_locked_out
from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import ngettext

from approvals import audit
from approvals.states import Channel
from workflows.models import ApiToken


@dataclass(frozen=True)
class Lockout:
    """Why a request is refused, and for how long."""

    until: datetime
    retry_after: int  # whole seconds, for the Retry-After header

    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after / 60))
        return ngettext(
            "Too many failed attempts to sign in or use a link or token from here: access is"
            " paused to stop guessing. Try again in %(minutes)d minute (after %(until)s UTC),"
            " or ask an operator to unlock it.",
            "Too many failed attempts to sign in or use a link or token from here: access is"
            " paused to stop guessing. Try again in %(minutes)d minutes (after %(until)s UTC),"
            " or ask an operator to unlock it.",
            minutes,
        ) % {"minutes": minutes, "until": f"{self.until:%H:%M}"}


class LockedOut(Exception):
    """Raised where an answer cannot be returned directly (the API's authentication)."""

    def __init__(self, lockout: Lockout) -> None:
        self.lockout = lockout
        super().__init__(lockout.message)


# Failures of one API token are counted under this name, in axes' username column.
# Django's usernames never hold a colon, so no account's name reads as one.
TOKEN_IDENTITY = "api-token:"


def lockout_parameters(
    request_or_attempt: Any, credentials: dict[str, Any] | None
) -> list[str | list[str]]:
    """Count a token's failures on its own, from every address; all others per account
    and address together (AXES_LOCKOUT_PARAMETERS).

    With no account named (a token that names none, a tampered link opened signed
    out), the pair is (nobody, this address): only this address's nameless
    failures add up, never anyone's sign-ins, and never every address at once.
    """
    if isinstance(request_or_attempt, AccessBase):
        username = request_or_attempt.username
    else:
        username = get_client_username(request_or_attempt, credentials)
    if username and username.startswith(TOKEN_IDENTITY):
        return ["username"]
    return [["username", "ip_address"]]


def lockout_of(
    request: HttpRequest, *, username: str | None = None, token: str | None = None
) -> Lockout | None:
    """Return the lockout that refuses this request's failures now, or None.

    `username` is the account the credential names, `token` the public prefix of
    the API token presented (when it names a live one); with neither, the
    address's nameless failures.
    """
    credentials = _credentials(username=username, token=token)
    if AxesProxyHandler.is_allowed(request, credentials):
        return None
    return _lockout(request, credentials)


def record_failure(
    request: HttpRequest, *, username: str | None = None, token: str | None = None, channel: str
) -> Lockout | None:
    """Count one failed credential (see `lockout_of` for what it is counted against).

    Return the lockout it caused if it reached the limit (the audit entry is
    written then, by `audit_lockout`), else None.
    """
    credentials = _credentials(username=username, token=token)
    request.baton_channel = channel  # type: ignore[attr-defined]
    AxesProxyHandler.user_login_failed(
        sender=record_failure, credentials=credentials, request=request
    )
    if getattr(request, "axes_locked_out", False):
        return _lockout(request, credentials)
    return None


def _credentials(*, username: str | None, token: str | None) -> dict[str, Any]:
    return {"username": f"{TOKEN_IDENTITY}{token}" if token else (username or None)}


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """Answer a locked-out sign-in with a page that says why and when (AXES_LOCKOUT_CALLABLE).

    A view that already answered the lockout itself (the API's problem+json, the
    email-link page) keeps its answer.
    """
    if original_response is not None and original_response.status_code == 429:
        return original_response
    lockout = _lockout(request, credentials or {"username": None})
    response = render(request, "registration/locked_out.html", {"lockout": lockout}, status=429)
    response["Retry-After"] = str(lockout.retry_after)
    return response


def _lockout(request: HttpRequest, credentials: dict[str, Any]) -> Lockout:
    """Say until when the request stays locked (the full cool-off if axes refused it
    for another reason)."""
    now = timezone.now()
    until = _locked_until(request, credentials) or now + (get_cool_off(request) or timedelta(0))
    return Lockout(until=until, retry_after=max(1, math.ceil((until - now).total_seconds())))


def _locked_until(request: HttpRequest, credentials: dict[str, Any]) -> datetime | None:
    """Return when the request's lock ends: a cool-off after the newest failure that,
    counting back, reaches the limit; None if it is not locked."""
    cool_off = get_cool_off(request) or timedelta(0)
    limit = get_failure_limit(request, credentials)
    (attempts,) = AxesProxyHandler.get_implementation().get_user_attempts(request, credentials)
    counted = 0
    for failures, at in attempts.order_by("-attempt_time").values_list(
        "failures_since_start", "attempt_time"
    ):
        counted += failures
        if counted >= limit:
            return at + cool_off
    return None


@receiver(user_locked_out)
def audit_lockout(
    sender: Any, request: HttpRequest, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    """Write the lockout to the audit log, once, when a failure reaches the limit.

    Axes also signals each refused attempt during a lockout; those are not new
    lockouts (no failure was counted) and are not written again. The entry is
    about the account the failures named (a token's holder for a token) when
    there is one, otherwise about the row that counted them.
    """
    failures = getattr(request, "axes_failures_since_start", None)
    if failures is None:
        return
    until = _locked_until(request, {"username": username})
    if until is None:
        return
    channel = getattr(request, "baton_channel", None) or (
        Channel.ADMIN if request.path.startswith(reverse("admin:index")) else Channel.INBOX
    )
    # Only the API counts tokens; a sign-in typing a token's name is about nobody's token.
    token = channel == Channel.API and bool(username and username.startswith(TOKEN_IDENTITY))
    locked, account = _what_is_locked(username=username, ip_address=ip_address, token=token)
    counted = AccessAttempt.objects.filter(username=username)
    if not token:
        counted = counted.filter(ip_address=ip_address)
    subject = account or counted.order_by("-attempt_time").first()
    if subject is None:
        return
    audit.record_lockout(
        subject=subject,
        description=f"Locked out: {locked}",
        channel=channel,
        now=timezone.now(),
        comment=(
            f"Locked out {locked} after {failures} failed attempts "
            f"({channel}, from {ip_address}), until {until:%Y-%m-%d %H:%M:%S} UTC "
            "or until an operator unlocks it."
        ),
        remote_addr=ip_address,
        changes={"failures": [None, failures], "locked_until": [None, until.isoformat()]},
    )


def _what_is_locked(
    *, username: str | None, ip_address: str | None, token: bool
) -> tuple[str, Any]:
    """Name what a lockout locks, and the account it is about (None if none)."""
    if username and token:
        prefix = username.removeprefix(TOKEN_IDENTITY)
        token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
        if token is None:
            return f"API token {prefix}", None
        return f"API token {prefix} of account {token.user.username}", token.user
    if not username:
        return f"address {ip_address} (credentials naming no account)", None
    account = get_user_model().objects.filter(username=username).first()
    # A username that names no account is not written: people type passwords into it.
    if account is None:
        return f"an unknown username at address {ip_address}", None
    return f"account {account.username} at address {ip_address}", account


class UnlockRefused(Exception):
    """An unlock that names nothing, nobody responsible or no reason, or finds nothing locked."""


def unlock(
    *,
    username: str | None = None,
    address: str | None = None,
    token: str | None = None,
    by: str,
    reason: str,
    now: datetime,
) -> int:
    """Forget the failures counted against an account, an address (or both together), or an
    API token, and write who lifted the lockout and why to the audit chain, in one
    transaction. Return how many counters were cleared; refuse with UnlockRefused."""
    reason = reason.strip()
    if not (username or address or token):
        raise UnlockRefused("Name what to unlock: --username, --address or both, or --token.")
    if token and (username or address):
        raise UnlockRefused("A token's failures are counted on their own: give --token alone.")
    if not reason:
        raise UnlockRefused("Say why (--reason): the audit log keeps it with the unlock.")
    operator = get_user_model().objects.filter(username=by, is_active=True).first()
    if operator is None:
        raise UnlockRefused(f"--by names no active account: {by!r}. Name yourself.")
    counted = AccessAttempt.objects.all()
    if token:
        counted = counted.filter(username=f"{TOKEN_IDENTITY}{token}")
    if username:
        counted = counted.filter(username=username)
    if address:
        counted = counted.filter(ip_address=address)
    parts = [f"account {username}" if username else "", f"address {address}" if address else ""]
    what = f"API token {token}" if token else " at ".join(part for part in parts if part)
    with transaction.atomic():
        rows = list(counted.select_for_update().order_by("-attempt_time"))
        if not rows:
            raise UnlockRefused(f"Nothing to unlock: no failures are counted for {what}.")
        account = get_user_model().objects.filter(username=username).first() if username else None
        if token:
            held = ApiToken.objects.select_related("user").filter(prefix=token).first()
            account = held.user if held else None
        failures = sum(row.failures_since_start for row in rows)
        audit.record_unlock(
            subject=account or rows[0],
            description=f"Unlocked: {what}",
            actor=operator,
            now=now,
            comment=reason,
            changes={"failures": [failures, 0]},
        )
        AccessAttempt.objects.filter(pk__in=[row.pk for row in rows]).delete()
    return len(rows)
