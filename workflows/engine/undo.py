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
    LIVE_FORWARD_RUN_STATES,
    UNDO_IN_FLIGHT,
    UNDOING_RUN_STATES,
    UnitOfWork,
    definition_of,
    lock_run,
    new_step,
    settle,
    steps_of,
    undo_in_flight,
)
from workflows.models import StepRun, WorkflowRun
from workflows.states import (
    ACTIVE_STEP_STATES,
    LIVE_STEP_STATES,
    EventKind,
    RunState,
    StepKind,
    StepState,
)


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
    plan = steps_to_undo(workflow=definition, finished=[_finished(step) for step in finished])
    if plan:
        undone = next(step for step in finished if step.pk == plan[0].sequence)
        schedule_undo(run, definition, undone, now, work)
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


def schedule_undo(
    run: WorkflowRun, definition: Workflow, undone: StepRun, now: datetime, work: UnitOfWork
) -> None:
    """Create the compensation of `undone` and send it, or undo its child run.

    A step cancelled while its attempt ran is undone only once that attempt's lease
    is over (`StepRun.cancel`): until then the attempt may still be applying its
    effect. Its compensation waits, scheduled, and the sweep sends it then.
    """
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
    attempt_may_run_until = (
        undone.due_at if undone.state == StepState.CANCELLED and undone.due_at is not None else None
    )
    held = attempt_may_run_until is not None and attempt_may_run_until > now
    compensation = new_step(
        work,
        run,
        undone.node,
        StepState.SCHEDULED,
        now,
        round=undone.round,
        kind=StepKind.COMPENSATION,
        due_at=(
            attempt_may_run_until
            if held
            else now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER)
        ),
        lease=definition.activity(undone.node).timeouts.first_lease,
        item=undone.item,
        item_value=undone.item_value if undone.item is not None else None,
    )
    work.event(
        run,
        compensation,
        EventKind.COMPENSATING,
        now,
        detail={"after": attempt_may_run_until.isoformat()} if held else None,
    )
    if not held:
        work.send(compensation)


def undo_lost_branches(
    run: WorkflowRun, definition: Workflow, join: str, round: int, now: datetime, work: UnitOfWork
) -> bool:
    """Undo, one step at a time and most recent first, what the branches that lost the race
    of `join` (an `any` or N-of-M join that went on in `round`) completed, while the run
    goes on. Return whether nothing is left to undo there.

    Called when the join goes on, and again each time one of those undos finishes. A
    run that began undoing meanwhile undoes everything itself (`undo_next`).
    """
    if run.state not in LIVE_FORWARD_RUN_STATES:
        return False
    join_step = (
        steps_of(run, work)
        .filter(node=join, kind=StepKind.FORWARD, round=round, state=StepState.SUCCEEDED)
        .first()
    )
    if join_step is None:
        return False
    lost = definition.lost_nodes(join, join_step.result["arrived"])
    if not lost:
        return True
    steps = steps_of(run, work).filter(round=round, node__in=lost)
    if steps.filter(Q(state__in=ACTIVE_STEP_STATES) | UNDO_IN_FLIGHT).exists():
        return False  # one undo at a time, and never before a straggler's attempt is over
    finished = list(
        steps.filter(kind=StepKind.FORWARD, state__in=_UNDOABLE_STEP_STATES).defer(
            "result", "last_error"
        )
    )
    plan = steps_to_undo(workflow=definition, finished=[_finished(step) for step in finished])
    if not plan:
        return True
    undone = next(step for step in finished if step.pk == plan[0].sequence)
    schedule_undo(run, definition, undone, now, work)
    return False


def undo_finished(
    run: WorkflowRun, definition: Workflow, compensation: StepRun, now: datetime, work: UnitOfWork
) -> None:
    """Go on after `compensation` undid its step: with the run's undo, or a lost branch's
    (and end the run once that is over, if its own path ended meanwhile: see
    `advance.continue_to`)."""
    if run.state in UNDOING_RUN_STATES:
        undo_next(run, definition, now, work)
        return
    join = definition.join_of.get(compensation.node)
    if join is None or not undo_lost_branches(run, definition, join, compensation.round, now, work):
        return
    live = steps_of(run, work).filter(Q(kind=StepKind.FORWARD, state__in=LIVE_STEP_STATES))
    if live.exists() or undo_in_flight(run, work):
        settle(run, work)
        return
    lost = definition.lost_nodes(join, _arrived(run, join, compensation.round, work))
    last = (
        steps_of(run, work)
        .filter(kind=StepKind.FORWARD, state=StepState.SUCCEEDED)
        .exclude(node__in=lost)
        .order_by("-finished_at", "-id")
        .first()
    )
    run.succeed(result=last.result if last is not None else None, now=now)
    work.event(run, None, EventKind.COMPLETED, now)


def _arrived(run: WorkflowRun, join: str, round: int, work: UnitOfWork) -> list[str | None]:
    step = steps_of(run, work).get(node=join, kind=StepKind.FORWARD, round=round)
    return step.result["arrived"]


def _finished(step: StepRun) -> FinishedStep:
    return FinishedStep(
        node=step.node,
        finished_at=step.finished_at,
        sequence=step.pk,
        succeeded=step.state == StepState.SUCCEEDED,
        uncertain=step.may_have_applied,
        round=step.round,
        item=step.item,
    )


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
        cancel_locked(run, definition_of(run), now, work)
        work.finish(run)
    return run


def cancel_locked(run: WorkflowRun, definition: Workflow, now: datetime, work: UnitOfWork) -> None:
    """Cancel the run, its row locked by the caller (an operator's cancel, or its deadline)."""
    run.request_cancel(now=now)
    work.event(run, None, EventKind.CANCELLED, now, detail={"requested": True})
    waiting = steps_of(run, work).filter(kind=StepKind.FORWARD, state__in=CANCELLABLE_STEP_STATES)
    for step in waiting:
        advance.cancel_step(run, definition, step, now, work)
    undo_next(run, definition, now, work)


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
