"""Escalations and final deadlines, fired by the engine's sweep with a controlled clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from auditlog.models import LogEntry

from approvals.escalation import sla
from approvals.states import Outcome, Sla, TaskState
from workflows import engine
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


def audit_events(task) -> list[str]:
    return [
        e.additional_data["event"] for e in LogEntry.objects.get_for_object(task).order_by("id")
    ]


class TestEscalation:
    def test_after_48_hours_the_manager_task_opens_to_finance_with_an_email(
        self, manager_task, carol, bob, mailoutbox, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=manager_task.created_at + timedelta(hours=48, minutes=1))

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

    def test_nothing_escalates_before_its_time(self, manager_task):
        engine.sweep(now=manager_task.created_at + timedelta(hours=47))

        manager_task.refresh_from_db()
        assert manager_task.escalation_level == 0

    def test_two_sweeps_escalate_once(self, manager_task, mailoutbox):
        later = manager_task.created_at + timedelta(hours=49)

        engine.sweep(now=later)
        engine.sweep(now=later)

        manager_task.refresh_from_db()
        assert manager_task.escalation_level == 1
        assert audit_events(manager_task).count("escalated") == 1

    def test_the_escalation_time_comes_from_settings(self, settings, start_expense):
        settings.BATON_EXPENSE_ESCALATE_AFTER_HOURS = 2

        task = start_expense().human_tasks.get()

        assert task.escalate_at - task.created_at == timedelta(hours=2)


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
