"""Going back: start another round of a loop at an earlier node, or leave the loop when
its rounds are spent.

A GoBack is the only back edge a definition may have (the static check refuses
every other cycle), so this is where a run's rounds are counted. The count is the
node's own earlier steps in the run, one indexed query, paid only by runs that
reach a GoBack. The target is entered one round up (`round` + 1): every node of
the loop body gets a new step with a new idempotency key, and the earlier rounds'
steps stay as they were, for the timeline and for compensation.
"""

from __future__ import annotations

from datetime import datetime

from workflows.dsl import GoBack, Workflow
from workflows.engine import moves
from workflows.engine.work import UnitOfWork, new_step, steps_of
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepKind, StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: GoBack,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Go back to `node.to` while rounds remain; otherwise go on to `node.otherwise`, or fail."""
    assert node.max_rounds is not None  # the static check refuses an unbounded GoBack
    went_back_before = steps_of(run, work).filter(node=node.name, kind=StepKind.FORWARD).count()
    rounds_run = went_back_before + 1
    if rounds_run < node.max_rounds:
        step = new_step(
            work,
            run,
            node.name,
            StepState.SUCCEEDED,
            now,
            round=round,
            result={"went_back_to": node.to, "rounds_run": rounds_run},
        )
        work.event(run, step, EventKind.COMPLETED, now, detail={"went_back_to": node.to})
        moves.engine().enter_node(
            run, definition, node.to, came_from=step, round=round + 1, now=now, work=work
        )
        return
    if node.otherwise is None:
        step = new_step(work, run, node.name, StepState.WAITING, now, round=round)
        error = {
            "type": "RoundsExhausted",
            "message": f"went back to {node.to!r} {node.max_rounds - 1} times, the most allowed",
        }
        moves.engine().step_failed(run, definition, step, error, now, work)
        return
    step = new_step(
        work,
        run,
        node.name,
        StepState.SUCCEEDED,
        now,
        round=round,
        result={"went_back_to": None, "rounds_run": rounds_run},
    )
    work.event(run, step, EventKind.COMPLETED, now, detail={"rounds_exhausted": rounds_run})
    moves.engine().continue_to(run, definition, step, node.otherwise, now, work)
