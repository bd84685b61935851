"""Queues and limits at run time: the database counts a limited activity's attempts for
every worker, and each step's message goes to its activity's queue."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.template.loader import render_to_string
from django.utils import timezone, translation

from tests.conftest import at_once
from workflows import engine, queues, registry
from workflows.activity import ActivityContext, NonRetryableError
from workflows.dsl import Activity, Map, NoCompensation, Workflow
from workflows.engine import execute, work
from workflows.models import ActivityLimiter, StepEvent, StepRun
from workflows.states import EventKind, RunState, StepKind, StepState
from workflows.testing import as_if_committed

pytestmark = pytest.mark.django_db

# A minute's window begun 10 seconds ago, an hour from now: every claim below is at a
# time of the test's choosing.
_MINUTE = (timezone.now() + timedelta(hours=1)).replace(second=0, microsecond=0)
NOW = _MINUTE + timedelta(seconds=10)


def done(context: ActivityContext) -> dict:
    return {"item": context.item}


def _activity(name: str, next: str | None = None, **options) -> Activity:
    return Activity(name, run=done, compensate=NoCompensation("test"), next=next, **options)


ONE = Workflow(
    name="test_one_at_once", version=1, start="call", nodes=(_activity("call", concurrency=1),)
)
PAIR = Workflow(
    name="test_two_at_once", version=1, start="call", nodes=(_activity("call", concurrency=2),)
)
TWO_A_MINUTE = Workflow(
    name="test_two_a_minute", version=1, start="call", nodes=(_activity("call", rate_limit="2/m"),)
)
TO_PAYMENTS = Workflow(
    name="test_to_payments",
    version=1,
    start="prepare",
    nodes=(_activity("prepare", "charge"), _activity("charge", queue="payments")),
)


def boom(context: ActivityContext) -> None:
    raise NonRetryableError("declined")


UNDONE = Workflow(
    name="test_undone_once_a_minute",
    version=1,
    start="charge",
    nodes=(
        Activity("charge", run=done, compensate=done, next="boom", rate_limit="1/m"),
        Activity("boom", run=boom, compensate=NoCompensation("test")),
    ),
)
CHARGE_THEN_RECEIPT = Workflow(
    name="test_payments_then_receipt",
    version=1,
    start="charge",
    nodes=(_activity("charge", "receipt", queue="payments"), _activity("receipt")),
)
MAPPED = Workflow(
    name="test_mapped_two_a_minute",
    version=1,
    start="each",
    nodes=(
        Map(
            "each",
            items=lambda data: list(range(data.input["count"])),
            activity=done,
            compensate=NoCompensation("test"),
            rate_limit="2/m",
            concurrency=1,
        ),
    ),
)


@pytest.fixture(autouse=True)
def definitions():
    for definition in (ONE, PAIR, TWO_A_MINUTE, TO_PAYMENTS, CHARGE_THEN_RECEIPT, MAPPED, UNDONE):
        registry.register(definition)
    yield
    for definition in (ONE, PAIR, TWO_A_MINUTE, TO_PAYMENTS, CHARGE_THEN_RECEIPT, MAPPED, UNDONE):
        registry.unregister(definition)


@pytest.fixture
def scheduled_steps(start, monkeypatch):
    """Start `count` runs of `workflow_type`; return their first steps' ids (not sent)."""
    monkeypatch.setattr(work, "send_steps", lambda step_ids, **options: None)

    def make(workflow_type: str, count: int) -> list[int]:
        runs = [start(workflow_type, {}) for _ in range(count)]
        return [run.steps.get().pk for run in runs]

    return make


def finish(claim, *, now) -> None:
    """End a claimed attempt as its worker would: run it, record it."""
    execute.record_outcome(claim, execute.run_activity(claim), now=now)


