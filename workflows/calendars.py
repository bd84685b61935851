"""Business time: add working days and hours to a moment on a calendar (pure functions).

A calendar has working hours per weekday, a time zone and holidays. "Escalate after
2 business days" started on Friday 16:00 falls due on Tuesday 16:00; with Monday a
holiday, on Wednesday 16:00. Nothing here reads the clock or the database: the
calendar and the start are passed in (`workflows.due_times` loads calendars).

The rules, in the calendar's own time zone:

- A start outside working time (the evening, a weekend, a holiday) first moves to
  the next working moment.
- `days` moves to the same time of day that many working days later. On a day
  whose hours differ, the time moves into them: to the first hour if it is
  earlier, the last if it is later, and past a break to the hour work resumes.
- `hours` and `minutes` then count working time only: Friday 16:00 plus 2 working
  hours, with work ending at 17:00 and resuming Monday at 09:00, is Monday 10:00.

Working intervals are half-open: work ending at 17:00 means 17:00 is not working
time, but a duration may end exactly there (16:00 plus 1 hour is 17:00 that day).
Local times are read with `fold=0`: working hours that cross a daylight-saving
jump (02:00-03:00 on that night) are taken at their face value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# The calendar a BusinessTime names when it names none; a migration creates it.
STANDARD = "standard"

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

# A calendar whose working time cannot be found within this many days is refused
# rather than searched forever (every day a holiday, or no working weekday).
_SEARCH_DAYS = 3 * 366

MINUTES_PER_DAY = 24 * 60

Interval = tuple[int, int]  # minutes since local midnight: [start, end)


class CalendarError(ValueError):
    """A calendar or working-hours text that cannot be used, saying why."""


@dataclass(frozen=True)
class BusinessTime:
    """A duration counted in a business calendar's working time, e.g. `BusinessTime(days=2)`.

    Use it wherever a definition takes a due time, an escalation delay or a
    deadline. `calendar` names a calendar operators keep in the admin.
    """

    days: int = 0
    hours: int = 0
    minutes: int = 0
    calendar: str = STANDARD

    def __post_init__(self) -> None:
        if min(self.days, self.hours, self.minutes) < 0:
            raise CalendarError(f"{self} is negative: business time only counts forward")
        if not self.days and not self.hours and not self.minutes:
            raise CalendarError("BusinessTime needs days, hours or minutes")

    def __str__(self) -> str:
        parts = [
            f"{count} business {unit}{'' if count == 1 else 's'}"
            for count, unit in ((self.days, "day"), (self.hours, "hour"), (self.minutes, "minute"))
            if count
        ]
        return f"{' '.join(parts) or '0 business minutes'} ({self.calendar} calendar)"

    @property
    def working_time(self) -> timedelta:
        """The hours and minutes part, counted in working time after the days."""
        return timedelta(hours=self.hours, minutes=self.minutes)


# A definition's duration: wall-clock time, or business time on a calendar.
Duration = timedelta | BusinessTime


@dataclass(frozen=True)
class Calendar:
    """Working hours per weekday (0 is Monday), a time zone and holiday dates."""

    name: str
    time_zone: str
    hours: Mapping[int, tuple[Interval, ...]]
    holidays: frozenset[date] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        zone(self.time_zone)  # refuse an unknown zone now, not when a task is due
        if not any(self.hours.get(day) for day in range(7)):
            raise CalendarError(f"calendar {self.name!r} has no working hours on any weekday")

    @property
    def zone(self) -> ZoneInfo:
        return zone(self.time_zone)

    def intervals_on(self, day: date) -> tuple[Interval, ...]:
        """The working intervals of `day`; none on a holiday."""
        if day in self.holidays:
            return ()
        return self.hours.get(day.weekday(), ())


def zone(name: str) -> ZoneInfo:
    """The time zone called `name`, or CalendarError naming it."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CalendarError(
            f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)"
        ) from None


_INTERVAL = re.compile(r"^(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})$")


