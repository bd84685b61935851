"""Joins: close a parallel region once all, any, or N of M of its branches arrived."""

from __future__ import annotations

from datetime import datetime

from workflows.dsl import Join, Workflow
from workflows.engine import moves
from workflows.engine.work import CANCELLABLE_STEP_STATES, UnitOfWork, steps_of
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepKind, StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: Join,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Count a branch in; the arrival that completes the join cancels the stragglers."""
    work.flush()
    step, _ = StepRun.objects.get_or_create(
        run=run,
        node=node.name,
        kind=StepKind.FORWARD,
        round=round,
        defaults={"state": StepState.WAITING, "scheduled_at": now, "result": {"arrived": []}},
    )
    if step.state != StepState.WAITING:
        return
    arrived = [*step.result["arrived"], came_from.node if came_from else None]
    step.result = {"arrived": arrived}
    if len(arrived) < node.required(definition.branch_count[node.name]):
        work.save(step)
        return
    step.succeed(result={"arrived": arrived}, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now, detail={"arrived": arrived})
    # Branches that lost the race stop here. A running attempt loses its lease: its
    # heartbeat tells it it was cancelled, its result (or failure) is discarded, and
    # it counts as maybe applied. What the lost branches completed is undone while
    # the run goes on (the run ends only once that is over).
    region = [name for name, closer in definition.join_of.items() if closer == node.name]
    engine = moves.engine()
    for straggler in steps_of(run, work).filter(
        node__in=region,
        kind=StepKind.FORWARD,
        round=round,
        state__in=[*CANCELLABLE_STEP_STATES, StepState.RUNNING],
    ):
        engine.cancel_step(run, definition, straggler, now, work, attempt_running=True)
    engine.undo_lost_branches(run, definition, node.name, round, now, work)
    engine.continue_to(run, definition, step, node.next, now, work)


def closed(run: WorkflowRun, name: str, round: int, work: UnitOfWork) -> bool:
    """Whether the join `name` already went on in `round` (a branch arriving later stops there)."""
    done = steps_of(run, work).filter(
        node=name, kind=StepKind.FORWARD, round=round, state=StepState.SUCCEEDED
    )
    return done.exists()