class TestConcurrency:
    def test_a_claim_past_the_limit_leaves_the_step_scheduled_and_due_shortly(
        self, scheduled_steps
    ):
        first, second, third = scheduled_steps("test_two_at_once", 3)

        claims = [execute.claim_step(step_id, now=NOW) for step_id in (first, second, third)]

        assert [claim is not None for claim in claims] == [True, True, False]
        waiting = StepRun.objects.get(pk=third)
        assert waiting.state == StepState.SCHEDULED
        assert waiting.attempt == 0
        assert waiting.due_at == NOW + queues.CONCURRENCY_RECHECK

    def test_the_slot_of_an_attempt_that_ended_is_free_for_the_next(self, scheduled_steps):
        first, second, third = scheduled_steps("test_two_at_once", 3)
        claim = execute.claim_step(first, now=NOW)
        execute.claim_step(second, now=NOW)

        finish(claim, now=NOW + timedelta(seconds=1))

        assert execute.claim_step(third, now=NOW + timedelta(seconds=2)) is not None
        assert StepRun.objects.get(pk=third).state == StepState.RUNNING

    def test_the_limiter_holds_the_running_steps_as_its_slots(self, scheduled_steps):
        first, second, _ = scheduled_steps("test_two_at_once", 3)

        for step_id in (first, second):
            execute.claim_step(step_id, now=NOW)

        limiter = ActivityLimiter.objects.get(key="test_two_at_once:call")
        assert sorted(limiter.holders) == sorted([first, second])

    def test_a_slot_held_by_a_lost_attempt_frees_itself_when_the_sweep_expires_its_lease(
        self, scheduled_steps
    ):
        first, second, third = scheduled_steps("test_two_at_once", 3)
        execute.claim_step(first, now=NOW)
        execute.claim_step(second, now=NOW)

        engine.sweep(now=NOW + timedelta(hours=1))  # both workers died: leases expire

        later = NOW + timedelta(hours=1, seconds=1)
        assert execute.claim_step(third, now=later) is not None


@pytest.mark.django_db(transaction=True)
class TestClaimsAtOnce:
    def test_two_workers_claiming_the_last_slot_at_once_take_it_once(self, start, monkeypatch):
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **options: None)
        steps = [start("test_one_at_once", {}).steps.get().pk for _ in range(2)]

        claims = at_once(*(lambda pk=pk: execute.claim_step(pk, now=NOW) for pk in steps))

        assert sum(claim is not None for claim in claims) == 1
        assert StepRun.objects.filter(pk__in=steps, state=StepState.RUNNING).count() == 1


class TestRate:
    def test_a_claim_past_the_rate_waits_for_the_next_window(self, scheduled_steps):
        steps = scheduled_steps("test_two_a_minute", 3)

        for step_id in steps:
            claim = execute.claim_step(step_id, now=NOW)
            if claim is not None:
                finish(claim, now=NOW)

        assert [StepRun.objects.get(pk=pk).state for pk in steps] == [
            StepState.SUCCEEDED,
            StepState.SUCCEEDED,
            StepState.SCHEDULED,
        ]
        assert StepRun.objects.get(pk=steps[2]).due_at == _MINUTE + timedelta(minutes=1)

    def test_the_next_window_admits_the_step_that_waited(self, scheduled_steps):
        steps = scheduled_steps("test_two_a_minute", 3)
        for step_id in steps:
            execute.claim_step(step_id, now=NOW)

        claim = execute.claim_step(steps[2], now=_MINUTE + timedelta(minutes=1))

        assert claim is not None

    def test_a_compensation_is_never_held_back(self, start, monkeypatch):
        # Only forward attempts count: an undo must not wait behind new work.
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **options: None)
        run = start("test_undone_once_a_minute", {})
        for node in ("charge", "boom"):
            step = run.steps.get(node=node, kind=StepKind.FORWARD)
            finish(execute.claim_step(step.pk, now=NOW), now=NOW)
        undo = run.steps.get(node="charge", kind=StepKind.COMPENSATION)

        claim = execute.claim_step(undo.pk, now=NOW)

        assert claim is not None
        finish(claim, now=NOW)
        run.refresh_from_db()
        assert run.state == RunState.COMPENSATED


