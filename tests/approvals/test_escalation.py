"""Escalations and final deadlines, fired by the engine's sweep with a controlled clock."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from auditlog.models import LogEntry

from approvals.escalation import sla
from approvals.models import HumanTask
from approvals.states import Outcome, Sla, TaskState
from workflows import engine
from workflows.calendars import CalendarError
from workflows.models import BusinessCalendar, Holiday, WorkflowRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


def audit_events(task) -> list[str]:
    return [
        e.additional_data["event"] for e in LogEntry.objects.get_for_object(task).order_by("id")
    ]


# A Friday afternoon: the standard calendar works Monday to Friday, 09:00-17:00 (UTC here).
FRIDAY_4PM = datetime(2026, 1, 9, 16, 0, tzinfo=UTC)
TUESDAY_4PM = datetime(2026, 1, 13, 16, 0, tzinfo=UTC)


def submitted_on_friday(start, drive):
    """carol's approval of alice's expense, submitted on Friday at 16:00."""
    expense = {"requester": "alice", "title": "Train", "amount": "120.00", "currency": "EUR"}
    run = drive(start("expense", expense, now=FRIDAY_4PM), now=FRIDAY_4PM)
    return run.human_tasks.get(node="manager_approval")


@pytest.fixture
def friday_task(people, start, drive):
    return submitted_on_friday(start, drive)


class TestEscalation:
    def test_after_two_business_days_the_manager_task_opens_to_finance_with_an_email(
        self, manager_task, carol, bob, mailoutbox, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=manager_task.escalate_at + timedelta(minutes=1))

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.OPEN
        assert manager_task.escalation_level == 1
        assert manager_task.escalate_at is None
        assert {g.name for g in manager_task.candidate_groups.all()} == {"finance"}
        assert carol in manager_task.candidate_users.all()
        assert sorted(m.to[0] for m in mailoutbox) == ["bob@example.com", "carol@example.com"]
        assert "/email/" in mailoutbox[0].body
        assert mailoutbox[0].alternatives[0][1] == "text/html"
        assert audit_events(manager_task) == ["created", "escalated"]

    def test_a_friday_afternoon_expense_escalates_on_tuesday_afternoon(self, friday_task):
        assert friday_task.created_at == FRIDAY_4PM
        assert friday_task.escalate_at == TUESDAY_4PM

    def test_the_weekend_does_not_count(self, friday_task):
        engine.sweep(now=FRIDAY_4PM + timedelta(hours=49))  # Sunday 17:00

        friday_task.refresh_from_db()
        assert friday_task.escalation_level == 0

    def test_a_monday_holiday_moves_the_escalation_to_wednesday(self, people, start, drive):
        standard = BusinessCalendar.objects.get(name="standard")
        Holiday.objects.create(calendar=standard, date=date(2026, 1, 12), name="A holiday")

        task = submitted_on_friday(start, drive)

        assert task.escalate_at == TUESDAY_4PM + timedelta(days=1)

    def test_nothing_escalates_before_its_time(self, friday_task):
        engine.sweep(now=TUESDAY_4PM - timedelta(minutes=1))

        friday_task.refresh_from_db()
        assert friday_task.escalation_level == 0

    def test_two_sweeps_escalate_once(self, manager_task, mailoutbox):
        later = manager_task.escalate_at + timedelta(hours=1)

        engine.sweep(now=later)
        engine.sweep(now=later)

        manager_task.refresh_from_db()
        assert manager_task.escalation_level == 1
        assert audit_events(manager_task).count("escalated") == 1

    def test_the_number_of_business_days_comes_from_settings(self, settings, people, start, drive):
        settings.BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS = 1

        task = submitted_on_friday(start, drive)

        assert task.escalate_at == TUESDAY_4PM - timedelta(days=1)

    def test_without_its_row_the_standard_calendar_keeps_its_built_in_hours(
        self, people, start, drive
    ):
        BusinessCalendar.objects.filter(name="standard").delete()

        task = submitted_on_friday(start, drive)

        assert task.escalate_at == TUESDAY_4PM


class TestOtherCalendars:
    def test_a_deadline_counts_the_working_hours_of_the_calendar_it_names(self, people, start):
        BusinessCalendar.objects.create(name="berlin-office", time_zone="Europe/Berlin")

        run = start("test_business_deadline", {}, now=FRIDAY_4PM)  # 17:00 in Berlin

        # From Monday 09:00 in Berlin, four working hours: 13:00 there, 12:00 UTC.
        assert run.human_tasks.get().due_at == datetime(2026, 1, 12, 12, 0, tzinfo=UTC)

    def test_a_calendar_nobody_made_is_named_and_the_start_writes_nothing(self, people, start):
        with pytest.raises(CalendarError, match="no business calendar named 'berlin-office'"):
            start("test_business_deadline", {}, now=FRIDAY_4PM)

        assert not WorkflowRun.objects.filter(workflow_type="test_business_deadline").exists()
        assert not HumanTask.objects.exists()


class TestFinalDeadline:
    def test_past_the_deadline_the_expense_is_auto_rejected_by_the_system(
        self, manager_task, drive
    ):
        engine.sweep(now=manager_task.created_at + timedelta(days=7, minutes=1))

        manager_task.refresh_from_db()
        run = drive(manager_task.run)
        assert (manager_task.state, manager_task.outcome) == (TaskState.COMPLETED, Outcome.REJECTED)
        assert manager_task.decided_by.username == "baton-system"
        assert manager_task.comment == "No decision by the deadline."
        assert run.state == RunState.SUCCEEDED
        assert "pay" not in run.results

    def test_a_deadline_that_fails_the_run_undoes_it(self, people, start, drive, effects):
        run = drive(start("test_deadline_fails", {}))
        task = run.human_tasks.get()

        engine.sweep(now=task.created_at + timedelta(hours=2))

        run = drive(run)
        task.refresh_from_db()
        assert task.state == TaskState.EXPIRED
        assert run.state == RunState.COMPENSATED
        assert run.steps.get(node="sign_off").last_error["type"] == "DeadlinePassed"
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}

    def test_a_deadline_that_keeps_waiting_escalates_again_and_waits(self, people, start, drive):
        run = drive(start("test_deadline_waits", {}))
        task = run.human_tasks.get()

        engine.sweep(now=task.created_at + timedelta(hours=2))

        task.refresh_from_db()
        run.refresh_from_db()
        assert task.state == TaskState.OPEN
        assert task.escalation_level == 1
        assert task.due_at > task.created_at + timedelta(hours=2)
        assert run.steps.get(node="sign_off").state == StepState.WAITING


class TestSla:
    def test_states_against_the_due_time(self, manager_task):
        due = manager_task.due_at

        assert sla(due_at=due, now=due - timedelta(days=2)) == Sla.ON_TIME
        assert sla(due_at=due, now=due - timedelta(hours=3)) == Sla.DUE_SOON
        assert sla(due_at=due, now=due) == Sla.OVERDUE
        assert sla(due_at=None, now=due) == Sla.ON_TIME
