"""Hand a human task to someone else: delegate it (it comes back to you once decided) or
reassign it, each only to someone who may decide it and whom you may hand tasks to.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.translation import gettext as _

from approvals import permissions
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.acting import (
    act_of,
    audit_task,
    authorised,
    refuse_handing_to,
    user_named,
)
from approvals.human_tasks.comments import comment_if_any
from approvals.human_tasks.errors import InvalidRequest
from approvals.models import (
    HumanTask,
)
from approvals.notify import notifications

User = get_user_model()


# ---------------------------------------------------------------------------
# Delegation and reassignment
# ---------------------------------------------------------------------------


def delegate_human_task(
    *,
    task_id: UUID,
    user: Any,
    to_username: str,
    channel: str,
    comment: str = "",
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Let someone else decide for you; you stay the owner and are told when it is done."""
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        task = authorised(
            task_id,
            request,
            permissions.can_delegate,
            "Only this task's reviewer can delegate it.",
            action="delegate",
        )
        delegate = user_named(to_username)
        if delegate.pk == user.pk:
            raise InvalidRequest(_("You cannot delegate a task to yourself."))
        refuse_handing_to(task, user, delegate, "delegate")
        task.delegate(owner=user, delegate=delegate)
        task.save()
        inbox_entries.refresh(task)
        notifications.task_handed(task=task, to=delegate, by=user, delegated=True, now=request.now)
        comment_if_any(task, user, comment, request.now)
        audit_task(
            task,
            "delegated",
            request,
            comment=comment,
            changes={"assignee": [user.get_username(), to_username]},
        )
    return task


def reassign_human_task(
    *,
    task_id: UUID,
    user: Any,
    to_username: str,
    channel: str,
    comment: str = "",
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Hand the task to someone else for good (the owner, a group's manager or an operator)."""
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        task = authorised(
            task_id,
            request,
            permissions.can_reassign,
            "Only the task's owner, its group's manager or an operator can reassign it.",
            action="reassign",
        )
        new_assignee = user_named(to_username)
        previous = task.assignee.get_username() if task.assignee else None
        if new_assignee.pk == task.assignee_id:
            raise InvalidRequest(
                _("The task is already with %(person)s.") % {"person": to_username}
            )
        refuse_handing_to(task, user, new_assignee, "reassign")
        task.reassign(to=new_assignee, now=request.now)
        task.save()
        task.candidate_users.add(new_assignee)
        inbox_entries.refresh(task)
        notifications.task_handed(
            task=task, to=new_assignee, by=user, delegated=False, now=request.now
        )
        comment_if_any(task, user, comment, request.now)
        audit_task(
            task,
            "reassigned",
            request,
            comment=comment,
            changes={"assignee": [previous, to_username]},
        )
    return task
