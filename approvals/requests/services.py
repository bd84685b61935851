"""The use cases of a request seen from the person who asked: withdraw it, comment on it,
and the audit entry of a request started on someone else's behalf.

Starting one is `workflows.starting.start_for`, shared with the API. Like the task
services, each use case is one transaction that writes its audit entry (chained,
see approvals.audit) beside its effect, and a refusal changes nothing and says why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from approvals import audit, permissions, request_pages
from approvals.models import COMMENT_MAX_LENGTH, Comment, HumanTask
from approvals.states import LIVE_TASK_STATES, TaskKind
from workflows import engine
from workflows.cleaning import Refused, clean_text
from workflows.models import WorkflowRun
from workflows.states import RunState


def record_on_behalf(
    *,
    run: WorkflowRun,
    actor: Any,
    requester: str,
    channel: str,
    remote_addr: str | None,
    now: datetime,
) -> None:
    """Audit that `actor`, an operator, started `run` on `requester`'s behalf."""
    audit.record(
        task=run,
        event="started_on_behalf",
        actor=actor,
        channel=channel,
        now=now,
        comment=f"for {requester}",
        remote_addr=remote_addr,
        changes={"requester": [actor.get_username(), requester]},
    )


# ---------------------------------------------------------------------------
# Errors, each with the HTTP status the views answer with
# ---------------------------------------------------------------------------


class RequestError(Exception):
    status = 400


class InvalidText(RequestError):
    """A comment or reason that cannot be taken: empty, too long, or unstorable."""

    status = 422


class WithdrawRefused(RequestError):
    status = 403


class RequestEnded(RequestError):
    status = 409


class NobodyToTell(RequestError):
    status = 409

    def __init__(self) -> None:
        super().__init__(
            "Nobody works on this request yet, so there is no one to read a comment; "
            "comment once it waits for a decision."
        )


def _text(value: str, *, label: str) -> str:
    """Return a comment or reason as stored, trimmed; refuse, saying why, what
    workflows.cleaning refuses or what is longer than any comment may be."""
    try:
        return clean_text(value.strip(), max_length=COMMENT_MAX_LENGTH, multiline=True)
    except Refused as error:
        raise InvalidText(
            gettext("%(label)s %(error)s.") % {"label": label, "error": error}
        ) from None


def _lock(run_id: UUID, user: Any) -> WorkflowRun:
    """Check that `user` may see the request, then lock its run (the engine's lock order:
    the run, then its steps and tasks)."""
    request_pages.visible_request(run_id=run_id, user=user)
    return (
        WorkflowRun.objects.select_for_update(of=("self",))
        .select_related("started_by")
        .get(pk=run_id)
    )


# ---------------------------------------------------------------------------
# Withdraw
# ---------------------------------------------------------------------------


def withdraw_refusal(*, run: WorkflowRun, user: Any) -> RequestError | None:
    """Return what keeps `user` from withdrawing `run`'s request now, or None if nothing."""
    requesters = request_pages.requesters_of(run)
    if not permissions.can_withdraw(
        username=user.get_username(),
        requesters=requesters,
        is_operator=request_pages.is_request_operator(user),
    ):
        who = f" {gettext('or')} ".join(sorted(requesters)) or gettext("whoever asked for it")
        return WithdrawRefused(
            gettext("Only %(who)s, who asked for this request, or an operator may withdraw it.")
            % {"who": who}
        )
    if run.state == RunState.CANCELLING:
        return RequestEnded(
            gettext(
                "This request is being withdrawn already: its completed steps are being undone."
            )
        )
    if run.is_finished or run.state in (RunState.COMPENSATING, RunState.DEAD_LETTERED):
        state = run.get_state_display().lower()
        return RequestEnded(
            gettext("This request has already ended (%(state)s): nothing to withdraw.")
            % {"state": state}
        )
    return None


def withdraw_request(
    *,
    run_id: UUID,
    user: Any,
    reason: str = "",
    channel: str,
    remote_addr: str | None = None,
    now: datetime | None = None,
) -> WorkflowRun:
    """Withdraw a live request: cancel its run (its open tasks close, what its completed
    steps did is undone in reverse order) and audit who withdrew it and why.

    Only its requesters or an operator may; a second withdrawal is refused, saying
    the first one is under way or done.
    """
    reason = _text(reason, label=gettext("The reason"))
    now = now or timezone.now()
    with transaction.atomic():
        run = _lock(run_id, user)
        refusal = withdraw_refusal(run=run, user=user)
        if refusal is not None:
            raise refusal
        run = engine.cancel_run(run_id=run.pk, now=now)
        audit.record(
            task=run,
            event="withdrawn",
            actor=user,
            channel=channel,
            now=now,
            comment=reason,
            remote_addr=remote_addr,
        )
    return run


# ---------------------------------------------------------------------------
# Comment
# ---------------------------------------------------------------------------


def comment_on_request(
    *,
    run_id: UUID,
    user: Any,
    body: str,
    channel: str,
    remote_addr: str | None = None,
    now: datetime | None = None,
) -> list[Comment]:
    """Comment on a request: on each of its open approval tasks, so whoever decides reads
    it; once none is open (decided, or sent back for changes), on its latest one, so the
    reviewer who last had it reads it. Each comment is audited on its task."""
    body = _text(body, label=gettext("The comment"))
    if not body:
        raise InvalidText(gettext("A comment cannot be empty."))
    now = now or timezone.now()
    with transaction.atomic():
        run = _lock(run_id, user)
        reviewers = HumanTask.objects.filter(run=run, kind=TaskKind.APPROVAL)
        tasks = list(
            reviewers.select_for_update()
            .filter(state__in=LIVE_TASK_STATES)
            .order_by("created_at", "id")
        )
        if not tasks:
            latest = reviewers.order_by("-created_at", "-id").first()
            tasks = [latest] if latest else []
        if not tasks:
            raise NobodyToTell()
        comments = []
        for task in tasks:
            comments.append(
                Comment.objects.create(task=task, author=user, body=body, created_at=now)
            )
            audit.record(
                task=task,
                event="commented",
                actor=user,
                channel=channel,
                now=now,
                comment=body,
                remote_addr=remote_addr,
            )
    return comments
