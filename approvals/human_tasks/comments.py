"""Comment on a human task: a note on its page and in its audit trail, for whoever may
see it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.translation import gettext as _

from approvals import permissions
from approvals.human_tasks.acting import (
    act_of,
    audit_task,
    clean_comment,
    facts_for,
    lock_task,
    reviewer_for,
)
from approvals.human_tasks.errors import InvalidRequest, TaskNotFound
from approvals.models import (
    Comment,
    HumanTask,
)

User = get_user_model()


def comment_on_human_task(
    *, task_id: UUID, user: Any, body: str, channel: str, now: datetime | None = None, **extra: Any
) -> Comment:
    request = act_of(user, channel, now, **extra)
    body = clean_comment(body)
    if not body:
        raise InvalidRequest(_("A comment cannot be empty."))
    with transaction.atomic():
        task = lock_task(task_id)
        if not permissions.can_comment(reviewer_for(user), facts_for(task)):
            raise TaskNotFound()
        comment = Comment.objects.create(task=task, author=user, body=body, created_at=request.now)
        audit_task(task, "commented", request, comment=body)
    return comment


def comment_if_any(task: HumanTask, user: Any, body: str, now: datetime) -> None:
    body = clean_comment(body)
    if body:
        Comment.objects.create(task=task, author=user, body=body, created_at=now)


# ---------------------------------------------------------------------------
# The reviewer's own view: snooze, substitutes
# ---------------------------------------------------------------------------
