"""The SLA dashboard for operators and for group managers, computed by beat and read
back as one row.

An operator's dashboard counts every open task by SLA state, type, group and
person, and the runs and decisions of the trend windows: work that grows with
the open tasks (102,000 of them at a million runs made the page 2.3 times as
slow as with 2,500). Beat computes it every `BATON_SLA_SNAPSHOT_SECONDS`
(`baton.refresh_sla_snapshot`) and saves it in `SlaSnapshot`; the page then
reads that row by its key, plus the ten oldest overdue tasks (one short range of
an index), and says what time its numbers are from. A snapshot older than twice
the interval (beat stopped) is ignored and the page counts live, as it did
before.

A group manager's page counts only the tasks offered to the groups they manage:
beat keeps one snapshot per set of groups some manager manages (a task offered to
two of them counts once), keyed by the set (`scope_key`), counted for all sets at
once (`sla_managers`), and deletes the snapshots of sets no one manages any more.
The manager's page reads the snapshot of exactly their set, with the oldest overdue
tasks of their groups read live; without a fresh one it counts live.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields, is_dataclass
from datetime import date, datetime, timedelta
from hashlib import sha256
from typing import Any

from django.conf import settings

from approvals.console import sla, sla_managers
from approvals.models import HumanTask, SlaSnapshot
from approvals.states import LIVE_TASK_STATES
from workflows import replica

OPERATORS = "operators"
GROUPS = "groups:"
# SlaSnapshot.scope's length: a longer list of ids is kept as a hash of it.
_SCOPE_LENGTH = 40


def scope_key(group_ids: Collection[int] | None) -> str:
    """The snapshot key of a page limited to `group_ids` (None: the operators'): the
    sorted ids while they fit, else a hash of them (marked "#", so never the same)."""
    if group_ids is None:
        return OPERATORS
    ids = ",".join(str(group_id) for group_id in sorted(group_ids))
    if len(GROUPS) + len(ids) <= _SCOPE_LENGTH:
        return f"{GROUPS}{ids}"
    hashed = sha256(ids.encode()).hexdigest()
    return f"{GROUPS}#{hashed[: _SCOPE_LENGTH - len(GROUPS) - 1]}"


def refresh(*, now: datetime) -> SlaSnapshot:
    """Compute the operators' dashboard and every managed set's as of `now` and save
    them; delete the snapshots of sets no one manages any more; return the operators'.

    Safe to run twice or at once in two workers: the later save wins, and both
    hold numbers that were true when they were counted.
    """
    boards = {scope_key(None): sla.dashboard(now=now)}
    for group_ids, board in sla_managers.dashboards(now=now).items():
        boards[scope_key(group_ids)] = board
    snapshots = [
        SlaSnapshot(scope=scope, computed_at=now, data=to_data(board))
        for scope, board in boards.items()
    ]
    SlaSnapshot.objects.bulk_create(
        snapshots,
        update_conflicts=True,
        unique_fields=["scope"],
        update_fields=["computed_at", "data"],
    )
    SlaSnapshot.objects.filter(scope__startswith=GROUPS).exclude(scope__in=list(boards)).delete()
    return snapshots[0]


@replica.reads_replica
def dashboard(*, now: datetime, group_ids: Collection[int] | None = None) -> sla.Dashboard:
    """The dashboard a person sees at `now`: from the snapshot of their scope (everything,
    or exactly their groups) while it is fresh, with the oldest overdue tasks read
    live; counted live without one."""
    scope = None if group_ids is None else frozenset(group_ids)
    fresh_after = now - timedelta(seconds=2 * settings.BATON_SLA_SNAPSHOT_SECONDS)
    snapshot = SlaSnapshot.objects.filter(
        scope=scope_key(scope), computed_at__gte=fresh_after
    ).first()
    # One saved by other code (before a deploy, within the last interval) is counted
    # live instead, as a stale one is: its shape may not be this code's. One of other
    # groups (a key's hash shared) is counted live too.
    if (
        snapshot is not None
        and set(snapshot.data) == _SAVED
        and snapshot.data["group_ids"] == (None if scope is None else sorted(scope))
    ):
        board = from_data(snapshot.data)
        board.oldest_overdue = list(
            sla.scoped(
                HumanTask.objects.filter(state__in=LIVE_TASK_STATES, due_at__lte=now),
                group_ids=scope,
            )
            .select_related("assignee")
            .order_by("due_at", "id")[: sla.OVERDUE_LIST_SIZE]
        )
        return board
    return sla.dashboard(now=now, group_ids=scope)


# What a snapshot holds: the dashboard's fields but the oldest overdue tasks (read live).
_SAVED = {item.name for item in fields(sla.Dashboard)} - {"oldest_overdue"}


def to_data(board: sla.Dashboard) -> dict[str, Any]:
    """The dashboard's numbers as JSON (its oldest overdue tasks are read live), and its
    groups, sorted (None: the operators')."""
    data = {name: _jsonable(getattr(board, name)) for name in _SAVED - {"group_ids"}}
    data["group_ids"] = None if board.group_ids is None else sorted(board.group_ids)
    return data


def _jsonable(value: Any) -> Any:
    # Field by field rather than dataclasses.asdict, which deep-copies every value
    # first: beat saves hundreds of boards a minute when a company has hundreds of
    # managers.
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: _jsonable(getattr(value, item.name)) for item in fields(value)}
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
        group_ids=None if data["group_ids"] is None else frozenset(data["group_ids"]),
    )
