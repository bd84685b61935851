"""Emails about human tasks: plain text and HTML, sent through Django once the work commits."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse

from approvals import links
from approvals.models import HumanTask
from workflows.cleaning import neutralise_bidi


def send_escalation(*, task: HumanTask, recipients: list, now: datetime) -> int:
    """Email each recipient a decision link for `task`; return how many were queued."""
    messages = []
    for recipient in recipients:
        if not recipient.email:
            continue
        _, token = links.create_link(task=task, recipient=recipient, now=now)
        context = {
            "task": task,
            "recipient": recipient,
            "link": settings.BATON_BASE_URL + reverse("approvals:email_link", args=[token]),
            "inbox": settings.BATON_BASE_URL + reverse("approvals:task", args=[task.pk]),
            "hours": settings.BATON_EMAIL_LINK_HOURS,
        }
        message = EmailMultiAlternatives(
            subject=_subject(f"Escalated to you: {task.title}"),
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
    message = EmailMultiAlternatives(
        subject=_subject(f"{task.decided_by} {task.outcome} {task.title}"),
        body=_render("approvals/emails/delegation_done.txt", context),
        to=[owner.email],
    )
    transaction.on_commit(message.send, robust=True)


def _subject(text: str) -> str:
    """One line: a newline in a header would make Django refuse to send the mail.
    Bidi controls from a title show as their code points, as in the inbox (config.bidi)."""
    return "[Baton] " + neutralise_bidi(" ".join(text.split()))[:150]


def _render(template: str, context: dict) -> str:
    """Render an email's body with bidi controls from data shown as their code points."""
    return neutralise_bidi(render_to_string(template, context))
