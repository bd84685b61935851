"""Load the business calendars a definition's durations name, for the due times they give.

The arithmetic is pure (`workflows.calendars`); this module is the one place that
reads calendars from the database, so use cases load them once, inside their
transaction, and pass them in. A plain timedelta never queries anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings

from workflows import calendars
from workflows.calendars import Calendar, Duration
from workflows.dsl import Approval, Sleep, WaitForSignal, Workflow
from workflows.models import BusinessCalendar


def load_calendars(*, durations: Iterable[Duration | None]) -> dict[str, Calendar]:
    """The calendars these durations count on, by name; none queried for plain durations.

    The `standard` calendar is built in: without its row (a database flushed by
    tests, say) it is Monday to Friday, 09:00-17:00, in `TIME_ZONE`, with no
    holidays. Any other calendar that is missing is left out, so
    `calendars.due_after` names it.
    """
    names = calendars.calendar_names(list(durations))
    if not names:
        return {}
    rows = BusinessCalendar.objects.filter(name__in=names).prefetch_related("holidays")
    found = {row.name: row.as_calendar() for row in rows}
    if calendars.STANDARD in names and calendars.STANDARD not in found:
        found[calendars.STANDARD] = BusinessCalendar(
            name=calendars.STANDARD, time_zone=settings.TIME_ZONE
        ).as_calendar(holidays=())
    return found


def due_at(*, duration: Duration, start: datetime) -> datetime:
    """When `duration` after `start` falls due (a timer's or a wait's timeout)."""
    if isinstance(duration, timedelta):
        return start + duration
    return calendars.due_after(
        duration=duration, start=start, calendars=load_calendars(durations=[duration])
    )


def approval_durations(node: Approval) -> list[Duration | None]:
    """Every duration an approval node's due times count: its escalations and deadline."""
    return [escalation.delay() for escalation in node.escalations] + [node.deadline_delay()]


def calendars_named_by(definition: Workflow) -> set[str]:
    """The names of the calendars `definition` counts business time on."""
    durations: list[Duration | None] = [definition.deadline]
    for node in definition.nodes:
        if isinstance(node, Approval):
            durations += approval_durations(node)
        if isinstance(node, Sleep):
            durations.append(node.duration)
        if isinstance(node, WaitForSignal):
            durations.append(node.timeout)
    return calendars.calendar_names(durations)
