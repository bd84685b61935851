"""The engine's promises, kept by real worker processes over Redis against PostgreSQL.

Two workers and two beats run for the whole session (see conftest); a crash test
kills workers with SIGKILL and starts new ones.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from celery import current_app

from tests.conftest import steps_by_node
from tests.e2e.conftest import wait_until
from workflows import business_keys, engine
from workflows.business_keys import BusinessKey
from workflows.engine import work
from workflows.examples.models import ServiceEffect
from workflows.models import WorkflowRun
from workflows.states import EventKind, RunState, StepKind, StepState

pytestmark = pytest.mark.e2e

ORDER_EFFECTS = {
    "inventory.reserve": 1,
    "payments.charge": 1,
    "shipping.ship": 1,
    "notifications.notify": 1,
}


def wait_for_effect(run, action: str) -> None:
    """Wait until a demo service applied `action` for the run (mid-activity, if slow)."""
    wait_until(
        lambda: ServiceEffect.objects.filter(
            run_id=run.pk, action=action, applied_at__isnull=False
        ).exists(),
        timeout=60,
        what=f"{action} to be applied",
    )


class TestOrderSaga:
    def test_happy_path_runs_end_to_end(self, workers, start, finished, order_input, effects):
        run = start("order", order_input())

        run = finished(run, RunState.SUCCEEDED)

        assert effects(run) == ORDER_EFFECTS
        assert [e.node for e in run.events.filter(kind=EventKind.COMPLETED).exclude(node="")] == [
            "validate",
            "reserve_inventory",
            "charge_payment",
            "ship",
            "notify_customer",
        ]

    def test_a_flaky_payment_is_retried_with_backoff_then_succeeds(
        self, workers, start, finished, order_input, effects
    ):
        run = start("order", order_input(simulate={"payment": "flaky"}))

        run = finished(run, RunState.SUCCEEDED)

        assert effects(run) == ORDER_EFFECTS
        starts = run.events.filter(node="charge_payment", kind=EventKind.STARTED).order_by("at")
        gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(starts)]
        assert len(gaps) == 2
        assert gaps[0] >= 1.0  # initial interval
        assert gaps[1] >= 2.0  # doubled by the backoff coefficient
        assert ServiceEffect.objects.get(action="charge").requests_seen == 3

    def test_a_declined_payment_is_undone_in_reverse_each_once(
        self, workers, start, finished, order_input, effects
    ):
        run = start("order", order_input(simulate={"payment": "decline"}))

        run = finished(run, RunState.COMPENSATED)

        assert effects(run) == {"inventory.reserve": 1, "inventory.release": 1}
        assert run.error["type"] == "PaymentDeclined"

    def test_a_failed_shipment_refunds_then_releases(
        self, workers, start, finished, order_input, effects
    ):
        run = start("order", order_input(simulate={"shipping": "fail"}))

        run = finished(run, RunState.COMPENSATED, timeout=90)

        undone = run.events.filter(kind=EventKind.COMPENSATED).exclude(node="").order_by("id")
        assert [event.node for event in undone] == ["charge_payment", "reserve_inventory"]
        assert effects(run) == {
            "inventory.reserve": 1,
            "payments.charge": 1,
            "payments.refund": 1,
            "inventory.release": 1,
        }

    def test_a_failing_refund_dead_letters_then_an_operator_retry_finishes(
        self, workers, start, finished, order_input, effects
    ):
        failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
        run = finished(start("order", failing), RunState.DEAD_LETTERED, timeout=90)
        assert run.error["dead_letter"]["node"] == "charge_payment"

        engine.retry_dead_letter(run_id=run.pk)

        run = finished(run, RunState.COMPENSATED)
        assert effects(run)["payments.refund"] == 1
        assert effects(run)["inventory.release"] == 1
        assert ServiceEffect.objects.get(action="refund").requests_seen == 4


class TestCrashRecovery:
    def test_a_worker_killed_mid_activity_is_recovered_and_no_effect_repeats(
        self, workers, start, finished, order_input, effects
    ):
        run = start("order", order_input(simulate={"shipping": "slow"}))
        # The slow shipping service applies its effect, then takes seconds to answer.
        wait_for_effect(run, "ship")

        for name in ("worker-a", "worker-b"):
            workers.kill_worker(name)
        workers.ensure_workers(("worker-a", "worker-b"))

        run = finished(run, RunState.SUCCEEDED, timeout=90)
        ship = run.steps.get(node="ship", kind=StepKind.FORWARD)
        assert effects(run) == ORDER_EFFECTS
        assert ship.attempt == 2
        assert ServiceEffect.objects.get(action="ship").requests_seen == 2
        assert run.events.filter(node="ship", kind=EventKind.LEASE_EXPIRED).exists()

    def test_a_worker_killed_in_the_second_round_of_a_loop_is_recovered_once(
        self, workers, start, finished, effects
    ):
        # test_looping drafts twice; the second round's draft is slow, heartbeating.
        run = start("test_looping", {"rounds": 2, "simulate": {"draft@1": "slow"}})
        second_key = f"{run.pk}:draft@1"
        wait_until(
            lambda: ServiceEffect.objects.filter(
                idempotency_key=second_key, applied_at__isnull=False
            ).exists(),
            timeout=60,
            what="the second round's draft to be applied",
        )

        for name in ("worker-a", "worker-b"):
            workers.kill_worker(name)
        workers.ensure_workers(("worker-a", "worker-b"))

        run = finished(run, RunState.SUCCEEDED, timeout=90)
        first, second = run.steps.filter(node="draft", kind=StepKind.FORWARD).order_by("round")
        assert effects(run) == {"test.prepare": 1, "test.draft": 2, "test.publish": 1}
        assert (first.round, first.attempt) == (0, 1)
        assert (second.round, second.attempt) == (1, 2)
        assert ServiceEffect.objects.get(idempotency_key=second_key).requests_seen == 2
        assert run.events.filter(step=second, kind=EventKind.LEASE_EXPIRED).exists()
        assert run.steps.get(node="publish").round == 1

    def test_a_worker_killed_while_a_child_and_a_map_are_in_flight_applies_each_effect_once(
        self, workers, start, finished
    ):
        # The child's work and the map's second item apply their effect, then take
        # seconds to answer, heartbeating: both are in flight when the workers die.
        run = start(
            "test_child_and_map",
            {
                "child_simulate": {"child_work": "slow"},
                "items": ["a", "b", "c"],
                "simulate": {"item1": "slow"},
            },
        )
        wait_until(
            lambda: (
                ServiceEffect.objects.filter(
                    action__in=["child_work", "item"],
                    idempotency_key__in=[f"{run.pk}:each#1", *child_work_keys(run)],
                    applied_at__isnull=False,
                ).count()
                == 2
            ),
            timeout=60,
            what="the child's work and the map's second item to be applied",
        )

        for name in ("worker-a", "worker-b"):
            workers.kill_worker(name)
        workers.ensure_workers(("worker-a", "worker-b"))

        run = finished(run, RunState.SUCCEEDED, timeout=90)
        (child,) = WorkflowRun.objects.filter(parent_run=run)
        assert child.state == RunState.SUCCEEDED
        assert applied_by_action([run, child]) == {"child_work": 1, "item": 3, "after": 1}
        child_work = child.steps.get(node="child_work")
        second_item = run.steps.get(node="each", item=1, kind=StepKind.FORWARD)
        assert (child_work.attempt, second_item.attempt) == (2, 2)
        for key in (child_work.idempotency_key, second_item.idempotency_key):
            assert ServiceEffect.objects.get(idempotency_key=key).requests_seen == 2
        assert [result["item"] for result in run.results["each"]] == ["a", "b", "c"]
        assert run.results["call"] == {"done": True, "label": "only"}


def child_work_keys(run: WorkflowRun) -> list[str]:
    return [f"{child.pk}:child_work" for child in WorkflowRun.objects.filter(parent_run=run)]


def applied_by_action(runs: list[WorkflowRun]) -> dict[str, int]:
    applied = ServiceEffect.objects.filter(
        run_id__in=[str(run.pk) for run in runs], applied_at__isnull=False
    )
    counts: dict[str, int] = {}
    for action in applied.values_list("action", flat=True):
        counts[action] = counts.get(action, 0) + 1
    return counts


class TestPoisonMessage:
    def test_a_step_that_kills_its_worker_fails_after_its_attempts(
        self, workers, start, finished, effects
    ):
        run = start("test_poison", {})

        run = finished(run, RunState.COMPENSATED, timeout=90)

        poison = run.steps.get(node="poison")
        assert poison.state == StepState.FAILED
        assert poison.attempt == 3
        assert poison.last_error["type"] == "StartToCloseTimeout"
        assert run.events.filter(node="poison", kind=EventKind.STARTED).count() == 3
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}


class TestRedelivery:
    def test_the_same_message_delivered_twice_applies_one_effect(
        self, workers, start, finished, effects
    ):
        run = start("test_linear", {})
        # By node: a worker may have run the first step and scheduled the next already.
        first = run.steps.get(node="first")
        for _ in range(2):
            current_app.send_task(engine.EXECUTE_STEP_TASK, args=[first.pk])

        run = finished(run, RunState.SUCCEEDED)

        assert effects(run) == {"test.first": 1, "test.second": 1, "test.third": 1}
        assert ServiceEffect.objects.get(action="first").requests_seen == 1
        assert run.events.filter(node="first", kind=EventKind.STARTED).count() == 1


class TestCancellation:
    def test_cancelling_mid_activity_stops_it_and_undoes_everything(
        self, workers, start, finished, order_input, effects
    ):
        run = start("order", order_input(simulate={"shipping": "slow"}))
        wait_for_effect(run, "ship")

        engine.cancel_run(run_id=run.pk)

        run = finished(run, RunState.CANCELLED)
        assert steps_by_node(run)["ship"].last_error["type"] == "ActivityCancelled"
        assert "notify_customer" not in steps_by_node(run)
        assert effects(run) == {
            "inventory.reserve": 1,
            "payments.charge": 1,
            "shipping.ship": 1,
            "shipping.cancel": 1,
            "payments.refund": 1,
            "inventory.release": 1,
        }


class TestGraph:
    def test_parallel_join_all(self, workers, start, finished, effects):
        run = finished(start("test_parallel_all", {}), RunState.SUCCEEDED)

        assert effects(run) == {"test.left": 1, "test.right": 1, "test.after": 1}

    def test_parallel_join_any(self, workers, start, finished, effects):
        run = finished(start("test_parallel_any", {}), RunState.SUCCEEDED)

        assert effects(run) == {"test.left": 1, "test.after": 1}
        assert steps_by_node(run)["gate"].state == StepState.CANCELLED

    @pytest.mark.parametrize(("amount", "taken"), [(500, "big"), (5, "small")])
    def test_branch_both_ways(self, workers, start, finished, effects, amount, taken):
        run = finished(start("test_branching", {"amount": amount}), RunState.SUCCEEDED)

        assert effects(run) == {f"test.{taken}": 1}

    def test_a_signal_sent_before_the_wait_began_is_taken(self, workers, start, finished, effects):
        run = start("test_signalled", {})
        engine.signal_run(run_id=run.pk, name="go", signal_id="early-go")

        run = finished(run, RunState.SUCCEEDED)

        assert effects(run) == {"test.prepare": 1, "test.went": 1}

    def test_an_update_then_a_signal_by_key_finish_the_run_with_the_new_amount(
        self, workers, start, finished, effects
    ):
        run = start("test_quoted", {"order_id": "E-1", "amount": 100})
        wait_until(
            lambda: run.steps.filter(node="await_go", state=StepState.WAITING).exists(),
            timeout=60,
            what="the quote to wait for its go",
        )

        answer = engine.update_run(
            run_id=run.pk, name="change_amount", payload={"amount": 120, "reason": "extra"}
        )
        business_keys.signal_by_key(key=BusinessKey("test_quoted", "order_id", "E-1"), name="go")

        run = finished(run, RunState.SUCCEEDED)
        assert answer.result == {"was": 100, "now": 120}
        assert run.input["amount"] == 120
        assert effects(run) == {"test.prepare": 1, "test.charge": 1}

    def test_two_beats_fire_each_timer_once(self, workers, start, finished, effects):
        runs = [start("test_sleeping", {}) for _ in range(5)]

        for run in runs:
            run = finished(run, RunState.SUCCEEDED)
            assert run.events.filter(node="nap", kind=EventKind.COMPLETED).count() == 1
            assert effects(run) == {"test.wake_up": 1}

    def test_a_batch_of_timers_is_handed_over_a_few_steps_a_message(
        self, workers, start, finished, effects
    ):
        runs = [start("test_sleeping", {}) for _ in range(work.STEPS_SENT_ONE_BY_ONE + 10)]

        for run in runs:
            run = finished(run, RunState.SUCCEEDED)
            assert effects(run) == {"test.wake_up": 1}


class TestCatchDeadlineAndJoin:
    def test_a_declined_charge_takes_its_catch_path_on_real_workers(
        self, workers, start, finished, effects
    ):
        run = start("test_catching", {"simulate": {"charge": "decline"}})

        run = finished(run, RunState.SUCCEEDED)

        assert effects(run) == {"test.prepare": 1, "test.manual_review": 1}
        assert run.events.get(kind=EventKind.CAUGHT).detail["to"] == "manual_review"

    def test_the_beat_moves_a_run_on_at_its_deadline(self, workers, start, finished, effects):
        run = start("test_run_deadline_soon", {})

        run = finished(run, RunState.SUCCEEDED, timeout=30)

        assert steps_by_node(run)["await_go"].state == StepState.CANCELLED
        assert effects(run) == {"test.prepare": 1, "test.expire": 1}
        fired = run.events.get(kind=EventKind.DEADLINE_PASSED)
        assert fired.at >= run.started_at + timedelta(seconds=2)

    def test_a_two_of_three_join_stops_and_undoes_the_slow_branch(
        self, workers, start, finished, effects
    ):
        # a1 and b1 fail twice before they succeed: seconds, while c1 is long under way.
        simulate = {"c1": "slow", "a1": "flaky", "b1": "flaky"}
        run = start("test_two_of_three_branches", {"simulate": simulate})
        wait_for_effect(run, "c1")  # applied; the call goes on, heartbeating

        run = finished(run, RunState.SUCCEEDED)

        c1 = steps_by_node(run)["c1"]
        assert (c1.state, c1.may_have_applied) == (StepState.COMPENSATED, True)
        assert "c2" not in steps_by_node(run)
        assert effects(run)["test.undo_c1"] == 1
        assert effects(run)["test.after"] == 1
        # The slow call heard it at a heartbeat and stopped: its answer was not recorded.
        assert run.events.filter(node="c1", kind=EventKind.LATE_RESULT_DISCARDED).exists()
