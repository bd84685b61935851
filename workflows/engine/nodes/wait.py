"""Waits for a signal (approvals are one kind): a signal ends them, or their timeout does."""

from __future__ import annotations

from datetime import datetime

from workflows import due_times, registry
from workflows.dsl import WaitForSignal, Workflow
from workflows.engine import moves
from workflows.engine.work import UnitOfWork, new_step, settle
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepState


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: WaitForSignal,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Start waiting, run the kind's hook (a human task), and take a signal that came early."""
    due_at = None
    if node.timeout is not None:
        due_at = due_times.due_at(duration=node.timeout, start=now)
    step = new_step(work, run, node.name, StepState.WAITING, now, round=round, due_at=due_at)
    work.event(run, step, EventKind.WAITING, now, detail={"signals": sorted(node.signals)})
    hook = registry.node_hooks(node).enter
    if hook is not None:
        work.flush()
        hook(run, step, node)
    early = (
        run.signals.filter(name__in=list(node.signals), consumed_by__isnull=True)
        .order_by("received_at", "id")
        .first()
    )
    if early is not None:
        moves.engine().consume_signal(run, definition, step, node, early, now, work)


def due(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: WaitForSignal,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """The timeout passed with no signal: go the timeout's way, or fail the step."""
    work.event(run, step, EventKind.TIMED_OUT, now)
    moves.engine().leave_node(run, definition, step, work)
    if node.on_timeout is None:
        error = {"type": "WaitTimedOut", "message": f"no signal within {node.timeout}"}
        moves.engine().step_failed(run, definition, step, error, now, work)
        return
    step.succeed(result={"signal": None, "timed_out": True}, now=now)
    work.save(step)
    moves.engine().continue_to(run, definition, step, node.on_timeout, now, work)
    settle(run, work)
