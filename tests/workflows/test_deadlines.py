"""Run deadlines (`Workflow(deadline=..., on_deadline=...)`): a run still live at its
deadline is cancelled, or moved on to a node of its own; the sweep fires it once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from tests.conftest import steps_by_node
from workflows import engine
from workflows.activity import ActivityCancelled
from workflows.engine import execute
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.django_db

# The standard calendar works Monday to Friday, 09:00-17:00 (UTC in the tests).
FRIDAY_4PM = datetime(2026, 1, 9, 16, 0, tzinfo=UTC)


class TestRunDeadlineCancels:
    def test_the_run_holds_its_deadline_from_its_start(self, start):
        now = timezone.now()

        run = start("test_run_deadline_cancels", {}, now=now)

        assert run.deadline_at == now + timedelta(days=30)

    def test_a_run_still_waiting_at_its_deadline_is_cancelled_and_undone(
        self, start, drive, effects
    ):
        now = timezone.now()
        run = drive(start("test_run_deadline_cancels", {}, now=now))

        early = engine.sweep(now=now + timedelta(days=29))
        due = engine.sweep(now=now + timedelta(days=30))
        run = drive(run)

        assert (early["deadlines"], due["deadlines"]) == (0, 1)
        assert run.state == RunState.CANCELLED
        assert steps_by_node(run)["await_go"].state == StepState.CANCELLED
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}
        passed = run.events.get(kind=EventKind.DEADLINE_PASSED)
        assert passed.detail["then"] == "cancel"

    def test_it_fires_once(self, start, drive):
        now = timezone.now()
        run = drive(start("test_run_deadline_cancels", {}, now=now))
        engine.sweep(now=now + timedelta(days=31))

        again = engine.sweep(now=now + timedelta(days=32))

        run.refresh_from_db()
        assert run.deadline_at is None
        assert again["deadlines"] == 0
        assert run.events.filter(kind=EventKind.DEADLINE_PASSED).count() == 1

    def test_a_run_that_ended_before_its_deadline_is_left_alone(self, start, drive):
        now = timezone.now()
        run = drive(start("test_run_deadline_cancels", {}, now=now))
        engine.signal_run(run_id=run.pk, name="go")
        run = drive(run)

        counts = engine.sweep(now=now + timedelta(days=31))

        run.refresh_from_db()
        assert (run.state, counts["deadlines"]) == (RunState.SUCCEEDED, 0)

    def test_a_paused_runs_deadline_fires_once_it_resumes(self, start, drive):
        now = timezone.now()
        run = drive(start("test_run_deadline_cancels", {}, now=now))
        engine.pause_run(run_id=run.pk)

        while_paused = engine.sweep(now=now + timedelta(days=31))
        engine.resume_run(run_id=run.pk)
        resumed = engine.sweep(now=now + timedelta(days=31))

        assert (while_paused["deadlines"], resumed["deadlines"]) == (0, 1)
        assert drive(run).state == RunState.CANCELLED


class TestRunDeadlineMovesOn:
    def test_it_counts_business_days_on_the_calendar(self, start):
        run = start("test_run_deadline_moves", {}, now=FRIDAY_4PM)

        assert run.deadline_at == datetime(2026, 1, 13, 16, 0, tzinfo=UTC)  # Tuesday 16:00

    def test_a_waiting_run_goes_to_the_deadline_node_and_nothing_is_undone(
        self, start, drive, effects
    ):
        run = drive(start("test_run_deadline_moves", {}, now=FRIDAY_4PM))

        early = engine.sweep(now=datetime(2026, 1, 13, 15, 59, tzinfo=UTC))
        engine.sweep(now=datetime(2026, 1, 13, 16, 0, tzinfo=UTC))
        run = drive(run)

        assert early["deadlines"] == 0
        assert run.state == RunState.SUCCEEDED
        assert steps_by_node(run)["await_go"].state == StepState.CANCELLED
        assert effects(run) == {"test.prepare": 1, "test.expire": 1}
        assert run.events.get(kind=EventKind.DEADLINE_PASSED).detail["then"] == "expire"

    def test_a_running_step_hears_it_was_cancelled_and_is_undone_if_the_run_fails_later(
        self, start, drive, effects
    ):
        run = start("test_run_deadline_moves", {"simulate": {"expire": "decline"}})
        claim = execute.claim_step(run.steps.get(node="prepare").pk, now=timezone.now())
        execute.run_activity(claim)  # prepared, but still running at the deadline

        engine.sweep(now=timezone.now() + timedelta(days=10))

        with pytest.raises(ActivityCancelled):
            claim.context.heartbeat()
        run = drive(run)
        assert run.state == RunState.COMPENSATED
        prepare = steps_by_node(run)["prepare"]
        assert (prepare.state, prepare.may_have_applied) == (StepState.COMPENSATED, True)
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}
