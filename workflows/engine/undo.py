"""Undoing: compensation in reverse completion order, cancellation, and dead letters an
operator retries or resumes.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from workflows.compensation import FinishedStep, steps_to_undo, undoes_a_child
from workflows.dsl import Workflow
from workflows.engine import advance
from workflows.engine.errors import IllegalRunOperation, RunAlreadyEnded
from workflows.engine.nodes import child
from workflows.engine.work import (
    CANCELLABLE_STEP_STATES,
    UNDOING_RUN_STATES,
    UnitOfWork,
    definition_of,
    lock_run,
    new_step,
    steps_of,
)
from workflows.models import StepRun, WorkflowRun
from workflows.states import ACTIVE_STEP_STATES, EventKind, RunState, StepKind, StepState


def undo_next(run: WorkflowRun, definition: Workflow, now: datetime, work: UnitOfWork) -> None:
    """Schedule the next compensation, or end the run once nothing is left to undo.

    Waits while a compensation is in flight (an activity's, or a child run's being
    compensated) or a forward step is still running (its outcome decides whether it
    needs undoing too).
    """
    if run.state not in UNDOING_RUN_STATES:
        return
    in_flight = Q(state__in=ACTIVE_STEP_STATES) | Q(
        kind=StepKind.COMPENSATION, state=StepState.WAITING
    )
    if steps_of(run, work).filter(in_flight).exists():
        return
    # Only what the plan needs: a map's thousand items are read without their results.
    finished = list(
        steps_of(run, work)
        .filter(kind=StepKind.FORWARD, state__in=_UNDOABLE_STEP_STATES)
        .defer("result", "last_error", "item_value")
    )
    plan = steps_to_undo(
        workflow=definition,
        finished=[
            FinishedStep(
                node=step.node,
                finished_at=step.finished_at,
                sequence=step.pk,
                succeeded=step.state == StepState.SUCCEEDED,
                uncertain=step.may_have_applied,
                round=step.round,
                item=step.item,
            )
            for step in finished
        ],
    )
    if plan:
        undone = next(step for step in finished if step.pk == plan[0].sequence)
        if undoes_a_child(definition.node(undone.node)):
            compensation = new_step(
                work,
                run,
                undone.node,
                StepState.WAITING,
                now,
                round=undone.round,
                kind=StepKind.COMPENSATION,
                item=undone.item,
                due_at=now + child.CHECK_EVERY,
            )
            work.event(run, compensation, EventKind.COMPENSATING, now)
            child.undo_child(run, compensation, now, work)
            return
        compensation = new_step(
            work,
            run,
            undone.node,
            StepState.SCHEDULED,
            now,
            round=undone.round,
            kind=StepKind.COMPENSATION,
            due_at=now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER),
            lease=definition.activity(undone.node).timeouts.first_lease,
            item=undone.item,
            item_value=undone.item_value if undone.item is not None else None,
        )
        work.event(run, compensation, EventKind.COMPENSATING, now)
        work.send(compensation)
        return
    if run.state == RunState.CANCELLING:
        run.finish_cancel(now=now)
        work.event(run, None, EventKind.CANCELLED, now)
    elif run.undone_for_parent or steps_of(run, work).filter(kind=StepKind.COMPENSATION).exists():
        run.finish_compensation(now=now)
        work.event(run, None, EventKind.COMPENSATED, now)
    else:
        run.fail(now=now)
        work.event(run, None, EventKind.FAILED, now, detail={"run": "failed, nothing to undo"})


_UNDOABLE_STEP_STATES = (StepState.SUCCEEDED, StepState.FAILED, StepState.CANCELLED)


def mark_undone(run: WorkflowRun, compensation: StepRun, work: UnitOfWork) -> None:
    """Mark the forward step that `compensation` undid (of its node, round and item)
    compensated."""
    original = steps_of(run, work).get(
        node=compensation.node,
        kind=StepKind.FORWARD,
        round=compensation.round,
        item=compensation.item,
    )
    original.mark_compensated()
    work.save(original)


def cancel_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Cancel a live run: nothing new starts, running activities hear it at their next
    heartbeat, completed steps are undone, and the run ends cancelled."""
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if run.state == RunState.CANCELLING:
            return run
        if run.is_finished or run.state in (RunState.COMPENSATING, RunState.DEAD_LETTERED):
            raise RunAlreadyEnded(run)
        definition = definition_of(run)
        run.request_cancel(now=now)
        work.event(run, None, EventKind.CANCELLED, now, detail={"requested": True})
        for step in run.steps.filter(kind=StepKind.FORWARD, state__in=CANCELLABLE_STEP_STATES):
            advance.cancel_step(run, definition, step, now, work)
        undo_next(run, definition, now, work)
        work.finish(run)
    return run


def retry_dead_letter(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Try the failed compensation again with a fresh attempt budget."""
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run, failed = _dead_letter_and_failed_step(run_id)
        run.reopen()
        failed.retry_by_operator(
            now=now, redispatch_at=now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER)
        )
        work.save(failed)
        work.send(failed)
        work.event(run, failed, EventKind.OPERATOR, now, detail={"action": "retried"})
        work.finish(run)
    return run


def resume_dead_letter(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Move past the failed compensation (an operator undid it by hand) and finish undoing."""
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run, failed = _dead_letter_and_failed_step(run_id)
        run.reopen()
        failed.skip_by_operator(now=now)
        work.save(failed)
        mark_undone(run, failed, work)
        work.event(run, failed, EventKind.OPERATOR, now, detail={"action": "skipped"})
        undo_next(run, definition_of(run), now, work)
        work.finish(run)
    return run


def _dead_letter_and_failed_step(run_id: uuid.UUID | str) -> tuple[WorkflowRun, StepRun]:
    run = lock_run(run_id)
    if run.state != RunState.DEAD_LETTERED:
        raise IllegalRunOperation(
            f"Only a dead-lettered run can be retried or resumed; this one is {run.state}."
        )
    failed = run.steps.filter(kind=StepKind.COMPENSATION, state=StepState.FAILED).first()
    if failed is None:  # pragma: no cover - dead letters always come from a failed undo
        raise IllegalRunOperation("This run has no failed compensation to retry.")
    return run, failed
