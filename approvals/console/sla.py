"""The read side of the SLA dashboard: open human tasks against their due times, and
how long decisions take.

Every number comes from an index, so the page costs what the open tasks and the
recent decisions cost, never what the history does: open tasks by SLA state and
type read `task_state_due_idx` (state, due_at) over live tasks only; each group's
queue and each person's tasks read the inbox's entries (rows exist only for live
tasks); the oldest overdue tasks are one range of `task_deadline_due_idx`; decision
times and decisions per day read `task_decided_at_idx` over a recent window. Runs
finished per day, their failures and their cycle times read `run_finished_idx`
(finished_at, carrying type, state and start) over the last `TREND_DAYS` only, so
a million older finished runs cost nothing. A task's SLA state is
`approvals.escalation.sla`'s rule, written as a query: overdue once due, due soon
within `DUE_SOON`, on time after that or with no due time.

A group manager sees the same page limited to tasks offered to the groups they
manage (`group_ids`); runs belong to no group, so their trends are for operators.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import (
    Aggregate,
    Count,
    Exists,
    F,
    FloatField,
    Func,
    OuterRef,
    Q,
    QuerySet,
)
from django.db.models.functions import TruncDate

from approvals.escalation import DUE_SOON
from approvals.models import HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES, InboxTab, Sla, TaskState
from workflows import replica
from workflows.models import WorkflowRun
from workflows.states import RunState

# Days of decision times, today included: whole UTC days, as the trends count them.
LATENCY_DAYS = 7
OVERDUE_LIST_SIZE = 10
# People listed under "Held by each person" and groups under "Waiting in each group's
# queue", most overdue first: a company has thousands of reviewers and hundreds of
# groups, and a page of thousands of rows helps no one (nor does a snapshot of them:
# 5,000 people's rows were most of the page's time at a million open tasks).
PEOPLE_SHOWN = 50
GROUPS_SHOWN = 50
# Days in the trends (decisions, runs finished, failures, cycle times), today included.
TREND_DAYS = 14
# A run that ended in one of these failed, whatever was undone after.
FAILED_RUN_STATES = (RunState.FAILED, RunState.COMPENSATED, RunState.DEAD_LETTERED)


class _Percentile(Aggregate):
    """PostgreSQL's percentile_cont over a number; `fraction` is a literal from this module.
    On SQLite (the demo), the same interpolation in Python: see `add_sqlite_functions`."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, *, fraction: float) -> None:
        super().__init__(expression, fraction=float(fraction))

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, Any]:
        template = f"{_SQLITE_PERCENTILE}(%(expressions)s, %(fraction)s)"
        return self.as_sql(compiler, connection, template=template, **extra)


class _HoursBetween(Func):
    """The hours from `start` to `end`, as a number, on PostgreSQL and on SQLite."""

    arity = 2
    output_field = FloatField()

    def __init__(self, end: str, start: str) -> None:
        super().__init__(F(end), F(start))

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, Any]:
        template = "EXTRACT(EPOCH FROM (%(expressions)s)) / 3600.0"
        return super().as_sql(compiler, connection, template=template, arg_joiner=" - ", **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, Any]:
        return super().as_sql(
            compiler,
            connection,
            template="(julianday(%(expressions)s)) * 24.0",
            arg_joiner=") - julianday(",
            **extra,
        )


_SQLITE_PERCENTILE = "baton_percentile_cont"


