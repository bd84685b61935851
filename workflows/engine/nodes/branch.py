"""Branches: a condition over the run's data picks the way on, at once."""

from __future__ import annotations

from datetime import datetime

from workflows.dsl import Branch, Workflow
from workflows.engine import moves
from workflows.engine.work import UnitOfWork, new_step
from workflows.models import StepRun, WorkflowRun
from workflows.states import StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: Branch,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    work.flush()  # the condition reads earlier results
    took = bool(node.condition(run.data))
    step = new_step(
        work, run, node.name, StepState.SUCCEEDED, now, round=round, result={"took": took}
    )
    moves.engine().continue_to(
        run, definition, step, node.if_true if took else node.if_false, now, work
    )
