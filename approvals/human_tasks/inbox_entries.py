"""Keep the inbox's read model in step with each task: the only writer of InboxEntry.

A live task shows in the inbox of whoever holds it ("mine"), of whoever
delegated it ("delegated") and, while open, of each candidate user and group
("queue"). The selectors read those rows through indexes in the order they are
shown; this module decides which rows a task has, with which sort keys, title and
view values (what the task's row shows: `view_of`).

Call `refresh` after every change to a task (its state, version, holders,
candidates, priority, due time, node, or its run's version), in the same
transaction as that change and with the task's row locked (the services' `_lock`
does both), so two refreshes of one task never interleave and a reader never sees
the rows of a half-made change. A user's new username reaches the rows naming
them through `rename` (on the user's save: approvals.apps connects it).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from approvals.models import HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES, InboxTab, TaskState
from workflows.models import WorkflowRun

# Stands in for "no due time" so that those tasks sort last, through an index.
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


def sort_due(due_at: datetime | None) -> datetime:
    return FAR_FUTURE if due_at is None else due_at


def sort_priority(priority: int) -> int:
    return -priority


def refresh(task: HumanTask) -> None:
    """Rewrite the task's inbox entries from its current row and candidates."""
    InboxEntry.objects.filter(task=task).delete()
    InboxEntry.objects.bulk_create(entries_for(task))


def refresh_all(*, batch: int = 500) -> int:
    """Rewrite the entries of every live task, `batch` tasks a transaction in creation
    order, each batch's tasks locked first as the services lock a task they change (so a
    change made meanwhile is never overwritten with older values); return how many."""
    live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES).order_by("created_at", "id")
    done, after = 0, None
    while True:
        with transaction.atomic():
            page = (
                live
                if after is None
                else live.filter(
                    Q(created_at__gt=after[0]) | Q(created_at=after[0], id__gt=after[1])
                )
            )
            tasks = list(
                page.select_related(
                    "run__started_by", "assignee", "owner", "substitute_for"
                ).select_for_update(of=("self",))[:batch]
            )
            for task in tasks:
                refresh(task)
        if not tasks:
            return done
        done += len(tasks)
        after = (tasks[-1].created_at, tasks[-1].pk)


def refresh_run(run: WorkflowRun) -> None:
    """Rewrite the entries of `run`'s live tasks, locking each: after a change to the run
    (its version), in its transaction."""
    live = HumanTask.objects.filter(run=run, state__in=LIVE_TASK_STATES)
    for task in live.select_related("assignee", "owner", "substitute_for").select_for_update(
        of=("self",)
    ):
        task.run = run
        refresh(task)


def rename(*, user_id: int, username: str) -> int:
    """Show `username` in the entries of the live tasks that name user `user_id` (its
    holder, delegator, the one it stands in for, or whoever started its run); return
    how many entries changed."""
    naming = Q(run__started_by_id=user_id)
    for field in _USER_COLUMNS:
        naming |= Q(**{f"{field}_id": user_id})
    changed = 0
    with transaction.atomic():
        # Their tasks locked first, in the order the other lockers take them, so a
        # service's refresh that read the old name cannot write it back after this.
        tasks = list(
            HumanTask.objects.filter(naming, state__in=LIVE_TASK_STATES)
            .order_by("created_at", "id")
            .select_for_update(of=("self",))
            .values_list("pk", flat=True)
        )
        entries = InboxEntry.objects.filter(task_id__in=tasks)
        for field in _USER_COLUMNS:
            changed += entries.filter(**{f"task__{field}_id": user_id}).update(**{field: username})
        changed += entries.filter(task__run__started_by_id=user_id).update(started_by=username)
    return changed


# The task's columns naming a person whose username its entries show.
_USER_COLUMNS = ("assignee", "owner", "substitute_for")


def view_of(task: HumanTask) -> dict[str, Any]:
    """What the task's row shows, besides its sort keys and title (InboxEntry's view
    values), from the task, its run and the people they name (read if not loaded)."""

    def name(user: Any) -> str:
        return user.get_username() if user is not None else ""

    run = task.run
    return {
        "run_id": task.run_id,
        "node": task.node,
        "kind": task.kind,
        "state": task.state,
        "outcome": task.outcome,
        "version": task.version,
        "workflow_version": run.workflow_version,
        "assignee": name(task.assignee),
        "owner": name(task.owner),
        "substitute_for": name(task.substitute_for),
        "started_by": name(run.started_by),
    }


def entries_for(task: HumanTask) -> list[InboxEntry]:
    """Return the entries the task should have (unsaved); none once it is finished."""
    if task.state not in LIVE_TASK_STATES:
        return []
    keys: dict[str, Any] = {
        "task": task,
        "sort_due": sort_due(task.due_at),
        "sort_priority": sort_priority(task.priority),
        "workflow_type": task.workflow_type,
        "title": task.title,
        "data": task.search_data,
        **view_of(task),
    }
    if task.state == TaskState.OPEN:
        users = task.candidate_users.values_list("id", flat=True)
        groups = task.candidate_groups.values_list("id", flat=True)
        return [InboxEntry(tab=InboxTab.QUEUE, user_id=user_id, **keys) for user_id in users] + [
            InboxEntry(tab=InboxTab.QUEUE, group_id=group_id, **keys) for group_id in groups
        ]
    entries = []
    if task.assignee_id is not None:
        entries.append(InboxEntry(tab=InboxTab.MINE, user_id=task.assignee_id, **keys))
    if task.state == TaskState.DELEGATED and task.owner_id is not None:
        entries.append(InboxEntry(tab=InboxTab.DELEGATED, user_id=task.owner_id, **keys))
    return entries


def note_rename(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """Before a user is saved (pre_save): note whether their username changes, so that
    `follow_rename` shows the new one once it is saved. Reads the stored username only
    when the save may write it (never for a sign-in's last_login)."""
    update_fields = kwargs.get("update_fields")
    instance._inbox_renamed = False
    if (
        raw
        or instance.pk is None
        or (update_fields is not None and "username" not in update_fields)
    ):
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("username", flat=True).first()
    instance._inbox_renamed = stored is not None and stored != instance.get_username()


def follow_rename(sender: Any, instance: Any, **kwargs: Any) -> None:
    """After a user is saved (post_save): if their username changed, show it in the inbox."""
    if getattr(instance, "_inbox_renamed", False):
        instance._inbox_renamed = False
        rename(user_id=instance.pk, username=instance.get_username())
