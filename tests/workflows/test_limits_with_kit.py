"""A definition of the kind a team writes in its first month, tested with the kit alone: a
catch path, a run deadline and a rate-limited map (the bank allows two payouts a minute)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from workflows import registry
from workflows.activity import ActivityContext, NonRetryableError
from workflows.dsl import (
    Activity,
    Map,
    NoCompensation,
    WaitForSignal,
    Workflow,
    check_definition,
)
from workflows.models import StepRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


class Declined(NonRetryableError):
    """The bank refused the batch: a business answer, never retried."""


def check(context: ActivityContext) -> dict:
    if context.input.get("declined"):
        raise Declined("over the daily limit")
    return {"checked": len(context.input["payees"])}


def pay(context: ActivityContext) -> dict:
    return {"paid": context.item}


def nothing(context: ActivityContext) -> None:
    return None


PAYOUTS = Workflow(
    name="test_kit_payouts",
    version=1,
    start="check",
    deadline=timedelta(minutes=10),
    on_deadline="expire",
    nodes=(
        Activity(
            "check",
            run=check,
            mutating=False,
            next="pay_each",
            on_error={"Declined": "manual_review"},
        ),
        WaitForSignal("manual_review", signals={"go_on": "pay_each", "stop": None}),
        Map(
            "pay_each",
            items=lambda data: data.input["payees"],
            activity=pay,
            compensate=NoCompensation("the bank reverses a payout itself"),
            max_concurrency=10,
            queue="payments",
            rate_limit="2/m",
            concurrency=1,
        ),
        Activity("expire", run=nothing, mutating=False),
    ),
)


@pytest.fixture(autouse=True)
def payouts():
    registry.register(PAYOUTS)
    yield PAYOUTS
    registry.unregister(PAYOUTS)


def paid(run) -> int:
    return StepRun.objects.filter(run=run, item__isnull=False, state=StepState.SUCCEEDED).count()


class TestPayouts:
    def test_passes_the_static_check(self, payouts):
        assert check_definition(payouts) == []

    def test_pays_two_a_minute_and_ends(self, workflow_env):
        run = workflow_env.start("test_kit_payouts", {"payees": ["a", "b", "c", "d", "e"]})

        assert paid(run) == 2
        workflow_env.advance(minutes=1)
        assert paid(run) == 4
        workflow_env.advance(minutes=1)

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "check", "pay_each")

    def test_a_declined_batch_waits_for_review_then_pays(self, workflow_env):
        run = workflow_env.start("test_kit_payouts", {"payees": ["a"], "declined": True})

        workflow_env.assert_state(run, RunState.WAITING)
        workflow_env.signal(run, "go_on")

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "check", "manual_review", "pay_each")

    def test_a_batch_the_rate_cannot_pay_before_the_deadline_expires(self, workflow_env):
        payees = [f"payee {n}" for n in range(30)]  # fifteen minutes at two a minute
        run = workflow_env.start("test_kit_payouts", {"payees": payees})

        workflow_env.advance(minutes=10)

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert workflow_env.path(run)[-1] == "expire"
        assert 20 <= paid(run) < 30
        # The payouts still held back by the rate were cancelled with the map.
        assert not StepRun.objects.filter(run=run, state=StepState.SCHEDULED).exists()