class TestSweepReleases:
    def test_the_sweep_sends_no_more_waiting_steps_than_there_are_free_slots(
        self, scheduled_steps, monkeypatch
    ):
        steps = scheduled_steps("test_two_at_once", 5)
        claims = [execute.claim_step(step_id, now=NOW) for step_id in steps]
        finish(claims[0], now=NOW)
        sent: list[int] = []
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **_: sent.extend(step_ids))

        with as_if_committed():
            engine.sweep(now=NOW + timedelta(seconds=2))

        assert len(sent) == 1  # one slot is free: the other running step holds the second
        assert sent[0] in steps[2:]
        held = StepRun.objects.filter(pk__in=steps[2:]).exclude(pk=sent[0])
        assert {step.state for step in held} == {StepState.SCHEDULED}
        assert all(step.due_at > NOW + timedelta(seconds=2) for step in held)

    def test_a_step_held_by_a_full_window_is_next_looked_at_when_the_window_ends(
        self, scheduled_steps, monkeypatch
    ):
        steps = scheduled_steps("test_two_a_minute", 3)
        for step_id in steps:
            execute.claim_step(step_id, now=NOW)
        sent: list[int] = []
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **_: sent.extend(step_ids))

        with as_if_committed():
            engine.sweep(now=NOW + timedelta(seconds=2))

        assert sent == []
        assert StepRun.objects.get(pk=steps[2]).due_at == _MINUTE + timedelta(minutes=1)


def held_events(step_id: int) -> list[StepEvent]:
    return list(StepEvent.objects.filter(step_id=step_id, kind=EventKind.HELD))


class TestTheTimelineSaysWhy:
    def test_a_step_held_by_concurrency_says_so_once_however_often_it_is_looked_at(
        self, scheduled_steps, monkeypatch
    ):
        first, second, third = scheduled_steps("test_two_at_once", 3)
        for step_id in (first, second):
            execute.claim_step(step_id, now=NOW)

        assert execute.claim_step(third, now=NOW) is None
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **_: None)
        for seconds in (2, 4, 6):
            with as_if_committed():
                engine.sweep(now=NOW + timedelta(seconds=seconds))
            execute.claim_step(third, now=NOW + timedelta(seconds=seconds))

        (event,) = held_events(third)
        assert event.detail["message"] == "waits for its concurrency limit (2 at once)"
        assert (event.node, event.attempt, event.at) == ("call", 0, NOW)

    def test_a_step_held_by_the_rate_says_which_and_until_when(self, scheduled_steps):
        steps = scheduled_steps("test_two_a_minute", 3)

        for step_id in steps:
            execute.claim_step(step_id, now=NOW)

        (event,) = held_events(steps[2])
        next_window = _MINUTE + timedelta(minutes=1)
        assert event.detail == {
            "message": f"waits for its rate limit (2/m), until the next window at "
            f"{next_window:%H:%M:%S} UTC",
            "reason": "rate",
            "until": next_window.isoformat(),
            "limit": "2/m",
        }
        assert held_events(steps[0]) == []

    def test_a_step_the_sweep_holds_before_any_claim_says_so_once(
        self, scheduled_steps, monkeypatch
    ):
        first, second, third = scheduled_steps("test_two_at_once", 3)
        for step_id in (first, second):
            execute.claim_step(step_id, now=NOW)
        StepRun.objects.filter(pk=third).update(due_at=NOW)  # its message was lost
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **_: None)

        for seconds in (61, 63):
            with as_if_committed():
                engine.sweep(now=NOW + timedelta(seconds=seconds))

        (event,) = held_events(third)
        assert event.detail["message"] == "waits for its concurrency limit (2 at once)"
        assert event.at == NOW + timedelta(seconds=61)

    def test_the_runs_timeline_shows_it_in_words(self, scheduled_steps):
        first, second = scheduled_steps("test_one_at_once", 2)
        execute.claim_step(first, now=NOW)
        execute.claim_step(second, now=NOW)

        page = SimpleNamespace(events=held_events(second), trail=[], definition=None)
        html = render_to_string("approvals/partials/run_timeline.html", {"page": page})

        assert "call held: <strong>waits for its concurrency limit (1 at once)</strong>" in html

    def test_a_german_reader_reads_which_limit_and_until_when_in_german(self, scheduled_steps):
        first, second = scheduled_steps("test_one_at_once", 2)
        execute.claim_step(first, now=NOW)
        execute.claim_step(second, now=NOW)
        steps = scheduled_steps("test_two_a_minute", 3)
        for step_id in steps:
            execute.claim_step(step_id, now=NOW)
        events = held_events(second) + held_events(steps[2])

        with translation.override("de"):
            html = render_to_string(
                "approvals/partials/run_timeline.html",
                {"page": SimpleNamespace(events=events, trail=[], definition=None)},
            )

        next_window = _MINUTE + timedelta(minutes=1)
        assert (
            "call zurückgehalten: <strong>wartet auf sein Parallelitätslimit (1 gleichzeitig)"
            "</strong>" in html
        )
        assert (
            "wartet auf sein Ratenlimit (2/m), bis zum nächsten Fenster um "
            f"{next_window:%H:%M:%S} UTC</strong>" in html
        )


