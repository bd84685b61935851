"""An operator retrying a failed run and skipping a stuck step (workflows.engine.operate)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.conftest import steps_by_node
from tests.workflows.test_engine import sweep_until_quiet
from workflows import engine, registry
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


class TestMoveRun:
    def test_a_waiting_run_moves_on_to_another_node_and_its_wait_is_cancelled(
        self, start, drive, effects
    ):
        run = drive(start("test_signalled", {}))
        assert run.state == RunState.WAITING

        engine.move_run(run_id=run.pk, to_node="went")

        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        waits = run.steps.filter(node="await_go")
        assert [step.state for step in waits] == [StepState.CANCELLED]
        assert effects(run) == {"test.prepare": 1, "test.went": 1}

    def test_a_completed_step_runs_again_in_a_new_round(self, start, drive, effects):
        run = drive(start("test_signalled", {}))

        engine.move_run(run_id=run.pk, to_node="prepare")

        run = drive(run)
        rounds = list(run.steps.filter(node="prepare").order_by("round"))
        assert [(step.round, step.state) for step in rounds] == [
            (0, StepState.SUCCEEDED),
            (1, StepState.SUCCEEDED),
        ]
        assert effects(run) == {"test.prepare": 2}
        assert run.state == RunState.WAITING

    def test_a_step_waiting_to_retry_is_cancelled_and_never_retried(self, start, drive, effects):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))
        assert steps_by_node(run)["second"].state == StepState.RETRY_WAIT

        engine.move_run(run_id=run.pk, to_node="third")

        run = sweep_until_quiet(run, drive)
        assert run.state == RunState.SUCCEEDED
        assert effects(run) == {"test.first": 1, "test.third": 1}

    def test_the_timeline_says_who_moved_from_where_to_where(self, start, drive):
        run = drive(start("test_signalled", {}))

        engine.move_run(run_id=run.pk, to_node="went")

        moved = StepEvent.objects.get(run=run, kind=EventKind.OPERATOR)
        assert moved.detail == {"action": "moved", "to": "went", "from": ["await_go"], "round": 1}

    def test_an_unknown_node_is_refused_naming_those_it_may_move_to(self, start, drive):
        run = drive(start("test_signalled", {}))

        with pytest.raises(engine.IllegalRunOperation, match="may move to: prepare, await_go"):
            engine.move_run(run_id=run.pk, to_node="nowhere")

    def test_a_node_inside_a_parallel_region_is_refused(self, start):
        run = start("test_parallel_all", {})

        with pytest.raises(engine.IllegalRunOperation, match="inside the parallel region"):
            engine.move_run(run_id=run.pk, to_node="right")
        with pytest.raises(engine.IllegalRunOperation, match="inside the parallel region"):
            engine.move_run(run_id=run.pk, to_node="together")
        assert engine.movable_nodes(registry.get("test_parallel_all")) == ["fan_out", "after"]

    def test_a_run_being_undone_or_over_is_refused(self, start, drive):
        undone = sweep_until_quiet(
            drive(start("test_linear", {"simulate": {"second": "fail"}})), drive
        )
        finished = drive(start("test_linear", {}))

        with pytest.raises(engine.IllegalRunOperation, match="this one is compensated"):
            engine.move_run(run_id=undone.pk, to_node="first")
        with pytest.raises(engine.IllegalRunOperation, match="this one is succeeded"):
            engine.move_run(run_id=finished.pk, to_node="first")
