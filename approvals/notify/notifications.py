"""Tell people what happened to their tasks and requests: in the app, and by email.

The services (a task opened, delegated, reassigned or decided) and the engine's
run-end hook call in here inside their own transaction, so a notification exists
exactly when the change it tells of committed. Each is shown in the app until
read; it is emailed once the transaction commits to people who want one email
each, saved for the daily digest of those who want a digest, and never emailed to
those who turned email off. Nobody is told about their own action, and a task's
requesters are never told to decide it (separation of duties bars them anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals import preferences
from approvals.models import HumanTask, Notification, NotificationSettings, Substitution
from approvals.notify import emails
from approvals.states import EmailMode, NoticeKind, Outcome, outcome_words
from workflows.models import WorkflowRun
from workflows.states import EventKind

# The unread count in the header is exact below this and "99+" at it.
UNREAD_CAP = 100
# How many notifications the list shows, newest first.
LIST_SIZE = 50

_RUN_ENDINGS = {
    EventKind.COMPLETED: gettext_lazy("Your %(kind)s request finished"),
    EventKind.FAILED: gettext_lazy("Your %(kind)s request failed"),
    EventKind.COMPENSATED: gettext_lazy("Your %(kind)s request failed and was rolled back"),
    EventKind.CANCELLED: gettext_lazy("Your %(kind)s request was cancelled"),
    EventKind.DEAD_LETTERED: gettext_lazy("Your %(kind)s request failed and waits for an operator"),
}
# A notification's text, written for each reader in their own language (`_notify`).
Text = Callable[[], str]


def task_opened(*, task: HumanTask, requesters: Iterable[str], now: datetime) -> None:
    """Tell the assignee of a new task, or every candidate (people and members of
    groups) of an open one, that it waits for them."""
    title = {"title": task.title}
    kind: str
    text: Text
    if task.assignee_id is not None:
        kind = NoticeKind.TASK_ASSIGNED
        text = lambda: _("New task for you: %(title)s") % title  # noqa: E731
    else:
        kind = NoticeKind.TASK_QUEUED
        text = lambda: _("New task in your queue: %(title)s") % title  # noqa: E731
    people = _holders(task, now)
    barred = set(requesters)
    people = [person for person in people if person.get_username() not in barred]
    _notify(people, kind=kind, text=text, url=_task_url(task), task=task, now=now)


def task_due_soon(*, task: HumanTask, requesters: Iterable[str], now: datetime) -> None:
    """Remind whoever holds the task (or, while it is open, every candidate) of its
    deadline: Approval.remind_before."""
    barred = set(requesters)

    def text() -> str:
        if task.due_at is None:
            return _("Due soon: %(title)s") % {"title": task.title}
        # In the reader's time zone, named, as `_notify` writes each reader's text.
        when = formats.date_format(timezone.localtime(task.due_at), _("Y-m-d H:i T"))
        return _("Due %(when)s: %(title)s") % {"when": when, "title": task.title}

    _notify(
        [person for person in _holders(task, now) if person.get_username() not in barred],
        kind=NoticeKind.TASK_DUE_SOON,
        text=text,
        url=_task_url(task),
        task=task,
        now=now,
    )


def task_handed(*, task: HumanTask, to: Any, by: Any, delegated: bool, now: datetime) -> None:
    """Tell the person a task was delegated or reassigned to."""
    giver = by.get_full_name() or by.get_username()
    words = {"person": giver, "title": task.title}
    kind: str
    text: Text
    if delegated:
        kind = NoticeKind.TASK_DELEGATED
        text = lambda: _("%(person)s delegated a task to you: %(title)s") % words  # noqa: E731
    else:
        kind = NoticeKind.TASK_ASSIGNED
        text = lambda: _("%(person)s assigned a task to you: %(title)s") % words  # noqa: E731
    _notify([to] if to != by else [], kind=kind, text=text, url=_task_url(task), task=task, now=now)


def request_decided(*, task: HumanTask, now: datetime) -> None:
    """Tell the person who started the task's run how the task was decided."""
    run = task.run
    requester = run.started_by
    if requester is None or requester == task.decided_by:
        return
    if task.outcome == Outcome.CHANGES_REQUESTED:
        return  # the revision task tells them (changes_requested), with its link
    decider = task.decided_by.get_full_name() or task.decided_by.get_username()

    def text() -> str:
        words = {"person": decider, "title": task.title, "comment": task.comment}
        if task.outcome == Outcome.APPROVED:
            said = _("%(person)s approved “%(title)s”") % words
        elif task.outcome == Outcome.REJECTED:
            said = _("%(person)s rejected “%(title)s”") % words
        else:
            said = _("%(person)s %(did)s “%(title)s”") % {
                **words,
                "did": outcome_words(task.outcome),
            }
        if not task.comment:
            return said
        return _("%(said)s: %(comment)s") % {"said": said, "comment": task.comment}

    _notify(
        [requester],
        kind=NoticeKind.REQUEST_DECIDED,
        text=text,
        url=_request_url(run),
        run=run,
        now=now,
    )