class _PercentileOnSqlite:
    """percentile_cont for SQLite: the value at `fraction` of the sorted values,
    interpolated between the two nearest, as PostgreSQL computes it."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.fraction = 0.5

    def step(self, value: float | None, fraction: float) -> None:
        self.fraction = fraction
        if value is not None:
            self.values.append(value)

    def finalize(self) -> float | None:
        return interpolated_percentile(sorted(self.values), self.fraction)


def interpolated_percentile(ordered: list[float], fraction: float) -> float | None:
    """The value at `fraction` of `ordered`, interpolated between its two nearest values
    (PostgreSQL's percentile_cont); None for no values."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def add_sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Give each new SQLite connection the percentile this module's queries use."""
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate(_SQLITE_PERCENTILE, 2, _PercentileOnSqlite)


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


@dataclass(frozen=True)
class DayCount:
    day: date
    count: int


@dataclass(frozen=True)
class DayOutcomes:
    """The runs of one type that finished on one day, and how many of them failed."""

    day: date
    finished: int = 0
    failed: int = 0
    compensated: int = 0
    dead_lettered: int = 0

    @property
    def failures(self) -> int:
        return self.failed + self.compensated + self.dead_lettered

    @property
    def succeeded(self) -> int:
        return self.finished - self.failures


@dataclass(frozen=True)
class RunTrend:
    """Runs of one workflow type finished per day over the trend window, oldest day first."""

    workflow_type: str
    days: list[DayOutcomes]

    @property
    def total(self) -> DayOutcomes:
        return DayOutcomes(
            day=self.days[-1].day,
            finished=sum(day.finished for day in self.days),
            failed=sum(day.failed for day in self.days),
            compensated=sum(day.compensated for day in self.days),
            dead_lettered=sum(day.dead_lettered for day in self.days),
        )

    @property
    def failure_rate(self) -> float:
        """Failed, compensated and dead-lettered runs over finished runs, in percent."""
        total = self.total
        return round(100.0 * total.failures / total.finished, 1) if total.finished else 0.0


@dataclass(frozen=True)
class CycleTime:
    """How long runs of one type took from start to end, in hours."""

    workflow_type: str
    runs: int
    median_hours: float
    p95_hours: float


@dataclass
class Dashboard:
    now: datetime
    overall: SlaCounts
    by_type: list[SlaCounts] = field(default_factory=list)
    # The `GROUPS_SHOWN` groups and `PEOPLE_SHOWN` people with the most overdue tasks
    # (then by name), and how many more there are.
    by_group: list[SlaCounts] = field(default_factory=list)
    groups_not_shown: int = 0
    by_assignee: list[SlaCounts] = field(default_factory=list)
    people_not_shown: int = 0
    oldest_overdue: list[HumanTask] = field(default_factory=list)
    latency: list[Latency] = field(default_factory=list)
    # The trend window: its first day and every day in it, oldest first.
    days: list[date] = field(default_factory=list)
    # The first day of the decision times' window (the last `LATENCY_DAYS` days).
    latency_since: date | None = None
    decisions_per_day: list[DayCount] = field(default_factory=list)
    run_trends: list[RunTrend] = field(default_factory=list)
    cycle_times: list[CycleTime] = field(default_factory=list)
    # The groups the page is limited to (a manager's), or None: everything (an operator).
    group_ids: frozenset[int] | None = None

    @property
    def shows_runs(self) -> bool:
        return self.group_ids is None

    @property
    def first_day(self) -> date:
        return self.days[0]

    @property
    def last_day(self) -> date:
        return self.days[-1]


def sla_condition(*, sla: str, now: datetime, due: str = "due_at") -> Q:
    """Select rows in SLA state `sla` (an `Sla` value) by the due time in column `due`
    (NULL: no due time): `approvals.escalation.sla`'s rule, written as a query, for the
    dashboard's counts and the lists its numbers link to alike."""
    if sla == Sla.OVERDUE:
        return Q(**{f"{due}__lte": now})
    if sla == Sla.DUE_SOON:
        return Q(**{f"{due}__gt": now, f"{due}__lte": now + DUE_SOON})
    if sla == Sla.ON_TIME:
        return Q(**{f"{due}__gt": now + DUE_SOON}) | Q(**{f"{due}__isnull": True})
    raise ValueError(f"There is no SLA state {sla!r}.")


def sla_counts(
    *, due: str, now: datetime, column: str = "pk", distinct: bool = False
) -> dict[str, Count]:
    """Count rows (or distinct values of `column`, if `distinct`) by SLA state from the
    due time in column `due`."""
    return {
        sla: Count(column, distinct=distinct, filter=sla_condition(sla=sla, now=now, due=due))
        for sla in Sla.values
    }


def trend_days(now: datetime) -> list[date]:
    """The days of the trend window (UTC), oldest first, today last."""
    today = now.astimezone(UTC).date()
    return [today - timedelta(days=back) for back in range(TREND_DAYS - 1, -1, -1)]


def start_of(day: date) -> datetime:
    """The first instant of `day`, a UTC day as the trends count them."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def latency_since(days: list[date]) -> date:
    """The first day of the decision times' window: the last `LATENCY_DAYS` of `days`."""
    return days[-LATENCY_DAYS]


def decision_times(*, task: str = "") -> dict[str, Aggregate]:
    """Count decided tasks and the median and 95th percentile of the hours each waited for
    its decision, over rows that are one per task; `task` prefixes the task's columns
    ("humantask__" from a candidate row). Read back by `latency`."""
    waited = _HoursBetween(f"{task}decided_at", f"{task}created_at")
    return {
        "decisions": Count("pk"),
        "median": _Percentile(waited, fraction=0.5),
        "p95": _Percentile(waited, fraction=0.95),
    }


def latency(row: dict[str, Any]) -> Latency:
    """One type's decision times from a row counted by `decision_times`, rounded as the
    page shows them."""
    return Latency(
        workflow_type=row["workflow_type"],
        decisions=row["decisions"],
        median_hours=round(row["median"] or 0.0, 1),
        p95_hours=round(row["p95"] or 0.0, 1),
    )


def assemble(
    *,
    now: datetime,
    days: list[date],
    by_type: list[SlaCounts],
    by_group: list[SlaCounts],
    by_assignee: list[SlaCounts],
    latency: list[Latency],
    decided: dict[date, int],
    group_ids: frozenset[int] | None,
    oldest_overdue: list[HumanTask] | None = None,
    run_trends: list[RunTrend] | None = None,
    cycle_times: list[CycleTime] | None = None,
) -> Dashboard:
    """Make the dashboard of these counts: the overall numbers from the types', the
    groups and people the page lists (most overdue first, as given) and how many more
    there are, and a count for every day of the window, `decided` (day to decisions)
    or none. The one rule for a live page and beat's count of every manager's."""
    return Dashboard(
        now=now,
        overall=SlaCounts(
            name="all",
            overdue=sum(row.overdue for row in by_type),
            due_soon=sum(row.due_soon for row in by_type),
            on_time=sum(row.on_time for row in by_type),
        ),
        by_type=by_type,
        by_group=by_group[:GROUPS_SHOWN],
        groups_not_shown=max(0, len(by_group) - GROUPS_SHOWN),
        by_assignee=by_assignee[:PEOPLE_SHOWN],
        people_not_shown=max(0, len(by_assignee) - PEOPLE_SHOWN),
        oldest_overdue=oldest_overdue or [],
        latency=latency,
        days=days,
        latency_since=latency_since(days),
        decisions_per_day=[DayCount(day=day, count=decided.get(day, 0)) for day in days],
        run_trends=run_trends or [],
        cycle_times=cycle_times or [],
        group_ids=group_ids,
    )


def offered_to(*, group_ids: Collection[int], task: str = "pk") -> Exists:
    """Whether the task in column `task` is offered to one of `group_ids`."""
    through = HumanTask.candidate_groups.through
    return Exists(through.objects.filter(humantask_id=OuterRef(task), group_id__in=group_ids))


def scoped(tasks: QuerySet[HumanTask], *, group_ids: Collection[int] | None) -> QuerySet[HumanTask]:
    """Limit `tasks` to those a group manager sees (offered to one of `group_ids`);
    None: an operator's view, everything."""
    return tasks if group_ids is None else tasks.filter(offered_to(group_ids=group_ids))


@replica.reads_replica
def dashboard(*, now: datetime, group_ids: Collection[int] | None = None) -> Dashboard:
    """Read the whole dashboard in a fixed number of queries; with `group_ids`, only
    the tasks offered to those groups (a manager's view) and no run trends."""
    scope = None if group_ids is None else frozenset(group_ids)
    live = scoped(HumanTask.objects.filter(state__in=LIVE_TASK_STATES), group_ids=scope)
    by_type = [
        SlaCounts(name=row.pop("workflow_type"), **row)
        for row in live.order_by()
        .values("workflow_type")
        .annotate(**sla_counts(due="due_at", now=now))
        .order_by("workflow_type")
    ]
    # An inbox entry's sort_due is the task's due time, or the far future if it has none.
    by_group = [
        SlaCounts(name=row.pop("group__name"), **row)
        for row in (
            InboxEntry.objects.filter(group__isnull=False)
            if scope is None
            else InboxEntry.objects.filter(group_id__in=scope)
        )
        .values("group__name")
        .annotate(**sla_counts(due="sort_due", now=now))
        .order_by("-overdue", "group__name")
    ]
    by_assignee = [
        SlaCounts(name=row.pop("user__username"), **row)
        for row in (
            InboxEntry.objects.filter(user__isnull=False, tab=InboxTab.MINE)
            if scope is None
            else InboxEntry.objects.filter(
                offered_to(group_ids=scope, task="task_id"), user__isnull=False, tab=InboxTab.MINE
            )
        )
        .values("user__username")
        .annotate(**sla_counts(due="sort_due", now=now))
        .order_by("-overdue", "user__username")
    ]
    oldest_overdue = list(
        live.filter(due_at__lte=now)
        .select_related("assignee")
        .order_by("due_at", "id")[:OVERDUE_LIST_SIZE]
    )
    days = trend_days(now)
    since = start_of(days[0])
    latencies = [
        latency(row)
        for row in scoped(
            HumanTask.objects.filter(
                state=TaskState.COMPLETED, decided_at__gte=start_of(latency_since(days))
            ),
            group_ids=scope,
        )
        .order_by()
        .values("workflow_type")
        .annotate(**decision_times())
        .order_by("workflow_type")
    ]
    decided = {
        row["day"]: row["count"]
        for row in scoped(
            HumanTask.objects.filter(state=TaskState.COMPLETED, decided_at__gte=since),
            group_ids=scope,
        )
        .order_by()
        .values(day=TruncDate("decided_at", tzinfo=UTC))
        .annotate(count=Count("pk"))
    }
    return assemble(
        now=now,
        days=days,
        by_type=by_type,
        by_group=by_group,
        by_assignee=by_assignee,
        latency=latencies,
        decided=decided,
        group_ids=scope,
        oldest_overdue=oldest_overdue,
        run_trends=run_trends(days=days) if scope is None else None,
        cycle_times=cycle_times(since=since) if scope is None else None,
    )


def finished_runs(*, since: datetime) -> QuerySet[WorkflowRun]:
    """Runs that ended at or after `since`: a range of `run_finished_idx`."""
    return WorkflowRun.objects.filter(finished_at__gte=since).order_by()


def run_trends(*, days: list[date]) -> list[RunTrend]:
    """Runs finished per type and day over `days`, with their failures, in one query."""
    since = start_of(days[0])
    found: dict[str, dict[date, DayOutcomes]] = {}
    for row in (
        finished_runs(since=since)
        .values("workflow_type", day=TruncDate("finished_at", tzinfo=UTC))
        .annotate(
            finished=Count("pk"),
            failed=Count("pk", filter=Q(state=RunState.FAILED)),
            compensated=Count("pk", filter=Q(state=RunState.COMPENSATED)),
            dead_lettered=Count("pk", filter=Q(state=RunState.DEAD_LETTERED)),
        )
    ):
        workflow_type = row.pop("workflow_type")
        found.setdefault(workflow_type, {})[row["day"]] = DayOutcomes(**row)
    return [
        RunTrend(
            workflow_type=workflow_type,
            days=[by_day.get(day, DayOutcomes(day=day)) for day in days],
        )
        for workflow_type, by_day in sorted(found.items())
    ]


def cycle_times(*, since: datetime) -> list[CycleTime]:
    """The median and 95th percentile of start-to-end times of runs finished since
    `since`, per type, in one query."""
    took = _HoursBetween("finished_at", "created_at")
    return [
        CycleTime(
            workflow_type=row["workflow_type"],
            runs=row["runs"],
            median_hours=round(row["median"] or 0.0, 2),
            p95_hours=round(row["p95"] or 0.0, 2),
        )
        for row in finished_runs(since=since)
        .values("workflow_type")
        .annotate(
            runs=Count("pk"),
            median=_Percentile(took, fraction=0.5),
            p95=_Percentile(took, fraction=0.95),
        )
        .order_by("workflow_type")
    ]
