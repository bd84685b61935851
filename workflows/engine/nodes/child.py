"""Child workflows: a step that starts a run of another type and waits for it to end.

A `ChildWorkflow` node's step waits on one child at a time, and so does each item
of a `Map` over a child workflow (see nodes/map.py); this module does the waiting
for both. Each attempt of the step is one child run, started in the transaction
that schedules the attempt and keyed on the step's idempotency key and attempt
(`<step key>/attempt-<n>`), so a redelivered message or a replayed use case finds
the child it started and never starts a second one; a retry starts the next
attempt's child only once the failed one has ended.

Lock order: the parent before the child, always. The parent's use cases lock the
child to start, cancel or compensate it; a child never locks its parent. Its end
is told to the parent after the child's transaction commits (`children.child_ended`,
from the unit of work), and in case that word is lost (the process died between
the commit and the telling) the sweep looks at a waiting step every `CHECK_EVERY`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from workflows.dsl import ChildWorkflow, InvalidInput, Map, Node, RetryPolicy, Workflow
from workflows.engine import moves
from workflows.engine.work import (
    LIVE_FORWARD_RUN_STATES,
    UnitOfWork,
    definition_of,
    lock_run,
    new_step,
    settle,
)
from workflows.models import StepRun, WorkflowRun
from workflows.registry import UnknownWorkflow
from workflows.retries import next_attempt_at
from workflows.states import FINAL_RUN_STATES, EventKind, RunState, StepKind, StepState

# How often the sweep looks at a step whose child has not been heard from (the
# child's end is normally told at once; this only covers a word that was lost).
CHECK_EVERY = timedelta(minutes=5)

# A child in one of these has its own undo under way or waits for an operator: it
# cannot be cancelled, and ends by itself.
_NOT_CANCELLABLE = (RunState.COMPENSATING, RunState.CANCELLING, RunState.DEAD_LETTERED)


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: ChildWorkflow,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    step = new_step(work, run, node.name, StepState.WAITING, now, round=round)
    start_child(
        run,
        definition,
        step,
        workflow_type=node.workflow,
        input_of=lambda: node.input(run.data),
        now=now,
        work=work,
    )


def start_child(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    *,
    workflow_type: str,
    input_of: Callable[[], Mapping[str, Any]],
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Start the child run of the step's next attempt and wait for it.

    An input that cannot be computed or that the child's type refuses, or a type
    that is not registered, fails the step at once: another attempt would do the same.
    """
    work.flush()  # the child names the step by its id
    step.await_child(now=now, check_at=now + CHECK_EVERY)
    work.save(step)
    try:
        child_input = dict(input_of())
    except Exception as error:
        _cannot_start(run, definition, step, "ChildInputError", str(error), now, work)
        return
    try:
        child, created = moves.engine().start_workflow(
            workflow_type=workflow_type,
            input=child_input,
            idempotency_key=f"{step.idempotency_key}/attempt-{step.attempt}",
            correlation_id=run.correlation_id or str(run.pk),
            now=now,
            parent_step=step,
        )
    except (UnknownWorkflow, InvalidInput) as error:
        _cannot_start(run, definition, step, type(error).__name__, str(error), now, work)
        return
    work.event(
        run,
        step,
        EventKind.STARTED,
        now,
        detail={"child_run": str(child.pk), "workflow": workflow_type, "new": created},
    )


def _cannot_start(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    kind: str,
    message: str,
    now: datetime,
    work: UnitOfWork,
) -> None:
    error = {"type": kind, "message": message[:2000], "attempt": step.attempt}
    work.event(run, step, EventKind.ERRORED, now, detail=error)
    moves.engine().step_failed(run, definition, step, error, now, work)


def latest_child(step: StepRun) -> WorkflowRun | None:
    """The child run of the step's latest attempt (for an undo: of the step it undoes)."""
    return (
        WorkflowRun.objects.filter(
            parent_run_id=step.run_id,
            parent_step__node=step.node,
            parent_step__kind=StepKind.FORWARD,
            parent_step__round=step.round,
            parent_step__item=step.item,
        )
        .order_by("-created_at")
        .first()
        if step.kind == StepKind.COMPENSATION
        else step.children.order_by("-created_at").first()
    )


