"""Throttle failed credentials, per account and per address, with django-axes.

django-axes counts failures per account and per address in its database table,
which every web process shares (PostgreSQL in production, the demo's SQLite),
and refuses a locked account or address until its cool-off has passed or an
operator unlocks it (the admin's *Access attempts*, or `manage.py
axes_reset_username` / `axes_reset_ip`). Passwords reach it through Django's
authentication (`AxesStandaloneBackend`); API tokens and email links, which
are not passwords, ask `lockout_of` first and report their failures with
`record_failure`. One lockout covers every way in: an address guessing tokens
may not go on guessing passwords.

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
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from approvals import audit
from approvals.states import Channel


@dataclass(frozen=True)
class Lockout:
    """Why a request is refused, and for how long."""

    until: datetime
    retry_after: int  # whole seconds, for the Retry-After header

    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after / 60))
        return (
            "Too many failed attempts to sign in or use a link or token, from this account "
            "or this address: access is paused to stop guessing. "
            f"Try again in {minutes} minute{'s' if minutes != 1 else ''} "
            f"(after {self.until:%H:%M} UTC), or ask an operator to unlock it."
        )


class LockedOut(Exception):
    """Raised where an answer cannot be returned directly (the API's authentication)."""

    def __init__(self, lockout: Lockout) -> None:
        self.lockout = lockout
        super().__init__(lockout.message)


def client_address(request: HttpRequest) -> str | None:
    """Return the client's address: the peer, which the audit log records and failures
    are counted against (AXES_CLIENT_IP_CALLABLE); the one place to change it behind a
    trusted proxy. Never X-Forwarded-For, which the client writes.
    """
    return request.META.get("REMOTE_ADDR")


def lockout_parameters(request_or_attempt: Any, credentials: dict[str, Any] | None) -> list[str]:
    """Count per account and per address; per address alone when no account is named.

    Without an account (a token nobody holds, a tampered link opened signed out),
    counting "per account" would put every such failure, from every address, on
    one shared counter, and a stranger could lock all of them at once.
    """
    if isinstance(request_or_attempt, AccessBase):
        username = request_or_attempt.username
    else:
        username = get_client_username(request_or_attempt, credentials)
    return ["username", "ip_address"] if username else ["ip_address"]


def lockout_of(request: HttpRequest, *, username: str | None) -> Lockout | None:
    """Return the lockout that refuses this request's account or address now, or None."""
    credentials = {"username": username or None}
    if AxesProxyHandler.is_allowed(request, credentials):
        return None
    return _lockout(request, credentials)


def record_failure(request: HttpRequest, *, username: str | None, channel: str) -> Lockout | None:
    """Count one failed credential of this request's account and address.

    Return the lockout it caused if it reached the limit (the audit entry is
    written then, by `audit_lockout`), else None.
    """
    credentials = {"username": username or None}
    request.baton_channel = channel  # type: ignore[attr-defined]
    AxesProxyHandler.user_login_failed(
        sender=record_failure, credentials=credentials, request=request
    )
    if getattr(request, "axes_locked_out", False):
        return _lockout(request, credentials)
    return None


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
    """Say until when the request stays locked, for the account or the address,
    whichever ends later (the full cool-off if axes refused it for another reason)."""
    now = timezone.now()
    locks = _locks(request, credentials)
    until = max(locks.values()) if locks else now + (get_cool_off(request) or timedelta(0))
    return Lockout(until=until, retry_after=max(1, math.ceil((until - now).total_seconds())))


def _locks(request: HttpRequest, credentials: dict[str, Any]) -> dict[str, datetime]:
    """Return when each locked parameter ("username", "ip_address") is unlocked: a
    cool-off after the newest failure that, counting back, reaches the limit."""
    cool_off = get_cool_off(request) or timedelta(0)
    limit = get_failure_limit(request, credentials)
    parameters = lockout_parameters(request, credentials)
    querysets = AxesProxyHandler.get_implementation().get_user_attempts(request, credentials)
    locks = {}
    for parameter, attempts in zip(parameters, querysets, strict=True):
        counted = 0
        for failures, at in attempts.order_by("-attempt_time").values_list(
            "failures_since_start", "attempt_time"
        ):
            counted += failures
            if counted >= limit:
                locks[parameter] = at + cool_off
                break
    return locks


@receiver(user_locked_out)
def audit_lockout(
    sender: Any, request: HttpRequest, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    """Write the lockout to the audit log, once, when a failure reaches the limit.

    Axes also signals each refused attempt during a lockout; those are not new
    lockouts (no failure was counted) and are not written again. The entry is
    about the account when the account is locked, otherwise about the row that
    counted the address's failures.
    """
    failures = getattr(request, "axes_failures_since_start", None)
    if failures is None:
        return
    credentials = {"username": username}
    locks = _locks(request, credentials)
    account, locked = None, []
    if "username" in locks:
        account = get_user_model().objects.filter(username=username).first()
        # A username that names no account is not written: people type passwords into it.
        locked.append(f"account {account.username}" if account else "an unknown username")
    if "ip_address" in locks:
        locked.append(f"address {ip_address}")
    subject = account or (
        AccessAttempt.objects.filter(username=username, ip_address=ip_address)
        .order_by("-attempt_time")
        .first()
    )
    if subject is None or not locked:
        return
    channel = getattr(request, "baton_channel", None) or (
        Channel.ADMIN if request.path.startswith(reverse("admin:index")) else Channel.INBOX
    )
    until = max(locks.values())
    audit.record_lockout(
        subject=subject,
        description=f"Locked out: {' and '.join(locked)}",
        channel=channel,
        now=timezone.now(),
        comment=(
            f"Locked out {' and '.join(locked)} after {failures} failed attempts "
            f"({channel}, from {ip_address}), until {until:%Y-%m-%d %H:%M:%S} UTC "
            "or until an operator unlocks it."
        ),
        remote_addr=ip_address,
        changes={"failures": [None, failures], "locked_until": [None, until.isoformat()]},
    )
