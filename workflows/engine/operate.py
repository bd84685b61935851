"""An operator steering a run: retry a failed run, skip a stuck step, move a run.

Dead letters (a failed undo) are `undo`'s; pausing is `pause`'s. These are for
forward work: a run that failed with nothing to undo can go back to its failed
step with a fresh attempt budget; a step that keeps failing or never finishes
can be given, by hand, the result it should have had, so the run goes on; and a
live run can be moved to any node it could reach, in a new round (so a step it
already completed runs again, under a new idempotency key), what was in flight
cancelled as a deadline's move cancels it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows.dsl import Activity, Join, Workflow
from workflows.engine import advance
from workflows.engine.errors import IllegalRunOperation
from workflows.engine.work import (
    LIVE_FORWARD_RUN_STATES,
    UnitOfWork,
    definition_of,
    lock_run,
    redispatch_at,
    settle,
    steps_of,
)
from workflows.models import StepRun, WorkflowRun
from workflows.states import LIVE_STEP_STATES, EventKind, RunState, StepKind, StepState

# Steps an operator may skip: stuck ones, never one that finished or waits for a person.
SKIPPABLE_STEP_STATES = (
    StepState.SCHEDULED,
    StepState.RUNNING,
    StepState.RETRY_WAIT,
    StepState.FAILED,
)


def retry_failed_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Send a failed run back to its failed step with a fresh attempt budget.

    Only a run that failed with nothing to undo: once its completed steps were
    compensated, going on from the failed step would build on undone work.
    """
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if run.state != RunState.FAILED:
            raise IllegalRunOperation(
                f"Only a failed run can be retried this way; this one is {run.state}."
            )
        definition = definition_of(run)
        failed = _failed_forward_step(run, definition)
        run.retry_failed()
        failed.retry_by_operator(
            now=now, redispatch_at=redispatch_at(definition.activity(failed.node), now)
        )
        work.save(failed)
        work.send(failed)
        work.event(run, failed, EventKind.OPERATOR, now, detail={"action": "retried"})
        work.finish(run)
    return run


def skip_step(
    *, run_id: uuid.UUID | str, node: str, result: Any, now: datetime | None = None
) -> WorkflowRun:
    """Give a stuck activity step `result` by hand and go on from it, as if it had succeeded.

    A stuck step is scheduled, running, waiting to retry, or (in a run that failed
    with nothing to undo) failed. A skipped step is never compensated: Baton did
    not do its work, so Baton does not undo it.
    """
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if run.state not in (*LIVE_FORWARD_RUN_STATES, RunState.FAILED):
            raise IllegalRunOperation(
                "Only a step of a running, waiting, paused or failed run can be skipped; "
                f"this run is {run.state}."
            )
        definition = definition_of(run)
        node_def = definition.nodes_by_name.get(node)
        if not isinstance(node_def, Activity):
            raise IllegalRunOperation(f"{node!r} is not an activity of this run's workflow.")
        # A node run in several rounds of a loop: its latest round is the one that is stuck.
        step = run.steps.filter(node=node, kind=StepKind.FORWARD).order_by("-round").first()
        if step is None or step.state not in SKIPPABLE_STEP_STATES:
            state = step.state if step else "not started"
            raise IllegalRunOperation(
                f"Only a scheduled, running, retrying or failed step can be skipped; {node} is "
                f"{state}."
            )
        if run.state == RunState.FAILED:
            _failed_forward_step(run, definition)  # refuses a run that cannot go on
            run.retry_failed()
        step.skip_with_result(result=result, now=now)
        work.save(step)
        work.event(run, step, EventKind.OPERATOR, now, detail={"action": "skipped"})
        advance.continue_to(run, definition, step, node_def.next, now, work)
        settle(run, work)
        work.finish(run)
    return run


# Runs an operator may move: those going forward and not paused (resume one first).
MOVABLE_RUN_STATES = (RunState.RUNNING, RunState.WAITING)


def move_run(*, run_id: uuid.UUID | str, to_node: str, now: datetime | None = None) -> WorkflowRun:
    """Move a live run to `to_node`: cancel what is in flight (a running attempt hears it
    at its next heartbeat and its late result is discarded) and enter the node in a new
    round, so a node that already ran runs again under a new idempotency key. Completed
    steps stay done and are undone, as ever, if the run fails later.

    Refused for a run that is paused, being undone or over, and for a node the run could
    never reach: one it does not have, or one inside a parallel region or a join, whose
    join would wait for branches that never started.
    """
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if run.state not in MOVABLE_RUN_STATES:
            raise IllegalRunOperation(_why_not_movable(run.state))
        definition = definition_of(run)
        refusal = unreachable(definition, to_node)
        if refusal:
            raise IllegalRunOperation(refusal)
        forward = steps_of(run, work).filter(kind=StepKind.FORWARD)
        in_flight = list(forward.filter(state__in=LIVE_STEP_STATES).order_by("id"))
        latest = max((step.round for step in forward.only("round")), default=0)
        work.event(
            run,
            None,
            EventKind.OPERATOR,
            now,
            detail={
                "action": "moved",
                "to": to_node,
                "from": [step.node for step in in_flight],
                "round": latest + 1,
            },
        )
        for step in in_flight:
            advance.cancel_step(
                run, definition, step, now, work, attempt_running=step.state == StepState.RUNNING
            )
        advance.enter_node(
            run, definition, to_node, came_from=None, now=now, work=work, round=latest + 1
        )
        settle(run, work)
        work.finish(run)
    return run


def movable_nodes(definition: Workflow) -> list[str]:
    """The nodes a run of `definition` may be moved to, in the definition's order."""
    return [node.name for node in definition.nodes if not unreachable(definition, node.name)]


def unreachable(definition: Workflow, node: str) -> str:
    """Why a run of `definition` could never be moved to `node` ("" if it can be)."""
    found = definition.nodes_by_name.get(node)
    if found is None:
        names = ", ".join(movable_nodes(definition))
        return f"{node!r} is not a node of this run's workflow; it may move to: {names}."
    if node in definition.join_of or isinstance(found, Join):
        join = definition.join_of.get(node, node)
        return (
            f"{node!r} is inside the parallel region that {join!r} joins: its join would wait"
            " for branches that never started. Move the run to the parallel node itself."
        )
    return ""


def _why_not_movable(state: str) -> str:
    if state == RunState.PAUSED:
        return "This run is paused: resume it first, then move it."
    if state in (RunState.COMPENSATING, RunState.CANCELLING):
        return f"This run is {state}: its completed steps are being undone, so it cannot move."
    return f"Only a running or waiting run can be moved; this one is {state}."


def _failed_forward_step(run: WorkflowRun, definition: Workflow) -> StepRun:
    """The failed run's one failed activity step; refuse a run that cannot go on from it."""
    # Each node's latest round: earlier rounds of a loop finished before it went back.
    latest = {step.node: step for step in run.steps.filter(kind=StepKind.FORWARD).order_by("round")}
    forward = list(latest.values())
    failed = [step for step in forward if step.state == StepState.FAILED]
    cancelled = [step.node for step in forward if step.state == StepState.CANCELLED]
    if cancelled:
        raise IllegalRunOperation(
            f"When it failed, its other branches were cancelled ({', '.join(cancelled)}): "
            "start a new run instead."
        )
    if len(failed) != 1 or not isinstance(definition.nodes_by_name.get(failed[0].node), Activity):
        raise IllegalRunOperation(
            "Its failure was not one activity's (a deadline or a rejection ended it): "
            "start a new run instead."
        )
    return failed[0]
