"""The read side of the SLA dashboard: open human tasks against their due times, and
how long decisions take.

Every number comes from an index, so the page costs what the open tasks and the
recent decisions cost, never what the history does: open tasks by SLA state and
type read `task_state_due_idx` (state, due_at) over live tasks only; each group's
queue and each person's tasks read the inbox's entries (rows exist only for live
tasks); the oldest overdue tasks are one range of `task_deadline_due_idx`; decision
times read `task_decided_at_idx` over the last `LATENCY_WINDOW`. A task's SLA state
is `approvals.escalation.sla`'s rule, written as a query: overdue once due, due
soon within `DUE_SOON`, on time after that or with no due time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Aggregate, Count, F, FloatField, Q
from django.db.models.functions import Extract

from approvals.escalation import DUE_SOON
from approvals.models import HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES, InboxTab, TaskState

LATENCY_WINDOW = timedelta(days=7)
OVERDUE_LIST_SIZE = 10


class _Percentile(Aggregate):
    """PostgreSQL's percentile_cont over a number; `fraction` is a literal from this module."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, *, fraction: float) -> None:
        super().__init__(expression, fraction=float(fraction))


@dataclass(frozen=True)
class SlaCounts:
    """Open tasks by SLA state under one heading (a type, a group, a person)."""

    name: str
    overdue: int = 0
    due_soon: int = 0
    on_time: int = 0

    @property
    def total(self) -> int:
        return self.overdue + self.due_soon + self.on_time


@dataclass(frozen=True)
class Latency:
    """How long tasks of one type waited for their decision, in hours."""

    workflow_type: str
    decisions: int
    median_hours: float
    p95_hours: float


@dataclass
class Dashboard:
    now: datetime
    overall: SlaCounts
    by_type: list[SlaCounts] = field(default_factory=list)
    by_group: list[SlaCounts] = field(default_factory=list)
    by_assignee: list[SlaCounts] = field(default_factory=list)
    oldest_overdue: list[HumanTask] = field(default_factory=list)
    latency: list[Latency] = field(default_factory=list)


def _sla_counts(due: str, now: datetime) -> dict[str, Count]:
    """Count rows by SLA state from the due time in column `due` (NULL: no due time)."""
    return {
        "overdue": Count("pk", filter=Q(**{f"{due}__lte": now})),
        "due_soon": Count("pk", filter=Q(**{f"{due}__gt": now, f"{due}__lte": now + DUE_SOON})),
        "on_time": Count(
            "pk", filter=Q(**{f"{due}__gt": now + DUE_SOON}) | Q(**{f"{due}__isnull": True})
        ),
    }


def dashboard(*, now: datetime) -> Dashboard:
    """Read the whole dashboard in a fixed number of queries."""
    live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES)
    by_type = [
        SlaCounts(name=row.pop("workflow_type"), **row)
        for row in live.order_by()
        .values("workflow_type")
        .annotate(**_sla_counts("due_at", now))
        .order_by("workflow_type")
    ]
    overall = SlaCounts(
        name="all",
        overdue=sum(row.overdue for row in by_type),
        due_soon=sum(row.due_soon for row in by_type),
        on_time=sum(row.on_time for row in by_type),
    )
    # An inbox entry's sort_due is the task's due time, or the far future if it has none.
    by_group = [
        SlaCounts(name=row.pop("group__name"), **row)
        for row in InboxEntry.objects.filter(group__isnull=False)
        .values("group__name")
        .annotate(**_sla_counts("sort_due", now))
        .order_by("-overdue", "group__name")
    ]
    by_assignee = [
        SlaCounts(name=row.pop("user__username"), **row)
        for row in InboxEntry.objects.filter(user__isnull=False, tab=InboxTab.MINE)
        .values("user__username")
        .annotate(**_sla_counts("sort_due", now))
        .order_by("-overdue", "user__username")
    ]
    oldest_overdue = list(
        live.filter(due_at__lte=now)
        .select_related("assignee")
        .order_by("due_at", "id")[:OVERDUE_LIST_SIZE]
    )
    waited = Extract(F("decided_at") - F("created_at"), "epoch") / 3600.0
    latency = [
        Latency(
            workflow_type=row["workflow_type"],
            decisions=row["decisions"],
            median_hours=round(row["median"] or 0.0, 1),
            p95_hours=round(row["p95"] or 0.0, 1),
        )
        for row in HumanTask.objects.filter(
            state=TaskState.COMPLETED, decided_at__gte=now - LATENCY_WINDOW
        )
        .order_by()
        .values("workflow_type")
        .annotate(
            decisions=Count("pk"),
            median=_Percentile(waited, fraction=0.5),
            p95=_Percentile(waited, fraction=0.95),
        )
        .order_by("workflow_type")
    ]
    return Dashboard(
        now=now,
        overall=overall,
        by_type=by_type,
        by_group=by_group,
        by_assignee=by_assignee,
        oldest_overdue=oldest_overdue,
        latency=latency,
    )
