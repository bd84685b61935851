"""The SLA dashboard for operators, computed by beat and read back as one row.

An operator's dashboard counts every open task by SLA state, type, group and
person, and the runs and decisions of the trend windows: work that grows with
the open tasks (102,000 of them at a million runs made the page 2.3 times as
slow as with 2,500). Beat computes it every `BATON_SLA_SNAPSHOT_SECONDS`
(`baton.refresh_sla_snapshot`) and saves it in `SlaSnapshot`; the page then
reads that row by its key, plus the ten oldest overdue tasks (one short range of
an index), and says what time its numbers are from. A snapshot older than twice
the interval (beat stopped) is ignored and the page counts live, as it did
before; a group manager's page is always live, since it counts only the tasks of
their groups.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, fields
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings

from approvals.console import sla
from approvals.models import HumanTask, SlaSnapshot
from approvals.states import LIVE_TASK_STATES
from workflows import replica

OPERATORS = "operators"


def refresh(*, now: datetime) -> SlaSnapshot:
    """Compute the operators' dashboard as of `now` and save it; return the snapshot.

    Safe to run twice or at once in two workers: the later save wins, and both
    hold numbers that were true when they were counted.
    """
    board = sla.dashboard(now=now)
    snapshot, _ = SlaSnapshot.objects.update_or_create(
        scope=OPERATORS, defaults={"computed_at": now, "data": to_data(board)}
    )
    return snapshot


@replica.reads_replica
def dashboard(*, now: datetime, group_ids: Collection[int] | None = None) -> sla.Dashboard:
    """The dashboard a person sees at `now`: an operator's from the snapshot while it
    is fresh, with the oldest overdue tasks read live; anything else counted live."""
    if group_ids is None:
        fresh_after = now - timedelta(seconds=2 * settings.BATON_SLA_SNAPSHOT_SECONDS)
        snapshot = SlaSnapshot.objects.filter(scope=OPERATORS, computed_at__gte=fresh_after).first()
        # One saved by other code (before a deploy, within the last interval) is counted
        # live instead, as a stale one is: its shape may not be this code's.
        if snapshot is not None and set(snapshot.data) == _SAVED:
            board = from_data(snapshot.data)
            board.oldest_overdue = list(
                HumanTask.objects.filter(state__in=LIVE_TASK_STATES, due_at__lte=now)
                .select_related("assignee")
                .order_by("due_at", "id")[: sla.OVERDUE_LIST_SIZE]
            )
            return board
    return sla.dashboard(now=now, group_ids=group_ids)


# What a snapshot holds: the dashboard's fields but those read live or not saved.
_SAVED = {item.name for item in fields(sla.Dashboard)} - {"oldest_overdue", "group_ids"}


def to_data(board: sla.Dashboard) -> dict[str, Any]:
    """The dashboard's numbers as JSON (its oldest overdue tasks are read live)."""
    data = asdict(board)
    data.pop("oldest_overdue")
    data.pop("group_ids")
    return _jsonable(data)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def from_data(data: dict[str, Any]) -> sla.Dashboard:
    """Rebuild the dashboard `to_data` saved."""

    def day(text: str) -> date:
        return date.fromisoformat(text)

    def counts(rows: list[dict[str, Any]]) -> list[sla.SlaCounts]:
        return [sla.SlaCounts(**row) for row in rows]

    return sla.Dashboard(
        now=datetime.fromisoformat(data["now"]),
        overall=sla.SlaCounts(**data["overall"]),
        by_type=counts(data["by_type"]),
        by_group=counts(data["by_group"]),
        groups_not_shown=data["groups_not_shown"],
        by_assignee=counts(data["by_assignee"]),
        people_not_shown=data["people_not_shown"],
        latency=[sla.Latency(**row) for row in data["latency"]],
        days=[day(text) for text in data["days"]],
        latency_since=day(data["latency_since"]) if data["latency_since"] else None,
        decisions_per_day=[
            sla.DayCount(day=day(row["day"]), count=row["count"])
            for row in data["decisions_per_day"]
        ],
        run_trends=[
            sla.RunTrend(
                workflow_type=trend["workflow_type"],
                days=[sla.DayOutcomes(**{**one, "day": day(one["day"])}) for one in trend["days"]],
            )
            for trend in data["run_trends"]
        ],
        cycle_times=[sla.CycleTime(**row) for row in data["cycle_times"]],
        group_ids=None,
    )