def changes_requested(
    *, task: HumanTask, requesters: Sequence[Any], url: str, now: datetime
) -> None:
    """Tell a request's requesters that a reviewer sent it back: the revision `task`'s
    title says who and why; `url` is where they change and resubmit it."""
    _notify(
        list(requesters),
        kind=NoticeKind.CHANGES_REQUESTED,
        text=lambda: task.title,
        url=url,
        task=task,
        run=task.run,
        now=now,
    )


def runs_ended(*, ended: Sequence[tuple[WorkflowRun, str]], now: datetime) -> None:
    """Tell each ended run's requester how it ended (the engine's run-end hook)."""
    for run, kind in ended:
        if run.started_by_id is None:
            continue
        words = {"kind": run.workflow_type.replace("_", " ")}
        _notify(
            [run.started_by],
            kind=NoticeKind.REQUEST_ENDED,
            text=lambda ending=_RUN_ENDINGS[kind], words=words: ending % words,
            url=_request_url(run),
            run=run,
            now=now,
        )


def unread_count(*, user: Any) -> int:
    """How many of `user`'s notifications are unread, counted up to UNREAD_CAP."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    return unread.order_by("-created_at").values("pk")[:UNREAD_CAP].count()


def recent(*, user: Any) -> list[Notification]:
    return list(Notification.objects.filter(user=user)[:LIST_SIZE])


def mark_read(*, user: Any, now: datetime, notification_id: int | None = None) -> int:
    """Mark one of `user`'s notifications read, or all of them; return how many changed."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if notification_id is not None:
        unread = unread.filter(pk=notification_id)
    return unread.update(read_at=now)


def email_mode(*, user: Any) -> str:
    found = NotificationSettings.objects.filter(user=user).values_list("email", flat=True)
    return next(iter(found), EmailMode.IMMEDIATE)


def set_email_mode(*, user: Any, mode: str) -> None:
    if mode not in EmailMode.values:
        raise ValueError(
            _("Unknown email choice %(mode)s; choose one of %(modes)s.")
            % {"mode": repr(mode), "modes": ", ".join(EmailMode)}
        )
    NotificationSettings.objects.update_or_create(user=user, defaults={"email": mode})


def send_digests(*, now: datetime) -> int:
    """Email each person who wants a daily digest what they were told and not yet
    emailed; return how many digests were sent. Safe to run twice: what a digest
    covered is marked emailed in the same transaction."""
    sent = 0
    readers = NotificationSettings.objects.filter(email=EmailMode.DAILY).values_list(
        "user_id", flat=True
    )
    for user_id in readers:
        with transaction.atomic():
            unsent = list(
                Notification.objects.select_for_update(skip_locked=True)
                .filter(user_id=user_id, emailed_at__isnull=True, created_at__lte=now)
                .select_related("user")
                .order_by("created_at", "id")
            )
            if not unsent:
                continue
            Notification.objects.filter(pk__in=[item.pk for item in unsent]).update(emailed_at=now)
            if emails.send_digest(recipient=unsent[0].user, notifications=unsent):
                sent += 1
    return sent


def _notify(
    people: Sequence[Any],
    *,
    kind: str,
    text: Text,
    url: str,
    now: datetime,
    task: HumanTask | None = None,
    run: WorkflowRun | None = None,
) -> None:
    if not people:
        return
    modes = dict(
        NotificationSettings.objects.filter(user__in=people).values_list("user_id", "email")
    )
    # Each reader's text in their language and time zone (one query for all of them).
    chosen = preferences.chosen_by_each(people)
    texts = {}
    for person in people:
        with preferences.speaking(chosen.get(person.pk, preferences.Chosen())):
            texts[person.pk] = " ".join(text().split())[:300]
    notifications = [
        Notification(
            user=person,
            kind=kind,
            text=texts[person.pk],
            url=url,
            task=task,
            run=run,
            created_at=now,
            # Only a digest waits to be emailed; nobody else's ever is.
            emailed_at=None if modes.get(person.pk) == EmailMode.DAILY else now,
        )
        for person in people
    ]
    Notification.objects.bulk_create(notifications)
    emails.send_notifications(
        [
            notification
            for notification in notifications
            if modes.get(notification.user_id, EmailMode.IMMEDIATE) == EmailMode.IMMEDIATE
        ]
    )


def _holders(task: HumanTask, now: datetime) -> list[Any]:
    """Who the task waits for: its assignee, or every candidate person and group member
    but those away at `now` (out of office), unless all of them are, so that an open task
    is always announced to someone."""
    if task.assignee_id is not None:
        return [task.assignee]
    candidates = list(
        get_user_model()
        .objects.filter(Q(candidate_tasks=task) | Q(groups__candidate_tasks=task), is_active=True)
        .annotate(away=Exists(Substitution.objects.in_force(now).filter(user=OuterRef("pk"))))
        .distinct()
    )
    present = [person for person in candidates if not person.away]
    return present or candidates


def _task_url(task: HumanTask) -> str:
    return reverse("approvals:task", args=[task.pk])


def _request_url(run: WorkflowRun) -> str:
    return reverse("requests:detail", args=[run.pk])
