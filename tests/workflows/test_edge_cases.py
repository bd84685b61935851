"""Races and edge cases found in review, each pinned by a test."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from celery import current_app
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import at_once, steps_by_node
from tests.workflows.test_engine import later
from workflows import engine
from workflows.activity import ActivityCancelled, LeaseLost
from workflows.dsl import Activity, Branch, Join, Parallel, Workflow, check_definition
from workflows.engine import execute, sweeper, timers, work
from workflows.models import WorkflowRun
from workflows.states import EventKind, RunState, StepKind, StepState
from workflows.tasks import execute_steps

pytestmark = pytest.mark.django_db


def noop(context):
    return None


def fail_sweeping(monkeypatch, broken: WorkflowRun) -> None:
    """Make sweeping `broken` raise, whichever way its timer fires (run by run, or with
    the batch's other timers as a set)."""
    handle_due_step, fire_due_timers = sweeper.handle_due_step, timers.fire_due_timers

    def handle_unless_broken(run, *args):
        if run.pk == broken.pk:
            raise RuntimeError("boom")
        return handle_due_step(run, *args)

    def fire_unless_broken(runs, now):
        if any(run.id == broken.pk for run in runs):
            raise RuntimeError("boom")
        return fire_due_timers(runs, now)

    monkeypatch.setattr(sweeper, "handle_due_step", handle_unless_broken)
    monkeypatch.setattr(timers, "fire_due_timers", fire_unless_broken)


class TestSweepIsolation:
    def test_two_timers_due_together_in_an_any_join_fire_once_and_the_run_goes_on(
        self, start, drive
    ):
        run = start("test_sleep_race", {})
        other = drive(start("test_sleeping", {}))

        counts = engine.sweep(now=later(60))

        run = drive(run)
        assert counts["failed_runs"] == 0
        assert run.state == RunState.SUCCEEDED
        assert sorted(s.state for s in run.steps.filter(node__in=["short", "also_short"])) == [
            StepState.CANCELLED,
            StepState.SUCCEEDED,
        ]
        assert drive(other).steps.get(node="nap").state == StepState.SUCCEEDED

    def test_a_run_that_fails_to_sweep_does_not_stop_the_others(self, start, drive, monkeypatch):
        broken = drive(start("test_sleeping", {}))
        healthy = drive(start("test_sleeping", {}))
        fail_sweeping(monkeypatch, broken)

        counts = engine.sweep(now=later(60))

        assert counts["failed_runs"] == 1
        assert drive(healthy).state == RunState.SUCCEEDED
        assert broken.steps.get(node="nap").state == StepState.WAITING

    def test_more_timers_than_one_transaction_takes_all_fire_in_one_sweep(
        self, start, drive, monkeypatch
    ):
        monkeypatch.setattr(sweeper, "_RUNS_PER_TRANSACTION", 2)
        runs = [drive(start("test_sleeping", {})) for _ in range(5)]

        counts = engine.sweep(now=later(60))

        assert counts["steps"] == 5
        assert all(run.steps.get(node="nap").state == StepState.SUCCEEDED for run in runs)

    def test_a_sweep_stops_at_its_batch_and_leaves_the_rest_for_the_next(
        self, start, drive, monkeypatch
    ):
        monkeypatch.setattr(sweeper, "_RUNS_PER_TRANSACTION", 2)
        for _ in range(5):
            drive(start("test_sleeping", {}))

        first = engine.sweep(now=later(60), batch=3)
        second = engine.sweep(now=later(60), batch=3)

        assert (first["steps"], second["steps"]) == (3, 2)

    def test_a_failing_run_is_tried_once_a_sweep_however_many_transactions_it_takes(
        self, start, drive, monkeypatch
    ):
        monkeypatch.setattr(sweeper, "_RUNS_PER_TRANSACTION", 2)
        broken = drive(start("test_sleeping", {}))
        healthy = [drive(start("test_sleeping", {})) for _ in range(2)]
        fail_sweeping(monkeypatch, broken)

        counts = engine.sweep(now=later(60))

        assert (counts["failed_runs"], counts["steps"]) == (1, 2)
        assert [drive(run).state for run in healthy] == [RunState.SUCCEEDED] * 2
        assert broken.steps.get(node="nap").state == StepState.WAITING

    @pytest.mark.django_db(transaction=True)
    def test_runs_another_sweep_holds_are_passed_over_for_the_next_due(
        self, start, drive, monkeypatch
    ):
        monkeypatch.setattr(sweeper, "_RUNS_PER_TRANSACTION", 2)
        runs = [drive(start("test_sleeping", {})) for _ in range(4)]
        held, free = runs[:2], runs[2:]
        holding, swept = threading.Event(), threading.Event()

        def hold() -> None:
            with transaction.atomic():
                list(WorkflowRun.objects.select_for_update().filter(pk__in=[r.pk for r in held]))
                holding.set()
                swept.wait(timeout=30)

        def sweep() -> dict[str, int]:
            holding.wait(timeout=30)
            try:
                return engine.sweep(now=later(60))
            finally:
                swept.set()

        _, counts = at_once(hold, sweep)

        assert counts["steps"] == 2
        assert [drive(run).state for run in free] == [RunState.SUCCEEDED] * 2
        assert engine.sweep(now=later(60))["steps"] == 2

    def test_sweep_queries_do_not_grow_with_the_number_of_idle_runs(self, start, drive):
        def queries_for_a_sweep() -> int:
            with CaptureQueriesContext(connection) as queries:
                engine.sweep(now=timezone.now())
            return len(queries)

        drive(start("test_signalled", {}))
        few = queries_for_a_sweep()
        for _ in range(20):
            drive(start("test_signalled", {}))

        assert queries_for_a_sweep() == few

    def test_a_batch_of_due_timers_fires_in_one_transaction_of_constant_statements(
        self, start, drive
    ):
        def statements_to_fire(timers: int) -> list[str]:
            runs = [drive(start("test_sleeping", {})) for _ in range(timers)]
            with CaptureQueriesContext(connection) as queries:
                counts = engine.sweep(now=later(60))
            assert counts["steps"] == timers
            assert all(run.steps.get(node="nap").state == StepState.SUCCEEDED for run in runs)
            return [q["sql"].split()[0] for q in queries if "SAVEPOINT" not in q["sql"]]

        # The step they wake up to waits in the queue, so the sweep is the only writer.
        few = statements_to_fire(2)
        assert few == statements_to_fire(40)

    def test_a_batch_logs_its_routine_events_in_one_line_and_each_at_debug(
        self, start, drive, caplog
    ):
        for _ in range(3):
            drive(start("test_sleeping", {}))
        caplog.clear()

        with caplog.at_level(logging.INFO, logger="baton.engine"):
            engine.sweep(now=later(60))

        summaries = [r for r in caplog.records if r.getMessage() == "sweep.batch"]
        assert [r.getMessage() for r in caplog.records] == ["sweep.batch"]
        assert summaries[0].events_completed == 3

    def test_a_batch_still_logs_a_lost_lease_on_its_own(self, start, caplog):
        run = start("test_linear", {})
        execute.claim_step(run.steps.get().pk, now=timezone.now())  # the worker dies
        caplog.clear()

        with caplog.at_level(logging.INFO, logger="baton.engine"):
            engine.sweep(now=later(3600))

        messages = [r.getMessage() for r in caplog.records]
        assert "step.lease_expired" in messages
        assert "sweep.batch" in messages

    def test_a_large_batch_is_sent_a_few_steps_a_message(
        self, start, drive, monkeypatch, django_capture_on_commit_callbacks
    ):
        runs = [drive(start("test_sleeping", {})) for _ in range(work.STEPS_SENT_ONE_BY_ONE + 1)]
        sent = []
        monkeypatch.setattr(
            current_app.amqp,
            "send_task_message",
            lambda producer, name, message, **options: sent.append((name, message.body[0])),
        )

        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=later(60))

        woken = sorted(run.steps.get(node="wake_up").pk for run in runs)
        assert {name for name, _ in sent} == {engine.EXECUTE_STEPS_TASK}
        assert sorted(step for _, (chunk,) in sent for step in chunk) == woken
        assert max(len(chunk) for _, (chunk,) in sent) == work.STEPS_PER_MESSAGE

    def test_a_batch_message_runs_each_of_its_steps(self, start):
        runs = [start("remote_then_local") for _ in range(3)]

        execute_steps([run.steps.get().pk for run in runs])

        assert all(WorkflowRun.objects.get(pk=run.pk).state == RunState.SUCCEEDED for run in runs)


