"""Moving through the graph: entering nodes, going on from finished steps, leaving waits.

Everything here runs inside a use case's transaction, with the run row locked.
This is the dispatcher over node kinds: it imports `nodes`, and the node modules
reach these functions only through `moves`.
"""

from __future__ import annotations

from datetime import datetime

from workflows import registry
from workflows.dsl import Workflow
from workflows.engine import nodes
from workflows.engine.nodes import join
from workflows.engine.work import LIVE_FORWARD_RUN_STATES, UnitOfWork, undo_in_flight
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepState


def enter_node(
    run: WorkflowRun,
    definition: Workflow,
    node_name: str,
    *,
    came_from: StepRun | None,
    now: datetime,
    work: UnitOfWork,
    round: int | None = None,
) -> None:
    """Create the step for `node_name` and do what its kind does on entry.

    The step is in the round of the step the run came from (0 at the start), unless
    `round` says otherwise: a GoBack enters its target one round up. Reading the
    round from `came_from` costs no query, so a definition without loops pays nothing.
    """
    if round is None:
        round = came_from.round if came_from is not None else 0
    node = definition.node(node_name)
    closer = definition.join_of.get(node_name)
    if closer is not None and join.closed(run, closer, round, work):
        return  # This branch lost to an `any` or N-of-M join that already went on.
    nodes.kind_of(node).enter(
        run, definition, node, came_from=came_from, round=round, now=now, work=work
    )


def continue_to(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    next_node: str | None,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Go on from a finished step to `next_node`, or end the run if there is none."""
    if next_node is not None:
        enter_node(run, definition, next_node, came_from=step, now=now, work=work)
    elif run.state in LIVE_FORWARD_RUN_STATES:
        if definition.has_racing_joins and undo_in_flight(run, work):
            return  # a lost branch is still being undone: its last undo ends the run
        run.succeed(result=step.result, now=now)
        work.event(run, None, EventKind.COMPLETED, now)


def cancel_step(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    now: datetime,
    work: UnitOfWork,
    *,
    attempt_running: bool = False,
) -> None:
    """Cancel a step that is not over. With `attempt_running`, its attempt is still at work
    on a worker: it loses its lease (its result will be discarded, its heartbeat says it
    was cancelled), it may have applied its effect, and its undo waits for its lease."""
    if attempt_running and step.state == StepState.RUNNING:
        step.may_have_applied = True
        step.cancel(now=now, attempt_may_run_until=step.due_at)
    else:
        step.cancel(now=now)
    work.save(step)
    work.event(run, step, EventKind.CANCELLED, now)
    leave_node(run, definition, step, work)


def leave_node(run: WorkflowRun, definition: Workflow, step: StepRun, work: UnitOfWork) -> None:
    """Tell the node kind, then its hooks, that a waiting step is over (cancel a child run,
    close its human tasks)."""
    node = definition.node(step.node)
    kind_leave = nodes.kind_of(node).leave
    if kind_leave is not None:
        kind_leave(run, definition, step, node, work)
    leave = registry.node_hooks(node).leave
    if leave is not None:
        work.flush()
        leave(run, step, node)
