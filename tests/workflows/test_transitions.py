"""The state machines' table of moves (workflows.engine.transitions), and updates it guards.

django-fsm's transitions are the specification: the compiled path refuses in SQL every
move they do not allow, and makes every move they do, for each model it writes.
"""

from __future__ import annotations

import itertools
import uuid

import django_fsm as fsm
import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import HumanTask
from approvals.states import TaskState
from workflows.engine import straight, transitions
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db

MODELS = (WorkflowRun, StepRun, HumanTask)


def _pairs(model: type[Model], *, allowed: bool) -> list[tuple[type[Model], str, str]]:
    moves = transitions.allowed(model)
    return [
        (model, source, target)
        for source, target in itertools.product(moves.states, repeat=2)
        if moves.allows(source, target) is allowed
    ]


DISALLOWED = [case for model in MODELS for case in _pairs(model, allowed=False)]
ALLOWED = [case for model in MODELS for case in _pairs(model, allowed=True)]


def _case_id(case: tuple[type[Model], str, str]) -> str:
    model, source, target = case
    return f"{model.__name__}:{source}->{target}"


@pytest.fixture
def row_of(start, order_input, manager_task):
    """A row of each model, put straight into a given state (no transition)."""
    run = start("order", order_input())
    rows = {WorkflowRun: run, StepRun: run.steps.get(), HumanTask: manager_task}

    def row_in(model: type[Model], state: str) -> Model:
        row = rows[model]
        model.objects.filter(pk=row.pk).update(state=state)
        return row

    return row_in


def _state(model: type[Model], pk) -> str:
    return model.objects.values_list("state", flat=True).get(pk=pk)


class TestTheTable:
    def test_is_read_from_the_models_transitions(self):
        runs = transitions.allowed(WorkflowRun)

        assert runs.sources(RunState.WAITING) == (RunState.RUNNING, RunState.WAITING)
        assert runs.allows(RunState.PENDING, RunState.RUNNING)
        assert not runs.allows(RunState.SUCCEEDED, RunState.RUNNING)

    def test_a_target_the_method_returns_stands_for_each_state_it_may_return(self):
        # WorkflowRun.reopen returns compensating or cancelling.
        runs = transitions.allowed(WorkflowRun)

        assert runs.allows(RunState.DEAD_LETTERED, RunState.COMPENSATING)
        assert runs.allows(RunState.DEAD_LETTERED, RunState.CANCELLING)

    def test_each_allowed_move_is_one_some_transition_makes_from_that_state(self):
        for model in MODELS:
            field = model._meta.get_field("state")
            made = set()
            for transition in field.get_all_transitions(model):
                for target in transitions._targets(transition.target, ()):
                    made.add((str(transition.source), target))
            assert {
                (source, target) for source, target in transitions.allowed(model).pairs()
            } == made, model.__name__

    def test_every_state_pair_of_every_model_is_tested(self):
        pairs = sum(len(transitions.allowed(model).states) ** 2 for model in MODELS)

        assert len(DISALLOWED) + len(ALLOWED) == pairs
        assert len(DISALLOWED) > len(ALLOWED) > 0

    def test_is_read_once_per_process(self):
        assert transitions.allowed(StepRun) is transitions.allowed(StepRun)


