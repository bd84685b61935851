"""What a reviewer arranges for themselves: snoozing a task out of sight for a while,
saved inbox filters, and a substitute who receives their new tasks while they are away
and, if they choose, the tasks they already hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone

from approvals.human_tasks.acting import user_named, visible_task
from approvals.human_tasks.errors import InvalidRequest, TaskError
from approvals.human_tasks.handover import delegate_human_task
from approvals.models import (
    HumanTask,
    SavedFilter,
    Snooze,
    Substitution,
)
from approvals.states import TaskState
from workflows.cleaning import Refused, clean_text

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


def save_filter(*, user: Any, name: str, query: str) -> SavedFilter:
    """Keep an inbox query (its query string) under a name, replacing one of that name."""
    name, query = name.strip(), query.strip()
    for label, value, field_name in (("name", name, "name"), ("query", query, "query")):
        try:
            clean_text(value, max_length=SavedFilter._meta.get_field(field_name).max_length)
        except Refused as error:
            raise InvalidRequest(f"The filter {label} {error}.") from None
    if not name:
        raise InvalidRequest("Give the filter a name to save it.")
    saved, _ = SavedFilter.objects.update_or_create(user=user, name=name, defaults={"query": query})
    return saved


def delete_filter(*, user: Any, filter_id: int) -> bool:
    """Forget one of `user`'s saved filters; False if they have none of that id."""
    deleted, _ = SavedFilter.objects.filter(user=user, pk=filter_id).delete()
    return bool(deleted)


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
        Substitution.objects.in_force(now)
        .filter(user=user)
        .select_related("substitute")
        .order_by("-starts_at")
        .first()
    )
    return line.substitute if line else None


def held_tasks(user: Any) -> QuerySet[HumanTask]:
    """The live tasks `user` holds and may hand on: claimed by them or assigned to them.
    Tasks others delegated to them are not theirs to pass on: their owners hold them."""
    return HumanTask.objects.filter(
        assignee=user, state__in=(TaskState.OPEN, TaskState.CLAIMED)
    ).order_by("created_at", "pk")


@dataclass
class Handover:
    """What handing over your tasks did: the tasks delegated, and those kept, with why."""

    delegated: list[HumanTask] = field(default_factory=list)
    kept: list[tuple[HumanTask, str]] = field(default_factory=list)


def hand_over_held_tasks(
    *, user: Any, to_username: str, channel: str, now: datetime | None = None
) -> Handover:
    """Delegate every task `user` holds to `to_username`, each on its own: `user` stays
    the owner, is told when it is decided, and may reassign it to themselves. A task the
    substitute may not decide (separation of duties, or someone `user` may not hand
    tasks to) stays with `user`, and the answer says why; the others go all the same."""
    handover = Handover()
    for task in list(held_tasks(user)):
        try:
            handover.delegated.append(
                delegate_human_task(
                    task_id=task.pk,
                    user=user,
                    to_username=to_username,
                    channel=channel,
                    comment="Handed over while away.",
                    now=now,
                )
            )
        except TaskError as refusal:
            handover.kept.append((task, str(refusal)))
    return handover
