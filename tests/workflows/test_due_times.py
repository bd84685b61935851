"""Due times from a definition's durations: business time on the calendars stored in the
database, for approvals and for timers alike, and no query for a plain duration."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workflows import due_times
from workflows.calendars import BusinessTime
from workflows.models import BusinessCalendar, Holiday
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db

FRIDAY_4PM = datetime(2026, 1, 9, 16, 0, tzinfo=UTC)


class TestDueAt:
    def test_a_plain_duration_reads_no_calendar(self):
        with CaptureQueriesContext(connection) as queries:
            due = due_times.due_at(duration=timedelta(hours=2), start=FRIDAY_4PM)

        assert due == FRIDAY_4PM + timedelta(hours=2)
        assert len(queries) == 0

    def test_business_time_counts_the_stored_calendar_and_its_holidays(self):
        standard = BusinessCalendar.objects.get(name="standard")
        Holiday.objects.create(calendar=standard, date=date(2026, 1, 12))

        due = due_times.due_at(duration=BusinessTime(hours=2), start=FRIDAY_4PM)

        assert due == datetime(2026, 1, 13, 10, 0, tzinfo=UTC)

    def test_the_definitions_naming_a_calendar_are_found(self):
        from workflows import registry

        named = due_times.calendars_named_by(registry.get("test_business_deadline"))

        assert named == {"berlin-office"}


class TestTimersInBusinessTime:
    def test_a_nap_of_two_working_hours_from_friday_afternoon_ends_on_monday_morning(
        self, workflow_env
    ):
        env = workflow_env.travel_to(FRIDAY_4PM)
        run = env.start("test_business_timers", {})
        nap = run.steps.get(node="nap")
        assert nap.due_at == datetime(2026, 1, 12, 10, 0, tzinfo=UTC)

        env.travel_to(datetime(2026, 1, 12, 9, 59, tzinfo=UTC))
        nap.refresh_from_db()
        assert nap.state == StepState.WAITING
        env.advance(minutes=1)

        nap.refresh_from_db()
        assert nap.state == StepState.SUCCEEDED
        assert run.steps.get(node="await_go").due_at == datetime(2026, 1, 13, 10, tzinfo=UTC)

    def test_a_wait_times_out_after_one_working_day(self, workflow_env):
        env = workflow_env.travel_to(FRIDAY_4PM)
        run = env.start("test_business_timers", {})

        env.travel_to(datetime(2026, 1, 13, 10, 0, tzinfo=UTC))

        env.assert_path(run, "nap", "await_go", "timed_out")
        env.assert_state(run, RunState.SUCCEEDED)


@pytest.mark.django_db(transaction=True)
class TestTheStandardCalendar:
    """The calendar BusinessTime counts on by default is there after every migrate."""

    def test_a_flush_leaves_it_in_place_with_its_working_week(self):
        from django.core.management import call_command

        call_command("flush", interactive=False, verbosity=0)

        standard = BusinessCalendar.objects.get(name="standard")
        assert standard.description == "Monday to Friday, 09:00-17:00"
        assert due_times.due_at(duration=BusinessTime(hours=2), start=FRIDAY_4PM) == datetime(
            2026, 1, 12, 10, 0, tzinfo=UTC
        )

    def test_migrate_makes_it_again_and_keeps_one_an_operator_changed(self):
        from django.core.management import call_command

        BusinessCalendar.objects.filter(name="standard").delete()
        call_command("migrate", verbosity=0)
        assert BusinessCalendar.objects.filter(name="standard").count() == 1

        BusinessCalendar.objects.filter(name="standard").update(description="Ours")
        call_command("migrate", verbosity=0)
        assert BusinessCalendar.objects.get(name="standard").description == "Ours"
