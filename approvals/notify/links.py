"""Signed, expiring, single-use email links, bound to a recipient and a task version."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.utils.translation import gettext_lazy

from approvals.models import EmailLink, HumanTask
from workflows import metrics

_SALT = "approvals.email-link"

# Every token `create_link` gives out: a link's id (a UUID), Signer's ":" and a
# URL-safe base64 signature. A token with any other character (a NUL byte, a space,
# a slash) was never a link, and is refused before it reaches the database.
_TOKEN = re.compile(r"[0-9A-Za-z_:-]{1,200}")


_NOT_VALID = gettext_lazy(
    "This link is not valid: it was changed or cut short. Open the task from your inbox instead."
)


class LinkProblem(Exception):
    """Why a link cannot be used; `kind` names it for the page and the tests."""

    MESSAGES = {
        "tampered": _NOT_VALID,
        "malformed": _NOT_VALID,
        "expired": gettext_lazy("This link has expired. Open the task from your inbox instead."),
        "used": gettext_lazy("This link was already used. Each emailed link works once."),
        "stale": gettext_lazy(
            "This task has changed since the email was sent (it was decided, reassigned "
            "or escalated), so the link no longer applies."
        ),
        "forwarded": gettext_lazy(
            "This link was sent to someone else. Only its recipient can use it."
        ),
    }

    # Only a guessed, altered or someone else's link gives these; an honest
    # recipient meets the others (used, expired, stale), so only these count
    # towards a lockout (approvals.throttling). A malformed token does not: it
    # cannot match any link, so there is nothing to slow down, and its path is
    # not fit to be stored.
    GUESSES = frozenset({"tampered", "forwarded"})

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(self.MESSAGES[kind])
        metrics.email_link_refused(reason=kind)  # each refusal is raised once

    @property
    def is_guess(self) -> bool:
        return self.kind in self.GUESSES


def create_link(*, task: HumanTask, recipient, now: datetime) -> tuple[EmailLink, str]:
    """Return a new link for `recipient` to the task's current version, and its token."""
    link = EmailLink.objects.create(
        task=task,
        recipient=recipient,
        task_version=task.version,
        created_at=now,
        expires_at=now + timedelta(hours=settings.BATON_EMAIL_LINK_HOURS),
    )
    return link, signing.Signer(salt=_SALT).sign(str(link.pk))


def resolve(token: str, *, now: datetime, lock: bool = False) -> EmailLink:
    """Return the link a token names if it can still be used, or raise LinkProblem."""
    if not _TOKEN.fullmatch(token):
        raise LinkProblem("malformed")
    try:
        link_id = signing.Signer(salt=_SALT).unsign(token)
    except signing.BadSignature:
        raise LinkProblem("tampered") from None
    links = EmailLink.objects.select_related("task", "recipient")
    if lock:
        links = links.select_for_update(of=("self",))
    link = links.filter(pk=link_id).first()
    if link is None:
        raise LinkProblem("tampered")
    if link.used_at is not None:
        raise LinkProblem("used")
    if link.expires_at <= now:
        raise LinkProblem("expired")
    if link.task_version != link.task.version or not link.task.is_live:
        raise LinkProblem("stale")
    return link


def check_recipient(link: EmailLink, user) -> None:
    if link.recipient_id != user.pk:
        raise LinkProblem("forwarded")
