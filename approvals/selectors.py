"""The read side of the inbox: a reviewer's tabs, filtered, sorted and paged by keyset.

Every list is one query over indexed columns whatever the number of tasks, and
the three tab counts are one more; rows carry what they show (no query per row).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from approvals.escalation import DUE_SOON
from approvals.models import HumanTask, Snooze
from approvals.states import LIVE_TASK_STATES, Priority, Sla, TaskState
from workflows import registry
from workflows.dsl import Approval

TABS = {
    "mine": "My tasks",
    "queue": "My groups' queue",
    "delegated": "Delegated by me",
}
SORTS = {"due": "Due time", "priority": "Priority"}
PAGE_SIZE = 25
_FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class InboxFilters:
    tab: str = "mine"
    workflow_type: str = ""
    priority: int | None = None
    sla: str = ""
    search: str = ""
    sort: str = "due"
    cursor: str = ""

    @classmethod
    def from_query(cls, query: Any) -> InboxFilters:
        """Read filters from a QueryDict, ignoring values that make no sense."""
        query = {key: value.replace("\x00", "") for key, value in query.items()}
        priority = query.get("priority", "")
        return cls(
            tab=query.get("tab") if query.get("tab") in TABS else "mine",
            workflow_type=query.get("type", "")[:100],
            priority=int(priority) if priority in {str(p) for p in Priority.values} else None,
            sla=query.get("sla") if query.get("sla") in Sla.values else "",
            search=query.get("q", "").strip()[:200],
            sort=query.get("sort") if query.get("sort") in SORTS else "due",
            cursor=query.get("cursor", "")[:500],
        )


@dataclass
class Page:
    tasks: list[HumanTask]
    next_cursor: str = ""
    filters: InboxFilters = field(default_factory=InboxFilters)


def _candidate(user: Any, group_ids: list[int]) -> Q:
    through_users = HumanTask.candidate_users.through.objects.filter(
        humantask_id=OuterRef("pk"), user_id=user.pk
    )
    through_groups = HumanTask.candidate_groups.through.objects.filter(
        humantask_id=OuterRef("pk"), group_id__in=group_ids
    )
    return Q(Exists(through_users)) | Q(Exists(through_groups))


def _tab_filters(user: Any, group_ids: list[int]) -> dict[str, Q]:
    return {
        "mine": Q(assignee=user, state__in=[TaskState.CLAIMED, TaskState.DELEGATED]),
        "queue": Q(state=TaskState.OPEN) & _candidate(user, group_ids),
        "delegated": Q(owner=user, state=TaskState.DELEGATED),
    }


def _not_snoozed(user: Any, now: datetime) -> Q:
    snoozed = Snooze.objects.filter(task_id=OuterRef("pk"), user=user, until__gt=now)
    return ~Q(Exists(snoozed))


def tab_counts(*, user: Any, now: datetime) -> dict[str, int]:
    """Count each tab's tasks in one query."""
    group_ids = list(user.groups.values_list("id", flat=True))
    tabs = _tab_filters(user, group_ids)
    live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES)
    counts = live.filter(_not_snoozed(user, now)).aggregate(
        **{name: Count("id", filter=condition) for name, condition in tabs.items()}
    )
    return {name: counts[name] for name in TABS}


def inbox(*, user: Any, filters: InboxFilters, now: datetime, limit: int = PAGE_SIZE) -> Page:
    """Return one page of a tab, after `filters.cursor`, and the cursor of the next page."""
    group_ids = list(user.groups.values_list("id", flat=True))
    tasks = (
        HumanTask.objects.filter(_tab_filters(user, group_ids)[filters.tab])
        .filter(_not_snoozed(user, now))
        .select_related("assignee", "owner", "substitute_for")
        .annotate(due_sort=Coalesce("due_at", Value(_FAR_FUTURE)))
    )
    tasks = _filtered(tasks, filters, now)
    key, descending = ("priority", True) if filters.sort == "priority" else ("due_sort", False)
    after = _decode(filters.cursor, key)
    if after is not None:
        value, last_id = after
        beyond = Q(**{f"{key}__lt" if descending else f"{key}__gt": value})
        tasks = tasks.filter(beyond | Q(**{key: value, "id__gt": last_id}))
    rows = list(tasks.order_by(f"-{key}" if descending else key, "id")[: limit + 1])
    next_cursor = ""
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        value = last.priority if key == "priority" else last.due_sort.isoformat()
        next_cursor = _encode([value, str(last.pk)])
    return Page(tasks=rows, next_cursor=next_cursor, filters=filters)


def _filtered(tasks: QuerySet[HumanTask], filters: InboxFilters, now: datetime) -> QuerySet:
    if filters.workflow_type:
        tasks = tasks.filter(workflow_type=filters.workflow_type)
    if filters.priority is not None:
        tasks = tasks.filter(priority=filters.priority)
    if filters.sla == Sla.OVERDUE:
        tasks = tasks.filter(due_at__lte=now)
    elif filters.sla == Sla.DUE_SOON:
        tasks = tasks.filter(due_at__gt=now, due_at__lte=now + DUE_SOON)
    elif filters.sla == Sla.ON_TIME:
        tasks = tasks.filter(Q(due_at__isnull=True) | Q(due_at__gt=now + DUE_SOON))
    if filters.search:
        if connection.vendor == "postgresql":
            tasks = tasks.annotate(search=SearchVector("title", config="simple")).filter(
                search=SearchQuery(filters.search, config="simple", search_type="websearch")
            )
        else:
            tasks = tasks.filter(title__icontains=filters.search)
    return tasks


def _encode(value: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def _decode(cursor: str, key: str) -> tuple[Any, UUID] | None:
    """Read a cursor made by `inbox`; a damaged one starts from the first page."""
    if not cursor:
        return None
    try:
        value, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        last_id = UUID(last_id)
        if key == "due_sort":
            # In UTC: the database refuses offsets past +-16 h, which Python accepts.
            moment = datetime.fromisoformat(value)
            return (
                moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
            ), last_id
        return (value, last_id) if isinstance(value, int) else None
    except (ValueError, TypeError, AttributeError):
        return None


def workflow_types() -> list[str]:
    """The workflow types the filter offers: those with an approval node."""
    return sorted(
        {
            workflow.name
            for workflow in registry.all_definitions()
            if any(isinstance(node, Approval) for node in workflow.nodes)
        }
    )


def snooze_choices(now: datetime) -> dict[str, datetime]:
    tomorrow = (now + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    return {
        "1 hour": now + timedelta(hours=1),
        "Tomorrow 09:00": tomorrow,
        "Next week": now + timedelta(days=7),
    }
