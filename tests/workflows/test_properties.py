"""A stateful property test: no sequence of events leaves a run in an illegal state.

Hypothesis plays workers, crashes, redeliveries, late results, sweeps at a moving
clock, signals, cancellations, pauses and operator actions in any order. After
every event the rows must be consistent; once events stop and the system is left
to finish, every run must end in a terminal state (or wait, dead-lettered, for an
operator).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conftest import ORDER_INPUT
from workflows import engine, registry
from workflows.dsl import Activity
from workflows.engine import execute
from workflows.examples.models import ServiceEffect
from workflows.models import StepRun, WorkflowRun
from workflows.states import (
    FINAL_RUN_STATES,
    LIVE_STEP_STATES,
    RunState,
    StepKind,
    StepState,
)

STARTS = [
    ("order", {}),
    ("order", {"payment": "decline"}),
    ("order", {"payment": "flaky"}),
    ("order", {"shipping": "fail"}),
    ("order", {"shipping": "fail", "refund": "outage"}),
    ("test_parallel_all", {}),
    ("test_parallel_all", {"right": "decline"}),
    ("test_signalled", {}),
    ("test_branching", {}),
]
ENDED = (*FINAL_RUN_STATES, RunState.DEAD_LETTERED)


def start_input(workflow_type: str, simulate: dict) -> dict:
    if workflow_type == "order":
        return {**ORDER_INPUT, "simulate": simulate}
    if workflow_type == "test_branching":
        return {"amount": 500}
    return {"simulate": simulate}


class RunMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.offset = timedelta(0)
        self.abandoned: list[execute.Claim] = []

    def now(self):
        return timezone.now() + self.offset

    def runs(self) -> list[WorkflowRun]:
        return list(WorkflowRun.objects.order_by("created_at"))

    def pick_run(self, index: int) -> WorkflowRun:
        runs = self.runs()
        return runs[index % len(runs)]

    def scheduled(self) -> list[StepRun]:
        return list(StepRun.objects.filter(state=StepState.SCHEDULED).order_by("id"))

    @initialize()
    def clean(self) -> None:
        WorkflowRun.objects.all().delete()
        ServiceEffect.objects.all().delete()

    @rule(choice=st.sampled_from(STARTS))
    def start(self, choice) -> None:
        workflow_type, _simulate = choice
        engine.start_workflow(workflow_type=workflow_type, input=start_input(*choice))

    @precondition(lambda self: StepRun.objects.filter(state=StepState.SCHEDULED).exists())
    @rule(index=st.integers(min_value=0, max_value=20))
    def worker_runs_a_step(self, index: int) -> None:
        steps = self.scheduled()
        engine.execute_step(step_id=steps[index % len(steps)].pk)

    @precondition(lambda self: StepRun.objects.exists())
    @rule(index=st.integers(min_value=0, max_value=50))
    def broker_redelivers_a_message(self, index: int) -> None:
        steps = list(StepRun.objects.order_by("id"))
        engine.execute_step(step_id=steps[index % len(steps)].pk)

    @precondition(lambda self: StepRun.objects.filter(state=StepState.SCHEDULED).exists())
    @rule(index=st.integers(min_value=0, max_value=20))
    def worker_dies_mid_activity(self, index: int) -> None:
        steps = self.scheduled()
        claim = execute.claim_step(steps[index % len(steps)].pk, now=timezone.now())
        if claim is not None:
            self.abandoned.append(claim)

    @precondition(lambda self: self.abandoned)
    @rule(succeeded=st.booleans())
    def stalled_worker_reports_late(self, succeeded: bool) -> None:
        claim = self.abandoned.pop(0)
        outcome = (
            execute.Outcome(result={"late": True})
            if succeeded
            else execute.Outcome(error={"type": "Boom", "message": "late failure"})
        )
        execute.record_outcome(claim, outcome, now=timezone.now())

    @rule(seconds=st.sampled_from([1, 5, 40, 200, 400]))
    def time_passes_and_the_sweep_runs(self, seconds: int) -> None:
        self.offset += timedelta(seconds=seconds)
        engine.sweep(now=self.now())

    @precondition(lambda self: WorkflowRun.objects.exists())
    @rule(index=st.integers(min_value=0, max_value=10), name=st.sampled_from(["go", "stop"]))
    def a_signal_arrives(self, index: int, name: str) -> None:
        with contextlib.suppress(engine.RunAlreadyEnded):
            engine.signal_run(run_id=self.pick_run(index).pk, name=name)

    @precondition(lambda self: WorkflowRun.objects.exists())
    @rule(
        index=st.integers(min_value=0, max_value=10),
        action=st.sampled_from(
            [
                engine.cancel_run,
                engine.pause_run,
                engine.resume_run,
                engine.retry_dead_letter,
                engine.resume_dead_letter,
            ]
        ),
    )
    def an_operator_acts(self, index: int, action) -> None:
        with contextlib.suppress(engine.RunAlreadyEnded, engine.IllegalRunOperation):
            action(run_id=self.pick_run(index).pk)

    @invariant()
    def rows_are_consistent(self) -> None:
        # Every row read once, then checked run by run: the invariant runs after each event.
        steps_of: dict = {}
        for step in StepRun.objects.all():
            steps_of.setdefault(step.run_id, []).append(step)
        for run in WorkflowRun.objects.all():
            steps = steps_of.get(run.pk, [])
            assert run.state in RunState.values
            live = [step for step in steps if step.state in LIVE_STEP_STATES]
            if run.state in ENDED:
                assert not live, (run, live)
                assert run.state == RunState.DEAD_LETTERED or run.finished_at is not None
            if run.state in (RunState.COMPENSATED, RunState.CANCELLED):
                assert not _undoable_left(run, steps), (run, _undoable_left(run, steps))
            if run.state == RunState.SUCCEEDED:
                assert not [step for step in steps if step.kind == StepKind.COMPENSATION]
            running = [step for step in steps if step.state == StepState.RUNNING]
            assert all(step.lease_token and step.due_at for step in running)
        effects = {effect.pk: effect for effect in ServiceEffect.objects.all()}
        for undo in effects.values():
            if "undoes" in undo.data:
                undone = effects[undo.data["undoes"]]
                assert undone.applied_at is not None
                assert undone.run_id == undo.run_id

    def teardown(self) -> None:
        """Stop the events and let workers and sweeps finish: every run must end."""
        for run in WorkflowRun.objects.filter(state=RunState.PAUSED):
            engine.resume_run(run_id=run.pk)
        for _ in range(60):
            for step in self.scheduled():
                engine.execute_step(step_id=step.pk)
            self.offset += timedelta(days=1)
            engine.sweep(now=self.now())
            if not StepRun.objects.filter(state__in=LIVE_STEP_STATES).exists():
                break
        for run in WorkflowRun.objects.all():
            assert run.state in ENDED, (run, list(run.steps.all()))


def _undoable_left(run: WorkflowRun, steps: list[StepRun]) -> list[str]:
    definition = registry.get(run.workflow_type, run.workflow_version)
    return [
        step.node
        for step in steps
        if step.kind == StepKind.FORWARD
        and step.state == StepState.SUCCEEDED
        and isinstance(node := definition.node(step.node), Activity)
        and node.mutating
        and node.compensation is not None
    ]


@pytest.mark.django_db
def test_no_sequence_of_events_leaves_a_run_in_an_illegal_state():
    run_state_machine_as_test(
        RunMachine,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
