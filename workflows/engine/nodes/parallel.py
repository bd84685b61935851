"""Parallel splits: every branch is entered at once; a `Join` closes them."""

from __future__ import annotations

from datetime import datetime

from workflows.dsl import Parallel, Workflow
from workflows.engine import moves
from workflows.engine.work import UnitOfWork, new_step
from workflows.models import StepRun, WorkflowRun
from workflows.states import StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: Parallel,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    step = new_step(work, run, node.name, StepState.SUCCEEDED, now, round=round, result=None)
    for branch in node.branches:
        moves.engine().enter_node(run, definition, branch, came_from=step, now=now, work=work)
