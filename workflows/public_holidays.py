"""Add a country's public holidays to a business calendar, from the `holidays` package."""

from __future__ import annotations

from collections.abc import Iterable

import holidays
from django.db import transaction

from workflows.calendars import CalendarError
from workflows.models import BusinessCalendar, Holiday


def add_public_holidays(
    *,
    calendar_name: str,
    country: str,
    years: Iterable[int],
    subdivision: str | None = None,
) -> int:
    """Add the public holidays of `country` (and `subdivision`) in `years` to the calendar.

    Return how many were added: a date the calendar already has is kept as it is,
    so running it twice adds nothing. Raise CalendarError naming what is unknown.
    """
    years = sorted(set(years))
    try:
        table = holidays.country_holidays(country.upper(), subdiv=subdivision, years=years)
    except NotImplementedError as error:
        raise CalendarError(
            f"no public holidays for {country!r}"
            + (f" subdivision {subdivision!r}" if subdivision else "")
            + f": {error}"
        ) from None
    with transaction.atomic():
        calendar = BusinessCalendar.objects.select_for_update().filter(name=calendar_name).first()
        if calendar is None:
            raise CalendarError(f"no business calendar named {calendar_name!r}")
        known = set(calendar.holidays.values_list("date", flat=True))
        new = [
            Holiday(calendar=calendar, date=day, name=name[:100])
            for day, name in sorted(table.items())
            if day not in known
        ]
        Holiday.objects.bulk_create(new)
    return len(new)
