"""Activities: a worker runs them; the sweep re-sends lost ones, expires leases and retries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workflows import queues
from workflows.dsl import Activity, Workflow
from workflows.engine import limits, moves
from workflows.engine.work import CLAIMABLE_FORWARD_RUN_STATES, UnitOfWork, new_step, redispatch_at
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepKind, StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: Activity,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Schedule the step for a worker, or claim it for the worker recording now
    (`claimed_here`)."""
    if claimed_here(run=run, node=node, work=work):
        work.inline_claim = moves.engine().claim_inline(run, node, round, now, work)
        work.busy_runs.add(run.pk)
        return
    step = new_step(
        work, run, node.name, StepState.SCHEDULED, now, round=round, **scheduled(node, now)
    )
    work.send(step)


def claimed_here(*, run: WorkflowRun, node: Activity, work: UnitOfWork) -> bool:
    """Whether the worker recording now claims the activity's new step rather than
    scheduling it: a local one always, a remote one if eager dispatch allows (neither
    while the run is paused), the first one only."""
    return (
        work.inline
        and work.inline_claim is None
        and claims(node, eager=work.eager)
        and run.state in CLAIMABLE_FORWARD_RUN_STATES
    )


def claims(node: Activity, *, eager: bool) -> bool:
    """Whether a worker that enters `node` claims its new step rather than scheduling it
    for another: a local one always, a remote one with eager dispatch unless its queue or
    limits leave it to a message (the rule `claimed_here` and the straight path share)."""
    return node.local or (eager and queues.dispatched_eagerly(node))


def scheduled(node: Activity, now: datetime) -> dict[str, Any]:
    """The fields of a step scheduled for a worker at `now`, besides its state (the
    sweep's set path schedules with the same)."""
    return {"due_at": redispatch_at(node, now), "lease": node.timeouts.first_lease}


def due(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: Activity,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Re-send a step nobody took, fail an attempt whose lease expired, or retry now."""
    if step.state == StepState.SCHEDULED:
        limit = node.timeouts.schedule_to_start
        forward = step.kind == StepKind.FORWARD  # an undo is re-sent, never given up
        if forward and limit is not None and now - step.scheduled_at >= limit:
            # As in Temporal, a schedule-to-start timeout is not retried: no worker
            # is taking this kind of work, and another attempt would queue the same.
            error = {"type": "ScheduleToStartTimeout", "message": f"not started within {limit}"}
            moves.engine().step_failed(run, definition, step, error, now, work)
        elif forward and (held_until := _held_by_limits(run, node, now, work)) is not None:
            # Held back by its limits: look again when they may allow it. The timeline
            # says so once (the claim that refused it may have said so already).
            step.due_at = held_until
            work.save(step)
            if limits.first_hold(run, step):
                reason = limits.sweep_hold_reason(
                    workflow_type=run.workflow_type, node=node, work=work
                )
                work.event(
                    run,
                    step,
                    EventKind.HELD,
                    now,
                    detail=limits.held_detail(node, reason=reason, until=held_until),
                )
        else:
            step.due_at = redispatch_at(node, now)
            work.save(step)
            work.event(run, step, EventKind.REDISPATCHED, now)
            work.send(step)
    elif step.state == StepState.RUNNING:
        kind = "HeartbeatTimeout" if node.timeouts.heartbeat else "StartToCloseTimeout"
        error = {"type": kind, "message": "the attempt's lease expired (worker lost or stalled)"}
        step.may_have_applied = True
        # The lost attempt's STARTED event, written here since its worker never recorded it.
        work.event(run, step, EventKind.STARTED, step.started_at)
        work.event(run, step, EventKind.LEASE_EXPIRED, now, detail=error)
        moves.engine().attempt_failed(run, definition, step, error, False, now, work)
    elif step.state == StepState.RETRY_WAIT:
        step.reschedule(now=now, redispatch_at=redispatch_at(node, now))
        work.save(step)
        work.send(step)


def _held_by_limits(
    run: WorkflowRun, node: Activity, now: datetime, work: UnitOfWork
) -> datetime | None:
    """When to look again at a step of `node` its limits hold back, or None to send it."""
    if not queues.is_limited(node):
        return None
    return limits.sweep_holds_until(workflow_type=run.workflow_type, node=node, now=now, work=work)
