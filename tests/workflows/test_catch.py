"""Catch paths (a BPMN error boundary, `Activity(on_error=...)`): a step that fails for good
with a matching error moves the run to the catch node instead of undoing it."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.conftest import steps_by_node
from tests.workflows.test_engine import later
from workflows import engine
from workflows.engine import execute
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.django_db


class TestCatchPath:
    def test_a_declined_charge_goes_to_manual_review_and_nothing_is_undone(
        self, start, drive, effects
    ):
        run = drive(start("test_catching", {"simulate": {"charge": "decline"}}))

        assert run.state == RunState.SUCCEEDED
        steps = steps_by_node(run)
        assert steps["charge"].state == StepState.FAILED
        assert "ship" not in steps
        assert effects(run) == {"test.prepare": 1, "test.manual_review": 1}

    def test_the_timeline_says_which_error_was_caught_and_where_it_went(self, start, drive):
        run = drive(start("test_catching", {"simulate": {"charge": "decline"}}))

        caught = run.events.get(kind=EventKind.CAUGHT)

        assert caught.node == "charge"
        assert caught.detail == {"error": "PaymentDeclined", "to": "manual_review"}
        kinds = list(run.events.filter(node="charge").order_by("id").values_list("kind", flat=True))
        assert kinds[-2:] == [EventKind.FAILED, EventKind.CAUGHT]

    def test_the_step_records_the_errors_base_classes_which_catch_paths_match(self, start, drive):
        run = drive(start("test_catching", {"simulate": {"charge": "decline"}}))

        error = steps_by_node(run)["charge"].last_error

        assert (error["type"], error["bases"]) == ("PaymentDeclined", ["NonRetryableError"])

    def test_an_error_with_no_catch_path_undoes_the_run_as_before(self, start, drive, effects):
        run = drive(start("test_catching", {"simulate": {"charge": "fail"}}))

        assert run.state == RunState.COMPENSATED
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}
        assert not run.events.filter(kind=EventKind.CAUGHT).exists()

    def test_a_charge_that_ran_out_of_time_is_caught_as_a_timeout(self, start, drive, effects):
        run = drive(start("test_catching", {}), max_steps=1)
        charge = run.steps.get(node="charge")
        execute.claim_step(charge.pk, now=timezone.now())  # the worker dies mid-call

        engine.sweep(now=later(600))  # its lease expires: its only attempt failed
        run = drive(run)

        charge.refresh_from_db()
        assert run.state == RunState.SUCCEEDED
        assert charge.last_error["type"] == "StartToCloseTimeout"
        assert charge.may_have_applied
        assert run.events.get(kind=EventKind.CAUGHT).detail["to"] == "manual_review"

    def test_earlier_steps_are_still_undone_when_the_run_fails_on_the_catch_path(
        self, start, drive, effects
    ):
        simulate = {"charge": "decline", "manual_review": "decline"}

        run = drive(start("test_catching", {"simulate": simulate}))

        assert run.state == RunState.COMPENSATED
        # The charge failed cleanly (nothing to undo); what came before it is undone.
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}

    def test_a_caught_timeout_is_undone_too_when_the_run_fails_later(self, start, drive, effects):
        simulate = {"manual_review": "decline"}
        run = drive(start("test_catching", {"simulate": simulate}), max_steps=1)
        charge = run.steps.get(node="charge")
        claim = execute.claim_step(charge.pk, now=timezone.now())
        execute.run_activity(claim)  # it charged, but its answer never came back

        engine.sweep(now=later(600))
        run = drive(run)

        assert run.state == RunState.COMPENSATED
        assert effects(run) == {
            "test.prepare": 1,
            "test.charge": 1,
            "test.undo_charge": 1,
            "test.undo_prepare": 1,
        }
