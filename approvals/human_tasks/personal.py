"""What a reviewer arranges for themselves: snoozing a task out of sight for a while, and
a substitute who receives their new tasks while they are away.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.utils import timezone

from approvals.human_tasks.acting import user_named, visible_task
from approvals.human_tasks.errors import InvalidRequest
from approvals.models import (
    Snooze,
    Substitution,
)

User = get_user_model()


def snooze_human_task(*, task_id: UUID, user: Any, until: datetime) -> Snooze:
    """Hide a task from your lists until `until`; it comes back by itself."""
    visible_task(task_id=task_id, user=user)
    if until <= timezone.now():
        raise InvalidRequest("Snooze until a time in the future.")
    snooze, _ = Snooze.objects.update_or_create(
        task_id=task_id, user=user, defaults={"until": until}
    )
    return snooze


def set_substitution(
    *, user: Any, substitute_username: str, starts_at: datetime, ends_at: datetime
) -> Substitution:
    """While away, new tasks for `user` go to the substitute, visibly."""
    substitute = user_named(substitute_username)
    if substitute.pk == user.pk:
        raise InvalidRequest("Choose someone else as your substitute.")
    if ends_at <= starts_at:
        raise InvalidRequest("The substitution must end after it starts.")
    return Substitution.objects.create(
        user=user, substitute=substitute, starts_at=starts_at, ends_at=ends_at
    )


def substitute_for(user: Any, now: datetime) -> Any | None:
    line = (
        Substitution.objects.filter(user=user, starts_at__lte=now, ends_at__gt=now)
        .select_related("substitute")
        .order_by("-starts_at")
        .first()
    )
    return line.substitute if line else None
