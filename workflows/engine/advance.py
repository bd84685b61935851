"""Moving through the graph: entering nodes, going on from finished steps, leaving waits.

Everything here runs inside a use case's transaction, with the run row locked.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from workflows import registry
from workflows.dsl import Activity, Branch, Join, Parallel, Sleep, WaitForSignal, Workflow
from workflows.engine import execute, signals
from workflows.engine.work import LIVE_FORWARD_RUN_STATES, UnitOfWork, steps_of
from workflows.models import StepRun, WorkflowRun
from workflows.states import ACTIVE_STEP_STATES, EventKind, RunState, StepKind, StepState


def enter_node(
    run: WorkflowRun,
    definition: Workflow,
    node_name: str,
    *,
    came_from: StepRun | None,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Create the step for `node_name` and do what its kind does on entry."""
    node = definition.node(node_name)
    join = definition.join_of.get(node_name)
    if join is not None and _join_closed(run, join, work):
        return  # This branch lost to an `any` or N-of-M join that already went on.

    if isinstance(node, Activity):
        if node.local and work.inline and work.inline_claim is None:
            work.inline_claim = execute.claim_inline(run, node, now, work)
            work.busy_runs.add(run.pk)
        else:
            due_at = redispatch_at(node, now)
            step = new_step(
                work,
                run,
                node_name,
                StepState.SCHEDULED,
                now,
                due_at=due_at,
                lease=node.timeouts.first_lease,
            )
            work.send(step)
    elif isinstance(node, Branch):
        work.flush()  # the condition reads earlier results
        took = bool(node.condition(run.data))
        step = new_step(work, run, node_name, StepState.SUCCEEDED, now, result={"took": took})
        continue_to(run, definition, step, node.if_true if took else node.if_false, now, work)
    elif isinstance(node, Parallel):
        step = new_step(work, run, node_name, StepState.SUCCEEDED, now, result=None)
        for branch in node.branches:
            enter_node(run, definition, branch, came_from=step, now=now, work=work)
    elif isinstance(node, Join):
        _arrive_at_join(run, definition, node, came_from, now, work)
    elif isinstance(node, Sleep):
        new_step(work, run, node_name, StepState.WAITING, now, due_at=now + node.duration)
    elif isinstance(node, WaitForSignal):
        due_at = now + node.timeout if node.timeout is not None else None
        step = new_step(work, run, node_name, StepState.WAITING, now, due_at=due_at)
        work.event(run, step, EventKind.WAITING, now, detail={"signals": sorted(node.signals)})
        enter = registry.node_hooks(node).enter
        if enter is not None:
            work.flush()
            enter(run, step, node)
        early = (
            run.signals.filter(name__in=list(node.signals), consumed_by__isnull=True)
            .order_by("received_at", "id")
            .first()
        )
        if early is not None:
            signals.consume_signal(run, definition, step, node, early, now, work)
    else:  # pragma: no cover - the static check knows every kind
        raise TypeError(f"unknown node kind {type(node).__name__}")


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
        run.succeed(result=step.result, now=now)
        work.event(run, None, EventKind.COMPLETED, now)


def _arrive_at_join(
    run: WorkflowRun,
    definition: Workflow,
    join: Join,
    came_from: StepRun | None,
    now: datetime,
    work: UnitOfWork,
) -> None:
    work.flush()
    step, _ = StepRun.objects.get_or_create(
        run=run,
        node=join.name,
        kind=StepKind.FORWARD,
        defaults={"state": StepState.WAITING, "scheduled_at": now, "result": {"arrived": []}},
    )
    if step.state != StepState.WAITING:
        return
    arrived = [*step.result["arrived"], came_from.node if came_from else None]
    step.result = {"arrived": arrived}
    if len(arrived) < join.required(definition.branch_count[join.name]):
        work.save(step)
        return
    step.succeed(result={"arrived": arrived}, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now, detail={"arrived": arrived})
    # Branches that lost the race stop here; a running one loses its lease, so its
    # heartbeat tells it to stop and its result, or failure, is discarded.
    region = [name for name, closer in definition.join_of.items() if closer == join.name]
    for straggler in steps_of(run, work).filter(
        node__in=region,
        kind=StepKind.FORWARD,
        state__in=[*CANCELLABLE_STEP_STATES, StepState.RUNNING],
    ):
        cancel_step(run, definition, straggler, now, work)
    continue_to(run, definition, step, join.next, now, work)


def _join_closed(run: WorkflowRun, join: str, work: UnitOfWork) -> bool:
    closed = steps_of(run, work).filter(node=join, kind=StepKind.FORWARD, state=StepState.SUCCEEDED)
    return closed.exists()


def new_step(
    work: UnitOfWork,
    run: WorkflowRun,
    node: str,
    state: StepState,
    now: datetime,
    *,
    kind: StepKind = StepKind.FORWARD,
    due_at: datetime | None = None,
    result: Any = None,
    lease: timedelta | None = None,
) -> StepRun:
    step = StepRun(
        run=run,
        node=node,
        kind=kind,
        state=state,
        scheduled_at=now,
        due_at=due_at,
        lease=lease,
        result=result,
        finished_at=now if state == StepState.SUCCEEDED else None,
    )
    work.insert(step)
    return step


def redispatch_at(node: Activity, now: datetime) -> datetime:
    due = now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER)
    if node.timeouts.schedule_to_start is not None:
        due = min(due, now + node.timeouts.schedule_to_start)
    return due


def settle(run: WorkflowRun, work: UnitOfWork) -> None:
    """Mark a forward-moving run as running or waiting, by whether a worker has work."""
    if run.state not in (RunState.RUNNING, RunState.WAITING):
        return
    busy = (
        run.pk in work.busy_runs
        or steps_of(run, work).filter(state__in=ACTIVE_STEP_STATES).exists()
    )
    if busy and run.state == RunState.WAITING:
        run.wake()
    elif not busy and run.state == RunState.RUNNING:
        run.wait()


CANCELLABLE_STEP_STATES = (StepState.SCHEDULED, StepState.RETRY_WAIT, StepState.WAITING)


def cancel_step(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: UnitOfWork
) -> None:
    step.cancel(now=now)
    work.save(step)
    work.event(run, step, EventKind.CANCELLED, now)
    leave_node(run, definition, step, work)


def leave_node(run: WorkflowRun, definition: Workflow, step: StepRun, work: UnitOfWork) -> None:
    """Tell the node kind's hook that a waiting step is over (e.g. close its human tasks)."""
    node = definition.node(step.node)
    leave = registry.node_hooks(node).leave
    if leave is not None:
        work.flush()
        leave(run, step, node)
