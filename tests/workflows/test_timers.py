"""Timers fired as a set (workflows.engine.timers): the sweep's common case, a timer whose
next node is an activity, in one statement per batch, with the rows the per-run way writes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import at_once
from workflows import engine
from workflows.engine import timers, work
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.django_db

SLEEPING = "test_sleeping"  # nap (a Sleep) -> wake_up (an activity)


def asleep(start, drive, count: int) -> list[WorkflowRun]:
    return [drive(start(SLEEPING, {})) for _ in range(count)]


def due_time() -> Any:
    return timezone.now() + timedelta(seconds=2)


def sweep_queries(when: Any) -> tuple[dict[str, int], int]:
    with CaptureQueriesContext(connection) as queries:
        counts = engine.sweep(now=when)
    return counts, len(queries.captured_queries)


def the_per_run_way(monkeypatch) -> None:
    monkeypatch.setattr(timers, "fire_due_timers", lambda runs, now: set())


def rows_of(run: WorkflowRun) -> dict[str, Any]:
    """What a run's firing left, without ids or the times the database sets itself."""
    run.refresh_from_db()
    steps = [
        {
            field.attname: getattr(step, field.attname)
            for field in StepRun._meta.concrete_fields
            if field.attname not in ("id", "run_id")
        }
        for step in run.steps.order_by("scheduled_at", "node")
    ]
    events = list(run.events.order_by("at", "id").values("node", "kind", "attempt", "at", "detail"))
    return {"state": run.state, "result": run.result, "steps": steps, "events": events}


class TestTheSetPath:
    def test_due_timers_schedule_their_activities_and_wake_their_runs(
        self, start, drive, monkeypatch, django_capture_on_commit_callbacks
    ):
        runs = asleep(start, drive, 3)
        sent: list[int] = []
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **_: sent.extend(step_ids))

        with django_capture_on_commit_callbacks(execute=True):
            counts = engine.sweep(now=due_time())

        assert counts["steps"] == 3
        for run in runs:
            run.refresh_from_db()
            assert run.state == RunState.RUNNING
            nap, wake_up = run.steps.order_by("id")
            assert (nap.node, nap.state, nap.due_at) == ("nap", StepState.SUCCEEDED, None)
            assert (wake_up.node, wake_up.state) == ("wake_up", StepState.SCHEDULED)
            assert run.events.filter(step=nap, kind=EventKind.COMPLETED).count() == 1
        assert sorted(sent) == sorted(
            StepRun.objects.filter(node="wake_up").values_list("pk", flat=True)
        )

    def test_a_batch_costs_the_same_statements_however_many_timers_it_fires(self, start, drive):
        asleep(start, drive, 2)
        few_counts, few = sweep_queries(due_time())
        asleep(start, drive, 25)
        many_counts, many = sweep_queries(due_time())

        assert (few_counts["steps"], many_counts["steps"]) == (2, 25)
        assert few == many

    def test_it_writes_the_rows_the_per_run_way_writes(self, start, drive, monkeypatch):
        when = due_time()
        [by_set] = asleep(start, drive, 1)
        nap, started = by_set.steps.get(), by_set.events.get()
        engine.sweep(now=when)
        [by_run] = asleep(start, drive, 1)
        # The twin's nap was scheduled a moment later: give it the same times.
        StepRun.objects.filter(run=by_run).update(scheduled_at=nap.scheduled_at, due_at=nap.due_at)
        StepEvent.objects.filter(run=by_run).update(at=started.at)
        with monkeypatch.context() as patched:
            the_per_run_way(patched)
            engine.sweep(now=when)

        assert rows_of(by_set) == rows_of(by_run)
        assert rows_of(by_set)["state"] == RunState.RUNNING

    def test_a_run_cancelled_before_its_timer_fires_is_not_moved_on(self, start, drive):
        run = asleep(start, drive, 1)[0]
        stale = WorkflowRun.objects.get(pk=run.pk)  # read as the sweep read it, still waiting
        engine.cancel_run(run_id=run.pk)

        with transaction.atomic():
            fired = timers.fire_due_timers([stale], due_time())

        assert fired == set()
        assert not run.steps.filter(node="wake_up").exists()
        assert run.steps.get(node="nap").state == StepState.CANCELLED

    def test_a_timer_not_yet_due_is_left_waiting(self, start, drive):
        run = asleep(start, drive, 1)[0]

        with transaction.atomic():
            fired = timers.fire_due_timers([run], timezone.now())

        assert fired == set()
        assert run.steps.get().state == StepState.WAITING

    def test_a_run_whose_timer_cannot_fire_does_not_stop_the_others(self, start, drive):
        broken, healthy = asleep(start, drive, 2)
        # A step of the activity already in this round: its new step would break a constraint.
        StepRun.objects.create(
            run=broken,
            node="wake_up",
            state=StepState.SUCCEEDED,
            scheduled_at=broken.steps.get().scheduled_at,
        )

        counts = engine.sweep(now=due_time())

        assert (counts["steps"], counts["failed_runs"]) == (1, 1)
        assert broken.steps.get(node="nap").state == StepState.WAITING
        assert healthy.steps.get(node="wake_up").state == StepState.SCHEDULED


class TestWhatGoesThePerRunWay:
    @pytest.mark.parametrize(
        ("workflow_type", "why"),
        [
            ("test_sleep_race", "the timer's next node is a join"),
            ("test_signalled", "the timer is a wait's timeout, not a Sleep"),
        ],
    )
    def test_timers_not_leading_straight_to_an_activity(self, start, drive, workflow_type, why):
        run = drive(start(workflow_type, {}))
        when = timezone.now() + timedelta(seconds=301)

        with transaction.atomic():
            fired = timers.fire_due_timers([WorkflowRun.objects.get(pk=run.pk)], when)

        assert fired == set(), why
        assert engine.sweep(now=when)["steps"] >= 1  # and the per-run way fires them

    def test_a_run_with_another_live_step(self, start, drive):
        run = asleep(start, drive, 1)[0]
        nap = run.steps.get()
        StepRun.objects.create(
            run=run, node="wake_up", state=StepState.SCHEDULED, scheduled_at=nap.scheduled_at
        )

        with transaction.atomic():
            fired = timers.fire_due_timers([WorkflowRun.objects.get(pk=run.pk)], due_time())

        assert fired == set()
        assert run.steps.get(node="nap").state == StepState.WAITING


@pytest.mark.django_db(transaction=True)
class TestConcurrentSweeps:
    def test_two_sweeps_at_once_fire_each_timer_once(self, start, drive):
        runs = asleep(start, drive, 12)
        when = due_time()

        first, second = at_once(lambda: engine.sweep(now=when), lambda: engine.sweep(now=when))

        assert first["steps"] + second["steps"] == 12
        for run in runs:
            assert run.steps.filter(node="wake_up").count() == 1
            assert run.events.filter(node="nap", kind=EventKind.COMPLETED).count() == 1
