"""Business-time arithmetic: pure functions of a calendar and a start, no clock, no database."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from workflows.calendars import (
    BusinessTime,
    Calendar,
    CalendarError,
    add_business_time,
    due_after,
    format_hours,
    parse_hours,
)

BERLIN = ZoneInfo("Europe/Berlin")
NINE_TO_FIVE = ((9 * 60, 17 * 60),)
# Friday 2026-01-09; Monday 2026-01-12 is a holiday in the calendars that say so.
FRIDAY_4PM = datetime(2026, 1, 9, 16, 0, tzinfo=BERLIN)
MONDAY = date(2026, 1, 12)


def office(*, holidays: frozenset[date] = frozenset(), **overrides) -> Calendar:
    hours = {day: NINE_TO_FIVE for day in range(5)} | overrides.pop("hours", {})
    return Calendar(name="office", time_zone="Europe/Berlin", hours=hours, holidays=holidays)


def berlin(day: int, hour: int, minute: int = 0, month: int = 1) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=BERLIN)


class TestBusinessDaysAcrossAWeekend:
    def test_two_business_days_from_friday_afternoon_fall_on_tuesday_afternoon(self):
        due = add_business_time(calendar=office(), start=FRIDAY_4PM, duration=BusinessTime(days=2))

        assert due == berlin(13, 16)

    def test_sixteen_working_hours_from_friday_afternoon_also_end_on_tuesday_afternoon(self):
        due = add_business_time(
            calendar=office(), start=FRIDAY_4PM, duration=BusinessTime(hours=16)
        )

        assert due == berlin(13, 16)

    def test_a_start_on_saturday_counts_from_monday_morning(self):
        due = add_business_time(
            calendar=office(), start=berlin(10, 11), duration=BusinessTime(days=1)
        )

        assert due == berlin(13, 9)

    def test_working_hours_spill_over_the_weekend(self):
        due = add_business_time(calendar=office(), start=FRIDAY_4PM, duration=BusinessTime(hours=2))

        assert due == berlin(12, 10)

    def test_a_duration_may_end_exactly_when_work_ends(self):
        due = add_business_time(calendar=office(), start=FRIDAY_4PM, duration=BusinessTime(hours=1))

        assert due == berlin(9, 17)

    def test_a_start_at_closing_time_counts_from_the_next_working_morning(self):
        due = add_business_time(
            calendar=office(), start=berlin(9, 17), duration=BusinessTime(minutes=30)
        )

        assert due == berlin(12, 9, 30)


class TestBusinessDaysAcrossAHoliday:
    def test_a_monday_holiday_moves_two_business_days_from_friday_to_wednesday(self):
        calendar = office(holidays=frozenset({MONDAY}))

        due = add_business_time(calendar=calendar, start=FRIDAY_4PM, duration=BusinessTime(days=2))

        assert due == berlin(14, 16)

    def test_working_hours_skip_the_weekend_and_the_holiday(self):
        calendar = office(holidays=frozenset({MONDAY}))

        due = add_business_time(calendar=calendar, start=FRIDAY_4PM, duration=BusinessTime(hours=9))

        assert due == berlin(13, 17)

    def test_a_start_on_the_holiday_counts_from_the_next_working_day(self):
        calendar = office(holidays=frozenset({MONDAY}))

        due = add_business_time(
            calendar=calendar, start=berlin(12, 10), duration=BusinessTime(days=1)
        )

        assert due == berlin(14, 9)


class TestHoursThatDifferByDay:
    def test_a_time_after_a_short_days_closing_moves_to_its_last_working_moment(self):
        calendar = office(hours={4: ((9 * 60, 13 * 60),)})  # Fridays end at 13:00

        due = add_business_time(
            calendar=calendar, start=berlin(8, 16), duration=BusinessTime(days=1)
        )

        assert due == berlin(9, 13)

    def test_a_time_in_a_lunch_break_moves_to_when_work_resumes(self):
        calendar = office(hours={1: ((9 * 60, 12 * 60), (13 * 60, 17 * 60))})

        due = add_business_time(
            calendar=calendar, start=berlin(12, 12, 30), duration=BusinessTime(days=1)
        )

        assert due == berlin(13, 13)

    def test_working_time_skips_the_lunch_break(self):
        calendar = office(hours={0: ((9 * 60, 12 * 60), (13 * 60, 17 * 60))})

        due = add_business_time(
            calendar=calendar, start=berlin(12, 11), duration=BusinessTime(hours=2)
        )

        assert due == berlin(12, 14)

    def test_days_come_before_hours(self):
        due = add_business_time(
            calendar=office(), start=FRIDAY_4PM, duration=BusinessTime(days=1, hours=2)
        )

        assert due == berlin(13, 10)


class TestTimeZones:
    def test_the_calendars_zone_decides_the_working_day_whatever_the_starts_zone(self):
        start = FRIDAY_4PM.astimezone(UTC)  # 15:00 UTC

        due = add_business_time(calendar=office(), start=start, duration=BusinessTime(days=2))

        assert due == berlin(13, 16)
        assert due.tzinfo == UTC

    def test_working_hours_keep_their_local_time_across_daylight_saving(self):
        friday = berlin(27, 16, month=3)  # clocks go forward on Sunday 29 March

        due = add_business_time(calendar=office(), start=friday, duration=BusinessTime(days=1))

        assert due == berlin(30, 16, month=3)
        assert due.astimezone(UTC) - friday.astimezone(UTC) == timedelta(days=3, hours=-1)

    def test_a_naive_start_is_refused(self):
        with pytest.raises(CalendarError, match="aware"):
            add_business_time(
                calendar=office(), start=datetime(2026, 1, 9, 16), duration=BusinessTime(days=1)
            )


class TestDueAfter:
    def test_a_plain_duration_counts_every_hour(self):
        due = due_after(duration=timedelta(days=2), start=FRIDAY_4PM, calendars={})

        assert due == berlin(11, 16)

    def test_business_time_counts_on_the_calendar_it_names(self):
        due = due_after(
            duration=BusinessTime(days=2, calendar="office"),
            start=FRIDAY_4PM,
            calendars={"office": office()},
        )

        assert due == berlin(13, 16)

    def test_a_calendar_that_is_not_there_is_named(self):
        with pytest.raises(CalendarError, match="no business calendar named 'berlin'"):
            due_after(
                duration=BusinessTime(days=2, calendar="berlin"), start=FRIDAY_4PM, calendars={}
            )


class TestCalendarsThatCannotWork:
    def test_a_calendar_without_working_hours_is_refused(self):
        with pytest.raises(CalendarError, match="no working hours"):
            Calendar(name="never", time_zone="UTC", hours={})

    def test_an_unknown_time_zone_is_refused_with_its_name(self):
        with pytest.raises(CalendarError, match="'Mars/Olympus'"):
            Calendar(name="mars", time_zone="Mars/Olympus", hours={0: NINE_TO_FIVE})

    def test_a_calendar_whose_every_day_is_a_holiday_is_refused_not_searched_forever(self):
        everyday = frozenset(date(2026, 1, 1) + timedelta(days=n) for n in range(4000))

        with pytest.raises(CalendarError, match="no working time"):
            add_business_time(
                calendar=office(holidays=everyday), start=FRIDAY_4PM, duration=BusinessTime(days=1)
            )

    def test_business_time_of_nothing_or_less_is_refused(self):
        with pytest.raises(CalendarError, match="needs days, hours or minutes"):
            BusinessTime()
        with pytest.raises(CalendarError, match="negative"):
            BusinessTime(days=-1)


class TestWorkingHoursText:
    def test_intervals_are_read_sorted_and_written_back(self):
        hours = parse_hours("13:00-17:00, 9:00-12:30")

        assert hours == ((540, 750), (780, 1020))
        assert format_hours(hours) == "09:00-12:30, 13:00-17:00"

    def test_blank_means_no_working_hours(self):
        assert parse_hours("  ") == ()

    def test_a_day_may_end_at_midnight(self):
        assert parse_hours("00:00-24:00") == ((0, 1440),)

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("9-17", "not an interval"),
            ("09:00-25:00", "past 24:00"),
            ("17:00-09:00", "ends before it starts"),
            ("09:00-12:00, 11:00-13:00", "overlap"),
            ("09:75-12:00", "minutes past 59"),
        ],
    )
    def test_bad_hours_are_refused_saying_why(self, text, reason):
        with pytest.raises(CalendarError, match=reason):
            parse_hours(text)
