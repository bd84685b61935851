"""Every group manager's SLA dashboard, counted at once for beat's snapshots.

A manager's page counts the tasks offered to the groups they manage. Counted
live, one dashboard costs 70 ms at ten million runs (the decision windows read
the whole company's recent decisions and test each for the groups); counting one
per manager, beat would pay that hundreds of times a minute. These queries count
every manager's numbers together instead, grouped by manager, so beat's cost
grows with the open tasks and recent decisions offered to managed groups, not
with how many managers there are: six queries whatever their number.

A group has at most one manager (`GroupManager.group` is one-to-one), so each
manager's groups are a set of their own, and a manager is the key of that set's
numbers. A task offered to two groups of one manager is counted once, as the
live page counts it: tasks and entries are counted distinct, and decisions are
read through one candidate row per (manager, task), so the database counts them
per day and computes their percentiles (percentile_cont) as it does for the live
page. Runs belong to no group: a manager's board has no run trends. Like the
operators' count, it reads the replica when there is one.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime

from django.db.models import Count, Exists, F, OuterRef, QuerySet
from django.db.models.functions import TruncDate

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
    latency: dict[int, list[sla.Latency]] = defaultdict(list)
    for row in (
        _decisions(since=sla.start_of(sla.latency_since(days)))
        .values("manager", workflow_type=F("humantask__workflow_type"))
        .annotate(**sla.decision_times(task="humantask__"))
        .order_by("manager", "workflow_type")
    ):
        latency[row.pop("manager")].append(sla.latency(row))
    decided: dict[int, dict[date, int]] = defaultdict(dict)
    for row in (
        _decisions(since=sla.start_of(days[0]))
        .values("manager", day=TruncDate("humantask__decided_at", tzinfo=UTC))
        .annotate(count=Count("pk"))
        .order_by()
    ):
        decided[row["manager"]][row["day"]] = row["count"]
    return {
        group_ids: sla.assemble(
            now=now,
            days=days,
            by_type=by_type[manager],
            by_group=by_group[manager],
            by_assignee=by_assignee[manager],
            latency=latency[manager],
            decided=decided[manager],
            group_ids=group_ids,
        )
        for manager, group_ids in sets.items()
    }


def _decisions(*, since: datetime) -> QuerySet:
    """Candidate-group rows of the tasks decided since `since` (a range of
    `task_decided_at_idx`), one per (manager, task), annotated with the manager.

    A task offered to two of a manager's groups has a row for each; only the one of
    the lower group id is kept, so counting rows counts each decision once per manager,
    and a percentile over them weighs it once, as the live page's does.
    """
    through = HumanTask.candidate_groups.through
    same_manager_lower_group = through.objects.filter(
        humantask_id=OuterRef("humantask_id"),
        group_id__lt=OuterRef("group_id"),
        group__manager_link__manager_id=OuterRef("manager"),
    )
    return (
        through.objects.filter(
            humantask__state=TaskState.COMPLETED,
            humantask__decided_at__gte=since,
            group__manager_link__isnull=False,
        )
        .annotate(manager=F(_MANAGER))
        .filter(~Exists(same_manager_lower_group))
        .order_by()
    )
