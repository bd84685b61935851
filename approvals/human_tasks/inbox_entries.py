"""Keep the inbox's read model in step with each task: the only writer of InboxEntry.

A live task shows in the inbox of whoever holds it ("mine"), of whoever
delegated it ("delegated") and, while open, of each candidate user and group
("queue"). The selectors read those rows through indexes in the order they are
shown; this module decides which rows a task has, with which sort keys and title.

Call `refresh` after every change to a task's state, assignee, owner,
candidates, priority or due time (its title is set once, when it opens), in the
same transaction as that change and with the task's row locked (the services'
`_lock` does both), so two refreshes of one task never interleave and a reader
never sees the rows of a half-made change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from approvals.models import HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES, InboxTab, TaskState

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
