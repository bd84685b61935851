"""Seeding a business calendar with a country's public holidays (and the command that does it)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from workflows.calendars import BusinessTime, CalendarError, add_business_time
from workflows.models import BusinessCalendar, Holiday
from workflows.public_holidays import add_public_holidays

pytestmark = pytest.mark.django_db


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_holidays", *args, stdout=out)
    return out.getvalue()


class TestAddPublicHolidays:
    def test_a_countrys_holidays_land_on_the_calendar_and_count_in_business_time(self):
        added = add_public_holidays(calendar_name="standard", country="DE", years=[2026])

        standard = BusinessCalendar.objects.get(name="standard")
        assert added == standard.holidays.count() >= 9
        assert standard.holidays.get(date=date(2026, 10, 3)).name == "German Unity Day"
        # Good Friday (3 April) and Easter Monday (6 April) are holidays in Germany.
        thursday = datetime(2026, 4, 2, 16, tzinfo=UTC)
        due = add_business_time(
            calendar=standard.as_calendar(), start=thursday, duration=BusinessTime(days=1)
        )
        assert due == datetime(2026, 4, 7, 16, tzinfo=UTC)

    def test_a_subdivision_adds_its_own_holidays(self):
        add_public_holidays(calendar_name="standard", country="DE", years=[2026], subdivision="BY")

        assert Holiday.objects.filter(date=date(2026, 1, 6)).exists()  # Epiphany in Bavaria

    def test_running_it_twice_adds_nothing_and_keeps_names_operators_gave(self):
        standard = BusinessCalendar.objects.get(name="standard")
        Holiday.objects.create(calendar=standard, date=date(2026, 12, 25), name="Office closed")
        first = add_public_holidays(calendar_name="standard", country="DE", years=[2026])

        second = add_public_holidays(calendar_name="standard", country="DE", years=[2026])

        assert first > 0
        assert second == 0
        assert standard.holidays.get(date=date(2026, 12, 25)).name == "Office closed"

    def test_an_unknown_country_or_calendar_is_named_and_nothing_is_added(self):
        with pytest.raises(CalendarError, match="no public holidays for 'XX'"):
            add_public_holidays(calendar_name="standard", country="XX", years=[2026])
        with pytest.raises(CalendarError, match="no business calendar named 'nowhere'"):
            add_public_holidays(calendar_name="nowhere", country="DE", years=[2026])

        assert not Holiday.objects.exists()


class TestSeedHolidaysCommand:
    def test_it_says_how_many_it_added(self):
        output = seed("standard", "--country", "FR", "--year", "2026", "--year", "2027")

        assert output.startswith("Added ")
        assert Holiday.objects.filter(date=date(2027, 7, 14)).exists()

    def test_a_bad_subdivision_is_refused_saying_why(self):
        with pytest.raises(CommandError, match="subdivision 'ZZ'"):
            seed("standard", "--country", "DE", "--subdivision", "ZZ", "--year", "2026")
