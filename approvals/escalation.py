"""Due and escalation times, and how a task stands against them: pure functions."""

from __future__ import annotations

from datetime import datetime, timedelta

from approvals.states import Sla
from workflows.dsl import Approval

DUE_SOON = timedelta(hours=24)


def first_escalation_at(*, node: Approval, created_at: datetime) -> datetime | None:
    if not node.escalations:
        return None
    return created_at + node.escalations[0].delay()


def next_escalation_at(*, node: Approval, level: int, now: datetime) -> datetime | None:
    """Return when level `level + 1` escalates, after level `level` just fired (1-based)."""
    if level >= len(node.escalations):
        return None
    return now + node.escalations[level].delay()


def deadline_at(*, node: Approval, created_at: datetime) -> datetime | None:
    delay = node.deadline_delay()
    return created_at + delay if delay is not None else None


def sla(*, due_at: datetime | None, now: datetime) -> Sla:
    if due_at is None or due_at - now > DUE_SOON:
        return Sla.ON_TIME
    if due_at <= now:
        return Sla.OVERDUE
    return Sla.DUE_SOON
