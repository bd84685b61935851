"""Every group manager's SLA dashboard, counted at once for beat's snapshots.

A manager's page counts the tasks offered to the groups they manage. Counted
live, one dashboard costs 70 ms at ten million runs (the decision windows read
the whole company's recent decisions and test each for the groups); counting one
per manager, beat would pay that hundreds of times a minute. These queries count
every manager's numbers together instead, grouped by manager, so beat's cost
grows with the open tasks and recent decisions offered to managed groups, not
with how many managers there are: five queries whatever their number.

A group has at most one manager (`GroupManager.group` is one-to-one), so each
manager's groups are a set of their own, and a manager is the key of that set's
numbers. A task offered to two groups of one manager is counted once, as the
live page counts it: tasks and entries are counted distinct, decisions read as
distinct (manager, task) rows. Runs belong to no group: a manager's board has
no run trends. Like the operators' count, it reads the replica when there is one.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from django.db.models import F

from approvals.console import sla
from approvals.models import GroupManager, HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES, InboxTab, TaskState
from workflows import replica

# The manager of the group a candidate-group row, or an inbox entry's group, names.
_MANAGER = "group__manager_link__manager_id"


def managed_sets() -> dict[int, frozenset[int]]:
    """Return each manager's user id and the set of groups they manage."""
    found: dict[int, set[int]] = defaultdict(set)
    for manager_id, group_id in GroupManager.objects.values_list("manager_id", "group_id"):
        found[manager_id].add(group_id)
    return {manager_id: frozenset(group_ids) for manager_id, group_ids in found.items()}


@replica.reads_replica
def dashboards(*, now: datetime) -> dict[frozenset[int], sla.Dashboard]:
    """Return the dashboard of every set of groups some manager manages, as of `now`,
    as `sla.dashboard(now=now, group_ids=...)` would count each one."""
    sets = managed_sets()
    through = HumanTask.candidate_groups.through
    by_type: dict[int, list[sla.SlaCounts]] = defaultdict(list)
    for row in (
        through.objects.filter(
            humantask__state__in=LIVE_TASK_STATES, group__manager_link__isnull=False
        )
        .values(manager=F(_MANAGER), workflow_type=F("humantask__workflow_type"))
        .annotate(
            **sla.sla_counts(due="humantask__due_at", now=now, column="humantask_id", distinct=True)
        )
        .order_by("manager", "workflow_type")
    ):
        by_type[row.pop("manager")].append(sla.SlaCounts(name=row.pop("workflow_type"), **row))
    by_group: dict[int, list[sla.SlaCounts]] = defaultdict(list)
    for row in (
        InboxEntry.objects.filter(group__manager_link__isnull=False)
        .values(manager=F(_MANAGER), name=F("group__name"))
        .annotate(**sla.sla_counts(due="sort_due", now=now))
        .order_by("manager", "-overdue", "name")
    ):
        by_group[row.pop("manager")].append(sla.SlaCounts(**row))
    by_assignee: dict[int, list[sla.SlaCounts]] = defaultdict(list)
    for row in (
        InboxEntry.objects.filter(
            user__isnull=False,
            tab=InboxTab.MINE,
            task__candidate_groups__manager_link__isnull=False,
        )
        .values(
            manager=F("task__candidate_groups__manager_link__manager_id"),
            name=F("user__username"),
        )
        .annotate(**sla.sla_counts(due="sort_due", now=now, distinct=True))
        .order_by("manager", "-overdue", "name")
    ):
        by_assignee[row.pop("manager")].append(sla.SlaCounts(**row))
    days = sla.trend_days(now)
    decided = _decisions(
        since=sla.start_of(days[0]), latency_from=sla.start_of(sla.latency_since(days))
    )
    boards = {}
    for manager, group_ids in sets.items():
        per_day, waits = decided.get(manager, ({}, {}))
        boards[group_ids] = sla.assemble(
            now=now,
            days=days,
            by_type=by_type[manager],
            by_group=by_group[manager],
            by_assignee=by_assignee[manager],
            latency=[
                _latency(workflow_type, waits[workflow_type]) for workflow_type in sorted(waits)
            ],
            decided=per_day,
            group_ids=group_ids,
        )
    return boards


def _decisions(
    *, since: datetime, latency_from: datetime
) -> dict[int, tuple[dict[object, int], dict[str, list[float]]]]:
    """Return, per manager, the decisions on tasks offered to their groups per UTC day since
    `since`, and the hours each decision since `latency_from` waited, per workflow type.

    One query of distinct (manager, task) rows: a task offered to two of a manager's
    groups is one decision, and counts once in its type's percentiles.
    """
    found: dict[int, tuple[dict[object, int], dict[str, list[float]]]] = {}
    for manager, _, workflow_type, created_at, decided_at in (
        HumanTask.candidate_groups.through.objects.filter(
            humantask__state=TaskState.COMPLETED,
            humantask__decided_at__gte=since,
            group__manager_link__isnull=False,
        )
        .values_list(
            _MANAGER,
            "humantask_id",
            "humantask__workflow_type",
            "humantask__created_at",
            "humantask__decided_at",
        )
        .order_by()
        .distinct()
    ):
        per_day, waits = found.setdefault(manager, ({}, defaultdict(list)))
        day = decided_at.astimezone(UTC).date()
        per_day[day] = per_day.get(day, 0) + 1
        if decided_at >= latency_from:
            waits[workflow_type].append((decided_at - created_at).total_seconds() / 3600.0)
    return found


def _latency(workflow_type: str, hours: list[float]) -> sla.Latency:
    """The median and 95th percentile of `hours`, rounded as the live page rounds them."""
    ordered = sorted(hours)
    return sla.Latency(
        workflow_type=workflow_type,
        decisions=len(ordered),
        median_hours=round(sla.interpolated_percentile(ordered, 0.5) or 0.0, 1),
        p95_hours=round(sla.interpolated_percentile(ordered, 0.95) or 0.0, 1),
    )