class TestPausedRuns:
    def test_a_paused_runs_last_step_finishes_the_run(self, start):
        run = start("test_linear", {})
        for node in ("first", "second"):
            engine.execute_step(step_id=run.steps.get(node=node).pk)
        claim = execute.claim_step(run.steps.get(node="third").pk, now=timezone.now())
        engine.pause_run(run_id=run.pk)

        execute.record_outcome(claim, execute.Outcome(result={"done": True}), now=timezone.now())

        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED

    def test_a_signal_that_ends_a_paused_run_finishes_it(self, start, drive):
        run = drive(start("test_signalled", {}))
        engine.pause_run(run_id=run.pk)

        engine.signal_run(run_id=run.pk, name="stop")

        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED

    def test_waiting_while_paused_does_not_count_against_schedule_to_start(self, start, drive):
        run = start("test_prompt", {})
        engine.pause_run(run_id=run.pk)
        engine.sweep(now=later(60))

        engine.resume_run(run_id=run.pk)
        run = drive(run)

        assert run.state == RunState.SUCCEEDED


class TestScheduleToStart:
    def test_an_unclaimed_step_fails_after_its_schedule_to_start_timeout(self, start):
        run = start("test_prompt", {})

        engine.sweep(now=later(11))

        run.refresh_from_db()
        first = steps_by_node(run)["first"]
        assert first.last_error["type"] == "ScheduleToStartTimeout"
        assert run.state == RunState.FAILED

    def test_a_compensation_whose_message_was_lost_is_resent_not_given_up(self, start, monkeypatch):
        monkeypatch.setattr(work, "send_steps", lambda step_ids: None)  # every message is lost
        run = start("test_prompt", {})
        engine.execute_step(step_id=run.steps.get(node="first").pk)
        engine.cancel_run(run_id=run.pk)
        undo = run.steps.get(kind=StepKind.COMPENSATION)

        engine.sweep(now=later(45))

        undo.refresh_from_db()
        run.refresh_from_db()
        assert undo.state == StepState.SCHEDULED
        assert run.state == RunState.CANCELLING
        assert run.events.filter(step=undo, kind=EventKind.REDISPATCHED).exists()