def parse_hours(text: str) -> tuple[Interval, ...]:
    """Read working hours written as `09:00-12:00, 13:00-17:00`; blank means none.

    Raise CalendarError saying which part is wrong: a malformed interval, an hour
    past 24:00, an interval that ends before it starts, or intervals that overlap.
    """
    intervals: list[Interval] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        match = _INTERVAL.match(part)
        if match is None:
            raise CalendarError(f"{part!r} is not an interval like 09:00-17:00")
        start_hour, start_minute, end_hour, end_minute = map(int, match.groups())
        if start_minute > 59 or end_minute > 59:
            raise CalendarError(f"{part!r} has minutes past 59")
        start, end = start_hour * 60 + start_minute, end_hour * 60 + end_minute
        if end > MINUTES_PER_DAY or start >= MINUTES_PER_DAY:
            raise CalendarError(f"{part!r} goes past 24:00")
        if end <= start:
            raise CalendarError(f"{part!r} ends before it starts")
        intervals.append((start, end))
    intervals.sort()
    for (_, first_end), (second_start, _) in pairwise(intervals):
        if second_start < first_end:
            raise CalendarError(f"working hours {text!r} overlap")
    return tuple(intervals)


def format_hours(intervals: tuple[Interval, ...]) -> str:
    """Write intervals back as `parse_hours` reads them."""
    return ", ".join(f"{_clock(start)}-{_clock(end)}" for start, end in intervals)


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def add_business_time(*, calendar: Calendar, start: datetime, duration: BusinessTime) -> datetime:
    """Return the moment `duration` of working time after `start`, on `calendar`.

    `start` must be aware; the result is in its time zone.
    """
    if start.tzinfo is None:
        raise CalendarError("business time needs an aware start (with a time zone)")
    local = start.astimezone(calendar.zone).replace(tzinfo=None)
    cursor = _next_working_moment(calendar, local)
    for _ in range(duration.days):
        cursor = _same_time_next_working_day(calendar, cursor)
    if duration.working_time:
        cursor = _add_working_time(calendar, cursor, duration.working_time)
    return cursor.replace(tzinfo=calendar.zone).astimezone(start.tzinfo)


def due_after(
    *, duration: Duration, start: datetime, calendars: Mapping[str, Calendar]
) -> datetime:
    """Return when `duration` after `start` falls due: wall-clock, or business time.

    `calendars` holds at least the calendar a BusinessTime names; a missing one
    raises CalendarError naming it.
    """
    if isinstance(duration, timedelta):
        return start + duration
    calendar = calendars.get(duration.calendar)
    if calendar is None:
        raise CalendarError(
            f"no business calendar named {duration.calendar!r}: add it in the admin "
            "(Workflows > Business calendars)"
        )
    return add_business_time(calendar=calendar, start=start, duration=duration)


def calendar_names(durations: list[Duration | None]) -> set[str]:
    """The calendars these durations count on."""
    return {duration.calendar for duration in durations if isinstance(duration, BusinessTime)}


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time())


def _intervals(calendar: Calendar, day: date) -> list[tuple[datetime, datetime]]:
    midnight = _midnight(day)
    return [
        (midnight + timedelta(minutes=start), midnight + timedelta(minutes=end))
        for start, end in calendar.intervals_on(day)
    ]


def _days_from(calendar: Calendar, first: date):
    for offset in range(_SEARCH_DAYS):
        yield first + timedelta(days=offset)
    raise CalendarError(
        f"calendar {calendar.name!r} has no working time in the {_SEARCH_DAYS} days "
        f"after {first}: check its holidays"
    )


def _next_working_moment(calendar: Calendar, local: datetime) -> datetime:
    """`local` itself if it is working time, else the next moment that is."""
    for day in _days_from(calendar, local.date()):
        for start, end in _intervals(calendar, day):
            if local < end:
                return max(local, start)
    raise AssertionError("unreachable")  # _days_from raises first


def _same_time_next_working_day(calendar: Calendar, local: datetime) -> datetime:
    days = _days_from(calendar, local.date() + timedelta(days=1))
    for day in days:
        intervals = _intervals(calendar, day)
        if intervals:
            wanted = datetime.combine(day, local.time())
            return _into_working_hours(intervals, wanted)
    raise AssertionError("unreachable")


def _into_working_hours(intervals: list[tuple[datetime, datetime]], wanted: datetime) -> datetime:
    """`wanted`, moved into the day's working hours if it falls outside them."""
    if wanted < intervals[0][0]:
        return intervals[0][0]
    for start, end in intervals:
        if wanted < start:
            return start  # in a break: when work resumes
        if wanted <= end:
            return wanted
    return intervals[-1][1]  # after the day's work: its last moment


def _add_working_time(calendar: Calendar, local: datetime, amount: timedelta) -> datetime:
    for day in _days_from(calendar, local.date()):
        for start, end in _intervals(calendar, day):
            if end <= local:
                continue
            begin = max(local, start)
            if begin + amount <= end:
                return begin + amount
            amount -= end - begin
    raise AssertionError("unreachable")
