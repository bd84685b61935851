"""Add a country's public holidays to a business calendar."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.calendars import CalendarError
from workflows.public_holidays import add_public_holidays


class Command(BaseCommand):
    help = (
        "Add the public holidays of a country (and optionally one of its subdivisions) in the "
        "given years to a business calendar. Dates it already has are kept; running it twice "
        "adds nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("calendar", help="the calendar's name, e.g. standard")
        parser.add_argument("--country", required=True, help="an ISO 3166 code, e.g. DE")
        parser.add_argument(
            "--subdivision", help="a state or region of the country, e.g. BY for Bavaria"
        )
        parser.add_argument(
            "--year",
            dest="years",
            type=int,
            action="append",
            required=True,
            help="a year to add (repeat for several)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            added = add_public_holidays(
                calendar_name=options["calendar"],
                country=options["country"],
                years=options["years"],
                subdivision=options["subdivision"],
            )
        except CalendarError as error:
            raise CommandError(f"{error}.") from None
        self.stdout.write(f"Added {added} holiday(s) to {options['calendar']}.")
