"""Due and escalation times, and how a task stands against them: pure functions.

Durations may be business time; the calendars they name are passed in
(`workflows.due_times.load_calendars` reads them), so nothing here reads the
clock or the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from approvals.states import Sla
from workflows.calendars import Calendar, due_after
from workflows.dsl import Approval

DUE_SOON = timedelta(hours=24)

NO_CALENDARS: Mapping[str, Calendar] = {}


def first_escalation_at(
    *, node: Approval, created_at: datetime, calendars: Mapping[str, Calendar] = NO_CALENDARS
) -> datetime | None:
    if not node.escalations:
        return None
    return due_after(duration=node.escalations[0].delay(), start=created_at, calendars=calendars)


def next_escalation_at(
    *,
    node: Approval,
    level: int,
    now: datetime,
    calendars: Mapping[str, Calendar] = NO_CALENDARS,
) -> datetime | None:
    """Return when level `level + 1` escalates, after level `level` just fired (1-based)."""
    if level >= len(node.escalations):
        return None
    return due_after(duration=node.escalations[level].delay(), start=now, calendars=calendars)


def deadline_at(
    *, node: Approval, created_at: datetime, calendars: Mapping[str, Calendar] = NO_CALENDARS
) -> datetime | None:
    """Return the final deadline counted from `created_at` (or from an extension's start)."""
    delay = node.deadline_delay()
    if delay is None:
        return None
    return due_after(duration=delay, start=created_at, calendars=calendars)


def reminder_at(*, node: Approval, due_at: datetime | None, now: datetime) -> datetime | None:
    """Return when to remind the task's holders that it is due soon: `remind_before` its
    deadline, or None without either, or when that moment has already passed."""
    if node.remind_before is None or due_at is None:
        return None
    at = due_at - node.remind_before
    return at if at > now else None


def sla(*, due_at: datetime | None, now: datetime) -> Sla:
    if due_at is None or due_at - now > DUE_SOON:
        return Sla.ON_TIME
    if due_at <= now:
        return Sla.OVERDUE
    return Sla.DUE_SOON