class TestGuardedUpdate:
    @pytest.mark.parametrize("case", DISALLOWED, ids=_case_id)
    def test_refuses_a_move_the_state_machine_does_not_allow(self, case, row_of):
        model, source, target = case
        row = row_of(model, source)

        with pytest.raises(fsm.TransitionNotAllowed):
            transitions.guarded_update(model, row.pk, target)

        assert _state(model, row.pk) == source

    @pytest.mark.parametrize("case", ALLOWED, ids=_case_id)
    def test_makes_a_move_the_state_machine_allows(self, case, row_of):
        model, source, target = case
        row = row_of(model, source)

        transitions.guarded_update(model, row.pk, target)

        assert _state(model, row.pk) == target

    def test_is_one_update_guarded_in_sql(self, row_of):
        step = row_of(StepRun, StepState.RUNNING)

        with CaptureQueriesContext(connection) as queries:
            transitions.guarded_update(StepRun, step.pk, StepState.SUCCEEDED, result={"ok": 1})

        [query] = [q["sql"] for q in queries.captured_queries]
        assert query.startswith('UPDATE "workflows_steprun" SET "state" = ')
        assert '"state" = ANY(' in query
        step.refresh_from_db()
        assert (step.state, step.result) == (StepState.SUCCEEDED, {"ok": 1})

    def test_a_stale_version_is_refused_and_a_current_one_bumped(self, row_of):
        task = row_of(HumanTask, TaskState.OPEN)
        task.refresh_from_db()

        with pytest.raises(fsm.TransitionNotAllowed):
            transitions.guarded_update(
                HumanTask, task.pk, TaskState.CLAIMED, version=task.version - 1
            )
        transitions.guarded_update(HumanTask, task.pk, TaskState.CLAIMED, version=task.version)

        assert HumanTask.objects.values_list("state", "version").get(pk=task.pk) == (
            TaskState.CLAIMED,
            task.version + 1,
        )

    def test_an_unknown_row_is_refused(self):
        with pytest.raises(fsm.TransitionNotAllowed):
            transitions.guarded_update(StepRun, 987654321, StepState.SUCCEEDED)

    def test_a_field_that_is_no_state_machine_is_not_read(self):
        with pytest.raises(TypeError):
            transitions.allowed(StepRun, "node")


class TestTheCompiledEnd:
    """The statement that records a run's last step and ends the run (straight.record_end)
    moves the step to succeeded and the run to succeeded: it refuses every source the state
    machines do not allow, and takes only those its straight case knows (a running step,
    a run moving forward), leaving the others to the general way."""

    def _end(self, row_of, *, step_state: str, run_state: str):
        step = row_of(StepRun, step_state)
        run = row_of(WorkflowRun, run_state)
        token = uuid.uuid4()
        StepRun.objects.filter(pk=step.pk).update(lease_token=token, due_at=None)
        now = timezone.now()
        return (
            run,
            step,
            straight.record_end(
                step_id=step.pk,
                run_id=run.pk,
                lease_token=token,
                started_at=now,
                result={"ok": True},
                now=now,
            ),
        )

    @pytest.mark.parametrize("source", transitions.allowed(StepRun).states)
    def test_a_step_leaves_only_from_running(self, source, row_of):
        run, step, ended = self._end(row_of, step_state=source, run_state=RunState.RUNNING)

        allowed = transitions.allowed(StepRun).allows(source, StepState.SUCCEEDED)
        if source == StepState.RUNNING:
            assert allowed
            assert ended is not None
            assert _state(StepRun, step.pk) == StepState.SUCCEEDED
            assert _state(WorkflowRun, run.pk) == RunState.SUCCEEDED
        else:
            assert ended is None
            assert _state(StepRun, step.pk) == source
            assert _state(WorkflowRun, run.pk) == RunState.RUNNING

    @pytest.mark.parametrize("source", transitions.allowed(WorkflowRun).states)
    def test_a_run_ends_only_from_running_or_waiting(self, source, row_of):
        run, step, ended = self._end(row_of, step_state=StepState.RUNNING, run_state=source)

        allowed = transitions.allowed(WorkflowRun).allows(source, RunState.SUCCEEDED)
        if source in (RunState.RUNNING, RunState.WAITING):
            assert allowed
            assert ended is not None
            assert _state(WorkflowRun, run.pk) == RunState.SUCCEEDED
        else:
            assert ended is None
            assert _state(WorkflowRun, run.pk) == source
            assert _state(StepRun, step.pk) == StepState.RUNNING
            assert not StepEvent.objects.filter(run=run, kind="completed").exists()
