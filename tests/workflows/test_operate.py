"""An operator retrying a failed run and skipping a stuck step (workflows.engine.operate)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.conftest import steps_by_node
from tests.workflows.test_engine import sweep_until_quiet
from workflows import engine
from workflows.engine import execute
from workflows.models import StepEvent
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_run(start, drive):
    """A linear run whose first step failed three times with nothing to undo."""

    def make(behaviour: str = "outage"):
        run = start("test_linear", {"simulate": {"first": behaviour}})
        return sweep_until_quiet(drive(run), drive)

    return make


class TestRetryFailedRun:
    def test_the_failed_step_runs_again_and_the_run_succeeds(self, failed_run, drive, effects):
        run = failed_run()
        assert run.state == RunState.FAILED

        engine.retry_failed_run(run_id=run.pk)

        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert run.finished_at is not None
        assert run.error is None
        assert effects(run) == {"test.first": 1, "test.second": 1, "test.third": 1}
        retried = StepEvent.objects.get(run=run, kind=EventKind.OPERATOR)
        assert (retried.node, retried.detail) == ("first", {"action": "retried"})

    def test_the_step_gets_a_fresh_attempt_budget(self, failed_run):
        run = failed_run()

        engine.retry_failed_run(run_id=run.pk)

        first = run.steps.get(node="first")
        assert (first.state, first.attempt, first.finished_at) == (StepState.SCHEDULED, 0, None)

    def test_a_run_that_is_not_failed_is_refused_with_its_state(self, start):
        run = start("test_linear", {})

        with pytest.raises(engine.IllegalRunOperation, match="this one is running"):
            engine.retry_failed_run(run_id=run.pk)

    def test_a_compensated_run_is_refused(self, start, drive):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))
        run = sweep_until_quiet(run, drive)
        assert run.state == RunState.COMPENSATED

        with pytest.raises(engine.IllegalRunOperation, match="this one is compensated"):
            engine.retry_failed_run(run_id=run.pk)

    def test_retrying_twice_is_refused_the_second_time(self, failed_run):
        run = failed_run()
        engine.retry_failed_run(run_id=run.pk)

        with pytest.raises(engine.IllegalRunOperation, match="this one is running"):
            engine.retry_failed_run(run_id=run.pk)

        assert StepEvent.objects.filter(run=run, kind=EventKind.OPERATOR).count() == 1


class TestSkipStep:
    def test_a_failed_runs_failed_step_takes_the_given_result_and_the_run_goes_on(
        self, failed_run, drive, effects
    ):
        run = failed_run("fail")

        engine.skip_step(run_id=run.pk, node="first", result={"done_by_hand": True})

        run = drive(run)
        steps = steps_by_node(run)
        assert run.state == RunState.SUCCEEDED
        assert (steps["first"].state, steps["first"].result) == (
            StepState.SKIPPED,
            {"done_by_hand": True},
        )
        assert effects(run) == {"test.second": 1, "test.third": 1}

    def test_a_step_waiting_to_retry_is_skipped_and_its_retry_never_happens(
        self, start, drive, effects
    ):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))
        assert steps_by_node(run)["second"].state == StepState.RETRY_WAIT

        engine.skip_step(run_id=run.pk, node="second", result={"n": 2})

        run = sweep_until_quiet(run, drive)
        assert run.state == RunState.SUCCEEDED
        assert run.results["second"] == {"n": 2}
        assert effects(run) == {"test.first": 1, "test.third": 1}

    def test_a_running_attempts_late_result_is_discarded(self, start):
        run = start("test_linear", {})
        claim = execute.claim_step(run.steps.get().pk, now=timezone.now())

        engine.skip_step(run_id=run.pk, node="first", result="by hand")
        execute.record_outcome(claim, execute.Outcome(result="late"), now=timezone.now())

        first = run.steps.get(node="first")
        assert (first.state, first.result) == (StepState.SKIPPED, "by hand")
        assert StepEvent.objects.filter(run=run, kind=EventKind.LATE_RESULT_DISCARDED).exists()

    def test_the_last_step_skipped_ends_the_run_with_its_result(self, start, drive):
        run = drive(start("test_linear", {"simulate": {"third": "fail"}}))

        run = engine.skip_step(run_id=run.pk, node="third", result=[1, 2])

        assert (run.state, run.result) == (RunState.SUCCEEDED, [1, 2])

    def test_a_finished_step_is_refused(self, start, drive):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))

        with pytest.raises(engine.IllegalRunOperation, match="first is succeeded"):
            engine.skip_step(run_id=run.pk, node="first", result=None)

    def test_a_node_that_is_not_an_activity_is_refused(self, start):
        run = start("test_linear", {})

        with pytest.raises(engine.IllegalRunOperation, match="'nope' is not an activity"):
            engine.skip_step(run_id=run.pk, node="nope", result=None)

    def test_a_step_of_a_run_being_undone_is_refused(self, start, drive):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))
        run = sweep_until_quiet(run, drive)

        with pytest.raises(engine.IllegalRunOperation, match="this run is compensated"):
            engine.skip_step(run_id=run.pk, node="second", result=None)
