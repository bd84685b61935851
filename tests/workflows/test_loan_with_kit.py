"""A catch path, a run deadline and a map in one definition (`test_loan`), tested the way a
workflow's author would: with the kit (`workflows.testing`), its clock and its replacements."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.workflows.definitions import CreditDeclined
from workflows.states import EventKind, RunState, StepKind, StepState

pytestmark = pytest.mark.django_db


def declined(context):
    raise CreditDeclined("the bureau said no")


class TestLoan:
    def test_a_good_credit_pays_every_tranche_two_at_a_time(self, workflow_env, effects):
        run = workflow_env.start("test_loan", {"tranches": [100, 200, 300]})

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "open_file", "check_credit", "disburse", "notify")
        assert effects(run)["test.item"] == 3

    def test_a_declined_credit_goes_to_underwriting_and_undoes_nothing(self, workflow_env):
        check = workflow_env.replace_activity("test_loan", "check_credit", declined)

        run = workflow_env.start("test_loan", {})

        workflow_env.assert_state(run, RunState.WAITING)
        workflow_env.assert_path(run, "open_file", "check_credit", "underwriting")
        assert check.count == 1  # caught on its first failure: it is not a retryable fault
        assert workflow_env.undone(run) == []
        assert run.events.filter(node="check_credit", kind=EventKind.CAUGHT).exists()

    def test_the_underwriter_approves_and_the_loan_is_paid(self, workflow_env):
        workflow_env.replace_activity("test_loan", "check_credit", declined)
        run = workflow_env.start("test_loan", {})

        run = workflow_env.signal(run, "approve")

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert workflow_env.path(run)[-2:] == ["disburse", "notify"]

    def test_an_application_nobody_decides_for_30_days_expires(self, workflow_env):
        workflow_env.replace_activity("test_loan", "check_credit", declined)
        run = workflow_env.start("test_loan", {})

        workflow_env.advance(days=29)
        workflow_env.assert_state(run, RunState.WAITING)
        workflow_env.advance(days=2)

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "open_file", "check_credit", "underwriting", "expire")
        assert run.steps.get(node="underwriting").state == StepState.CANCELLED
        fired = run.events.get(kind=EventKind.DEADLINE_PASSED)
        assert fired.at == run.started_at + timedelta(days=30)  # at its own time

    def test_a_tranche_that_fails_for_good_undoes_the_paid_ones_and_the_file(self, workflow_env):
        def pay(context):
            if context.item_index == 2:
                raise CreditDeclined("the account was closed")
            return {"paid": context.item}

        workflow_env.replace_activity("test_loan", "disburse", pay)

        run = workflow_env.start("test_loan", {})

        workflow_env.assert_state(run, RunState.COMPENSATED)
        assert workflow_env.undone(run) == ["disburse", "disburse", "open_file"]
        assert not run.steps.filter(kind=StepKind.FORWARD, node="underwriting").exists()