class TestLosingBranches:
    def test_a_losing_branch_that_fails_late_does_not_undo_the_run(self, start, drive):
        run = start("test_race_any", {})
        slow = execute.claim_step(run.steps.get(node="slow").pk, now=timezone.now())
        engine.execute_step(step_id=run.steps.get(node="fast").pk)

        failure = execute.Outcome(error={"type": "Boom", "message": "late"}, final=True)
        execute.record_outcome(slow, failure, now=timezone.now())
        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert run.events.filter(node="slow", kind=EventKind.LATE_RESULT_DISCARDED).exists()
        # Cancelled mid-attempt, it may have applied its effect: it is undone all the same.
        assert steps_by_node(run)["slow"].state == StepState.COMPENSATED

    def test_a_losing_branch_hears_it_was_cancelled_at_its_next_heartbeat(self, start):
        run = start("test_race_any", {})
        slow = execute.claim_step(run.steps.get(node="slow").pk, now=timezone.now())
        engine.execute_step(step_id=run.steps.get(node="fast").pk)

        with pytest.raises(ActivityCancelled, match="was cancelled"):
            slow.context.heartbeat()

    def test_an_attempt_that_lost_its_lease_still_hears_it_lost_it(self, start):
        run = start("test_race_any", {})
        slow = execute.claim_step(run.steps.get(node="slow").pk, now=timezone.now())
        engine.sweep(now=later(600))  # the lease expires: a retry is scheduled

        with pytest.raises(LeaseLost):
            slow.context.heartbeat()


class TestUncertainAttempts:
    def test_a_timed_out_attempt_is_undone_even_if_the_step_later_fails_cleanly(
        self, start, drive, effects
    ):
        run = start("test_linear", {"simulate": {"second": "decline"}})
        engine.execute_step(step_id=run.steps.get(node="first").pk)
        second = run.steps.get(node="second")
        execute.claim_step(second.pk, now=timezone.now())  # the worker dies mid-call
        engine.sweep(now=later(600))  # its lease expires; a retry is scheduled
        engine.sweep(now=later(601))

        run = drive(run)

        second.refresh_from_db()
        assert second.may_have_applied
        assert run.state == RunState.COMPENSATED
        undone = run.events.filter(kind=EventKind.COMPENSATED).exclude(node="")
        assert [event.node for event in undone.order_by("id")] == ["second", "first"]


class TestStaticCheckOfRegions:
    def test_a_branch_with_an_exit_that_ends_the_run_is_refused(self):
        definition = Workflow(
            name="leaky",
            version=1,
            start="fan",
            nodes=(
                Parallel("fan", branches=("choose", "other"), join="j"),
                Branch("choose", condition=lambda data: True, if_true="j", if_false=None),
                Activity("other", run=noop, next="j", mutating=False),
                Join("j"),
            ),
        )

        assert check_definition(definition) == [
            "'choose' ends a branch of 'fan' before its join 'j'"
        ]

    def test_branches_that_share_a_node_are_refused(self):
        definition = Workflow(
            name="shared",
            version=1,
            start="fan",
            nodes=(
                Parallel("fan", branches=("a", "b"), join="j"),
                Activity("a", run=noop, next="c", mutating=False),
                Activity("b", run=noop, next="c", mutating=False),
                Activity("c", run=noop, next="j", mutating=False),
                Join("j"),
            ),
        )

        assert check_definition(definition) == [
            "branches of 'fan' share 'c': each branch needs nodes of its own"
        ]


def test_a_pause_right_after_start_holds_every_step(start, drive):
    run = start("test_linear", {})
    engine.pause_run(run_id=run.pk)

    drive(run)

    assert steps_by_node(run)["first"].state == StepState.SCHEDULED
    assert timedelta(0) <= steps_by_node(run)["first"].due_at - timezone.now()