class TestQueues:
    def test_a_step_is_sent_to_its_activitys_queue(self, start, monkeypatch):
        sent: list[tuple[list[int], dict]] = []
        monkeypatch.setattr(work, "send_steps", lambda ids, **options: sent.append((ids, options)))
        run = start("test_to_payments", {})
        prepare = run.steps.get()

        with as_if_committed():
            engine.execute_step(step_id=prepare.pk)

        charge = run.steps.get(node="charge")
        assert sent == [([charge.pk], {"routes": {charge.pk: "payments"}})]

    def test_a_worker_never_runs_another_queues_step_eagerly(self, start, settings, monkeypatch):
        settings.BATON_EAGER_STEPS = 10
        monkeypatch.setattr(work, "send_steps", lambda ids, **options: None)
        run = start("test_to_payments", {})

        engine.execute_step(step_id=run.steps.get().pk)

        assert run.steps.get(node="charge").state == StepState.SCHEDULED

    def test_a_payments_worker_runs_no_default_step_eagerly(self, start, settings, monkeypatch):
        settings.BATON_EAGER_STEPS = 10
        monkeypatch.setattr(work, "send_steps", lambda ids, **options: None)
        run = start("test_payments_then_receipt", {})

        engine.execute_step(step_id=run.steps.get().pk)

        assert run.steps.get(node="receipt").state == StepState.SCHEDULED

    def test_the_sweep_sends_a_lost_step_to_the_same_queue(self, start, monkeypatch):
        sent: list[tuple[list[int], dict]] = []
        monkeypatch.setattr(work, "send_steps", lambda ids, **options: sent.append((ids, options)))
        run = start("test_to_payments", {})
        engine.execute_step(step_id=run.steps.get().pk)
        charge = run.steps.get(node="charge")
        sent.clear()

        with as_if_committed():
            engine.sweep(now=timezone.now() + timedelta(hours=1))

        assert sent == [([charge.pk], {"routes": {charge.pk: "payments"}})]

    def test_messages_carry_the_queue_and_others_keep_the_default(self, monkeypatch, settings):
        messages: list[tuple[str, list, str]] = []
        monkeypatch.setattr(
            work.current_app.amqp,
            "send_task_message",
            lambda producer, name, message, *, queue, **options: messages.append(
                (name, message.body[0], queue.name)
            ),
        )

        work.send_steps([1, 2, 3], routes={2: "payments"})

        default = settings.CELERY_TASK_DEFAULT_QUEUE
        assert sorted(messages, key=lambda m: m[1]) == [
            (work.EXECUTE_STEP_TASK, [1], default),
            (work.EXECUTE_STEP_TASK, [2], "payments"),
            (work.EXECUTE_STEP_TASK, [3], default),
        ]


class TestTheKit:
    def test_a_rate_limited_map_runs_two_items_a_minute_on_the_kits_clock(self, workflow_env):
        run = workflow_env.start("test_mapped_two_a_minute", {"count": 5})
        items = StepRun.objects.filter(run=run, item__isnull=False)

        assert items.filter(state=StepState.SUCCEEDED).count() == 2

        workflow_env.advance(minutes=1)

        assert items.filter(state=StepState.SUCCEEDED).count() == 4

        workflow_env.skip_ahead()

        workflow_env.assert_state(run, RunState.SUCCEEDED)
