"""N-of-M joins at run time: once enough branches arrived the run goes on, and the
branches that lost the race are stopped and undone while it does."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.conftest import steps_by_node
from tests.workflows.test_engine import sweep_until_quiet
from workflows import engine
from workflows.activity import ActivityCancelled
from workflows.engine import execute
from workflows.states import EventKind, RunState, StepKind, StepState

pytestmark = pytest.mark.django_db


def run_steps(run, *nodes: str) -> None:
    """Execute the scheduled steps of `nodes`, in this order, as a worker would."""
    for node in nodes:
        engine.execute_step(step_id=run.steps.get(node=node, kind=StepKind.FORWARD).pk)


class TestTwoOfThreeJoin:
    def test_two_branches_arrive_and_the_third_not_yet_started_is_cancelled(
        self, start, drive, effects
    ):
        run = start("test_two_of_three_branches", {})

        run_steps(run, "a1", "b1", "a2", "b2")
        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        steps = steps_by_node(run)
        assert sorted(steps["two_of_three"].result["arrived"]) == ["a2", "b2"]
        assert steps["c1"].state == StepState.CANCELLED
        assert "c2" not in steps
        assert effects(run) == {
            "test.a1": 1,
            "test.a2": 1,
            "test.b1": 1,
            "test.b2": 1,
            "test.after": 1,
        }

    def test_a_branch_that_completed_a_step_is_undone_while_the_run_goes_on(
        self, start, drive, effects
    ):
        run = start("test_two_of_three_branches", {})

        run_steps(run, "a1", "b1", "c1", "a2", "b2")
        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        steps = steps_by_node(run)
        assert (steps["c1"].state, steps["c2"].state) == (
            StepState.COMPENSATED,
            StepState.CANCELLED,
        )
        assert effects(run)["test.undo_c1"] == 1
        assert effects(run)["test.after"] == 1

    def test_the_run_ends_only_once_the_lost_branch_is_undone(self, start):
        run = start("test_two_of_three_branches", {})
        run_steps(run, "a1", "b1", "c1", "a2", "b2")

        run_steps(run, "after")

        run.refresh_from_db()
        assert run.state == RunState.RUNNING
        undo = run.steps.get(node="c1", kind=StepKind.COMPENSATION)
        engine.execute_step(step_id=undo.pk)
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED
        assert run.result == steps_by_node(run)["after"].result

    def test_a_running_step_of_the_third_hears_it_at_its_heartbeat_and_is_undone_after_it(
        self, start, drive, effects
    ):
        run = start("test_two_of_three_branches", {})
        run_steps(run, "a1", "b1", "c1", "a2")
        c2 = execute.claim_step(run.steps.get(node="c2").pk, now=timezone.now())
        execute.run_activity(c2)  # it applied its effect, and still runs
        lease_ends = run.steps.get(node="c2").due_at

        run_steps(run, "b2")

        with pytest.raises(ActivityCancelled):
            c2.context.heartbeat()
        # Its undo waits for its lease: until then it may still be applying its effect.
        undo = run.steps.get(node="c2", kind=StepKind.COMPENSATION)
        assert (undo.state, undo.due_at) == (StepState.SCHEDULED, lease_ends)
        compensating = run.events.get(step=undo, kind=EventKind.COMPENSATING)
        assert compensating.detail == {"compensation": True, "after": lease_ends.isoformat()}
        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        undone = run.events.filter(kind=EventKind.COMPENSATED).exclude(node="").order_by("id")
        assert [event.node for event in undone] == ["c2", "c1"]
        assert effects(run)["test.undo_c2"] == effects(run)["test.undo_c1"] == 1

    def test_a_lost_branch_whose_undo_fails_for_good_dead_letters_the_run(self, start, drive):
        run = start("test_two_of_three_branches", {"simulate": {"undo_c1": "fail"}})
        run_steps(run, "a1", "b1", "c1", "a2", "b2")

        run = sweep_until_quiet(drive(run), drive)

        assert run.state == RunState.DEAD_LETTERED
        assert run.error["dead_letter"]["node"] == "c1"

    def test_a_run_failing_meanwhile_undoes_every_branch_once(self, start, drive, effects):
        run = start("test_two_of_three_branches", {"simulate": {"after": "decline"}})
        run_steps(run, "a1", "b1", "c1", "a2", "b2")

        run = drive(run)

        assert run.state == RunState.COMPENSATED
        counts = effects(run)
        assert all(counts[f"test.undo_{node}"] == 1 for node in ("a1", "a2", "b1", "b2", "c1"))
