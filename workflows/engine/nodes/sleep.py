"""Timers: the step waits until its due time, when the sweep moves the run on."""

from __future__ import annotations

from datetime import datetime

from workflows import due_times
from workflows.dsl import Sleep, Workflow
from workflows.engine import moves
from workflows.engine.work import UnitOfWork, new_step, settle
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: Sleep,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    due_at = due_times.due_at(duration=node.duration, start=now)
    new_step(work, run, node.name, StepState.WAITING, now, round=round, due_at=due_at)


def slept(now: datetime) -> dict[str, str]:
    """What a fired timer's step records (the sweep's set path writes the same)."""
    return {"slept_until": now.isoformat()}


# The timeline line a fired timer writes.
FIRED = EventKind.COMPLETED


def due(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: Sleep,
    now: datetime,
    work: UnitOfWork,
) -> None:
    step.succeed(result=slept(now), now=now)
    work.save(step)
    work.event(run, step, FIRED, now)
    moves.engine().continue_to(run, definition, step, node.next, now, work)
    settle(run, work)
