"""Emails about human tasks: plain text and HTML, sent through Django once the work commits."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext, ngettext

from approvals import preferences
from approvals.models import HumanTask
from approvals.notify import links
from approvals.states import outcome_words
from workflows.cleaning import neutralise_bidi


def send_escalation(*, task: HumanTask, recipients: list, now: datetime) -> int:
    """Email each recipient a decision link for `task`; return how many were queued."""
    messages = []
    chosen = preferences.chosen_by_each(recipients)
    for recipient in recipients:
        if not recipient.email:
            continue
        _token_row, token = links.create_link(task=task, recipient=recipient, now=now)
        context = {
            "task": task,
            "recipient": recipient,
            "link": settings.BATON_BASE_URL + reverse("approvals:email_link", args=[token]),
            "inbox": settings.BATON_BASE_URL + reverse("approvals:task", args=[task.pk]),
            "hours": settings.BATON_EMAIL_LINK_HOURS,
        }
        with _in_their_words(recipient, chosen):
            message = EmailMultiAlternatives(
                subject=_subject(gettext("Escalated to you: %(title)s") % {"title": task.title}),
                body=_render("approvals/emails/escalation.txt", context),
                to=[recipient.email],
            )
            message.attach_alternative(
                _render("approvals/emails/escalation.html", context), "text/html"
            )
        messages.append(message)
    if messages:
        transaction.on_commit(lambda: [message.send() for message in messages], robust=True)
    return len(messages)


def send_delegation_done(*, task: HumanTask) -> None:
    """Tell the owner of a delegated task that the delegate decided it."""
    owner = task.owner
    if owner is None or not owner.email:
        return
    context = {"task": task, "owner": owner}
    with _in_their_words(owner, preferences.chosen_by_each([owner])):
        message = EmailMultiAlternatives(
            subject=_subject(
                gettext("%(person)s %(did)s %(title)s")
                % {
                    "person": task.decided_by,
                    "did": outcome_words(task.outcome),
                    "title": task.title,
                }
            ),
            body=_render("approvals/emails/delegation_done.txt", context),
            to=[owner.email],
        )
    transaction.on_commit(message.send, robust=True)


def send_notifications(notifications: list) -> int:
    """Email each notification to its reader once the work commits, with a plain
    link that only opens the page (deciding takes a click there); return how many."""
    messages = []
    chosen = preferences.chosen_by_each(notification.user for notification in notifications)
    for notification in notifications:
        recipient = notification.user
        if not recipient.email:
            continue
        context = {
            "recipient": recipient,
            "notifications": [notification],
            "base_url": settings.BATON_BASE_URL,
        }
        with _in_their_words(recipient, chosen):
            messages.append(_message(notification.text, context, recipient.email))
    if messages:
        transaction.on_commit(lambda: [message.send() for message in messages], robust=True)
    return len(messages)


def send_digest(*, recipient, notifications: list) -> bool:
    """Email `recipient` one digest of `notifications` once the work commits."""
    if not recipient.email or not notifications:
        return False
    count = len(notifications)
    context = {
        "recipient": recipient,
        "notifications": notifications,
        "base_url": settings.BATON_BASE_URL,
    }
    with _in_their_words(recipient, preferences.chosen_by_each([recipient])):
        subject = ngettext("%(count)d update today", "%(count)d updates today", count) % {
            "count": count
        }
        message = _message(subject, context, recipient.email)
    transaction.on_commit(message.send, robust=True)
    return True


def _message(subject: str, context: dict, address: str) -> EmailMultiAlternatives:
    message = EmailMultiAlternatives(
        subject=_subject(subject),
        body=_render("approvals/emails/notification.txt", context),
        to=[address],
    )
    message.attach_alternative(_render("approvals/emails/notification.html", context), "text/html")
    return message


def _in_their_words(
    recipient: Any, chosen: dict[Any, preferences.Chosen]
) -> AbstractContextManager[None]:
    """Write an email in its recipient's language and time zone (the site's when they
    never chose): it is read by them, not by whoever's action sent it."""
    return preferences.speaking(chosen.get(recipient.pk, preferences.Chosen()))


def _subject(text: str) -> str:
    """One line: a newline in a header would make Django refuse to send the mail.
    Bidi controls from a title show as their code points, as in the inbox (config.bidi)."""
    return "[Baton] " + neutralise_bidi(" ".join(text.split()))[:150]


def _render(template: str, context: dict) -> str:
    """Render an email's body with bidi controls from data shown as their code points."""
    return neutralise_bidi(render_to_string(template, context))