def take_outcome(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: UnitOfWork
) -> None:
    """Act on the end of the step's child: go on with its result, retry, fail, or (for an
    undo) mark the undone step compensated. A child still live is looked at again later."""
    child = latest_child(step)
    if child is None or child.state not in FINAL_RUN_STATES:
        step.due_at = now + CHECK_EVERY
        work.save(step)
        return
    if step.kind == StepKind.COMPENSATION:
        step.succeed(result={"child_run": str(child.pk), "child_state": child.state}, now=now)
        work.save(step)
        work.event(run, step, EventKind.COMPLETED, now, detail={"child_run": str(child.pk)})
        moves.engine().mark_undone(run, step, work)
        work.event(run, step, EventKind.COMPENSATED, now)
        moves.engine().undo_next(run, definition, now, work)
        return
    if child.state == RunState.SUCCEEDED:
        step.succeed(result=child.result, now=now)
        work.save(step)
        work.event(run, step, EventKind.COMPLETED, now, detail={"child_run": str(child.pk)})
        moves.engine().step_succeeded_after(run, definition, step, now, work)
        return
    error = {
        "type": "ChildRunCancelled" if child.state == RunState.CANCELLED else "ChildRunFailed",
        "message": f"child run {child.pk} ({child.workflow_type}) ended {child.state}",
        "child_run": str(child.pk),
        "child_error": child.error,
        "attempt": step.attempt,
    }
    work.event(run, step, EventKind.ERRORED, now, detail=error)
    retry_at = next_attempt_at(
        policy=_retry_policy(definition.node(step.node)),
        attempt=step.attempt,
        error_type=error["type"],
        # Someone cancelled the child: starting another would undo their decision.
        error_is_final=child.state == RunState.CANCELLED,
        now=now,
    )
    if retry_at is not None and run.state in LIVE_FORWARD_RUN_STATES:
        step.schedule_retry(error=error, retry_at=retry_at)
        work.save(step)
        work.event(run, step, EventKind.RETRY_SCHEDULED, now, detail={"retry_at": retry_at})
        return
    moves.engine().step_failed(run, definition, step, error, now, work)


def _retry_policy(node: Node) -> RetryPolicy:
    assert isinstance(node, ChildWorkflow | Map)
    return node.retry


def due(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: ChildWorkflow | Map,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Start the retry's child, or look at a child not heard from."""
    if step.state == StepState.RETRY_WAIT:
        start_child(
            run,
            definition,
            step,
            workflow_type=_workflow_of(node),
            input_of=lambda: _input_of(run, node, step),
            now=now,
            work=work,
        )
        settle(run, work)
    elif step.state == StepState.WAITING:
        take_outcome(run, definition, step, now, work)
        settle(run, work)


def _workflow_of(node: ChildWorkflow | Map) -> str:
    assert node.workflow is not None
    return node.workflow


def _input_of(run: WorkflowRun, node: ChildWorkflow | Map, step: StepRun) -> Mapping[str, Any]:
    if isinstance(node, Map):
        return node.child_input(run.data, step.item_value)
    return node.input(run.data)


def leave(
    run: WorkflowRun, definition: Workflow, step: StepRun, node: Node, work: UnitOfWork
) -> None:
    """The step was cancelled: cancel its live child (which undoes what it did), and wait
    for the child to end, as for an undo, so the parent ends after its child."""
    if step.kind != StepKind.FORWARD or step.attempt == 0:
        return  # an item that never started has no child
    child = step.children.order_by("-created_at").first()
    if child is None or child.is_finished:
        return
    now = step.finished_at or timezone.now()
    if child.state not in _NOT_CANCELLABLE:
        child = moves.engine().cancel_run(run_id=child.pk, now=now)
    if child.is_finished:
        return  # nothing to undo: it ended cancelled at once
    # The child undoes its steps (or waits for an operator): this undo of the step ends
    # when the child does (`take_outcome`), and the parent's undo waits for it.
    waiting = new_step(
        work,
        run,
        step.node,
        StepState.WAITING,
        now,
        round=step.round,
        kind=StepKind.COMPENSATION,
        item=step.item,
        due_at=now + CHECK_EVERY,
    )
    work.event(run, waiting, EventKind.COMPENSATING, now, detail={"child_run": str(child.pk)})


def undo_child(run: WorkflowRun, compensation: StepRun, now: datetime, work: UnitOfWork) -> None:
    """Compensate the child that the undone step's attempt ran to success.

    The child's own compensations run in reverse order; it ends compensated, and its
    end marks `compensation` done (see `take_outcome`).
    """
    work.flush()
    found = latest_child(compensation)
    if found is None:  # pragma: no cover - a succeeded child step always has its child
        return
    child = lock_run(found.pk)
    if child.state != RunState.SUCCEEDED:
        return  # already undone: its end is (or was) told as usual
    child.undo_for_parent(parent_run_id=run.pk)
    child_work = UnitOfWork()
    child_work.event(
        child, None, EventKind.COMPENSATING, now, detail={"undone_for_parent": str(run.pk)}
    )
    moves.engine().undo_next(child, definition_of(child), now, child_work)
    child_work.finish(child)
