"""Maps: run an activity, or a child workflow, once per item of a list, a few at a time.

Entering the node reads the list once and writes, in one statement, a step per item
(its index and the item itself on its own row, waiting for a slot) beside the
node's own step. The node's step keeps a few counters while the items run
(`{"count", "started", "ended", "failed"}`), so an item that ends costs the same
few statements whether the list has ten items or a thousand: it updates the
counters and starts the next waiting item, found by its index through the unique
key. Only the last one reads the items' results, once, in item order, to make
the node's result.

Each item is a step like any other: an activity's item is claimed, leased,
retried and undone as an Activity is (its idempotency key is
`<run>:<node>[@<round>]#<item>`), and a child workflow's item waits for its child
as a ChildWorkflow step does (nodes/child.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from workflows.cleaning import refuse_unstorable
from workflows.dsl import Map, Workflow
from workflows.engine import moves
from workflows.engine.nodes import activity, child
from workflows.engine.work import UnitOfWork, new_step, redispatch_at, steps_of
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, StepKind, StepState

# How many failed items a failed map names in its error (the rest are on their rows).
_NAMED_FAILURES = 20


def enter(
    run: WorkflowRun,
    definition: Workflow,
    node: Map,
    *,
    came_from: StepRun | None,
    round: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Write a step per item and start the first `max_concurrency` of them."""
    work.flush()  # the list reads earlier results
    try:
        items = list(node.items(run.data))
        json.dumps(items)  # each item is kept on its own row as JSON
        refuse_unstorable(items)
    except Exception as error:
        step = new_step(work, run, node.name, StepState.WAITING, now, round=round)
        failure = {"type": "MapItemsUnreadable", "message": str(error)[:2000]}
        moves.engine().step_failed(run, definition, step, failure, now, work)
        return
    progress = {"count": len(items), "started": 0, "ended": 0, "failed": 0}
    step = new_step(work, run, node.name, StepState.WAITING, now, round=round, result=progress)
    lease = None if node.runs_children else node.timeouts.first_lease
    for index, item in enumerate(items):
        new_step(
            work,
            run,
            node.name,
            StepState.WAITING,
            now,
            round=round,
            item=index,
            item_value=item,
            lease=lease,
        )
    work.event(
        run,
        step,
        EventKind.WAITING,
        now,
        detail={"items": len(items), "max_concurrency": node.max_concurrency},
    )
    if not items:
        _succeed(run, definition, node, step, now, work)
        return
    _start_next(run, definition, node, step, node.max_concurrency, now, work)


def _start_next(
    run: WorkflowRun,
    definition: Workflow,
    node: Map,
    step: StepRun,
    slots: int,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Start up to `slots` items that wait for one, in item order."""
    progress = dict(step.result)
    first = progress["started"]
    last = min(first + slots, progress["count"])
    if first >= last:
        return
    waiting = steps_of(run, work).filter(
        node=node.name,
        kind=StepKind.FORWARD,
        round=step.round,
        item__gte=first,
        item__lt=last,
        state=StepState.WAITING,
    )
    progress["started"] = last
    step.result = progress
    work.save(step)
    for item in waiting.order_by("item"):
        item.run = run
        if node.runs_children:
            assert node.workflow is not None
            child.start_child(
                run,
                definition,
                item,
                workflow_type=node.workflow,
                input_of=lambda item=item: node.child_input(run.data, item.item_value),
                now=now,
                work=work,
            )
        else:
            item.dispatch(now=now, redispatch_at=redispatch_at(node.item_activity, now))
            work.save(item)
            work.send(item)


def item_ended(
    run: WorkflowRun,
    definition: Workflow,
    item: StepRun,
    now: datetime,
    work: UnitOfWork,
    *,
    failed: bool,
) -> None:
    """Count an item that succeeded or failed for good in; go on, start another, or fail."""
    node = definition.node(item.node)
    assert isinstance(node, Map)
    step = steps_of(run, work).get(
        node=item.node, kind=StepKind.FORWARD, round=item.round, item__isnull=True
    )
    step.run = run
    if step.state != StepState.WAITING:
        return  # the map already failed (fail fast) or was cancelled
    progress = dict(step.result)
    progress["ended"] += 1
    progress["failed"] += int(failed)
    step.result = progress
    work.save(step)
    if failed and node.on_failure == "fail_fast":
        _fail(run, definition, node, step, now, work)
    elif progress["ended"] == progress["count"]:
        if progress["failed"]:
            _fail(run, definition, node, step, now, work)
        else:
            _succeed(run, definition, node, step, now, work)
    else:
        _start_next(run, definition, node, step, 1, now, work)


def _succeed(
    run: WorkflowRun,
    definition: Workflow,
    node: Map,
    step: StepRun,
    now: datetime,
    work: UnitOfWork,
) -> None:
    results: list[Any] = list(
        steps_of(run, work)
        .filter(node=node.name, kind=StepKind.FORWARD, round=step.round, item__isnull=False)
        .order_by("item")
        .values_list("result", flat=True)
    )
    step.succeed(result=results, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now, detail={"items": len(results)})
    moves.engine().continue_to(run, definition, step, node.next, now, work)


def _fail(
    run: WorkflowRun,
    definition: Workflow,
    node: Map,
    step: StepRun,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Fail the node: its completed items are undone with the run's other steps, and the
    items not yet done are cancelled (a running one finishes, and is undone if it applied)."""
    failed = list(
        steps_of(run, work)
        .filter(
            node=node.name,
            kind=StepKind.FORWARD,
            round=step.round,
            item__isnull=False,
            state=StepState.FAILED,
        )
        .order_by("item")
        .values_list("item", "last_error")[:_NAMED_FAILURES]
    )
    progress = step.result
    error = {
        "type": "MapItemFailed",
        "message": (
            f"{progress['failed']} of {progress['count']} items failed "
            f"({'fail fast' if node.on_failure == 'fail_fast' else 'after all finished'})"
        ),
        "failed_items": [
            {"item": index, "error": (last_error or {}).get("type", "")}
            for index, last_error in failed
        ],
    }
    moves.engine().step_failed(run, definition, step, error, now, work)


def due(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: Map,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """An item fell due: as an activity's step does, or as a child workflow's step does."""
    if step.item is None:
        return  # the node's own step waits for its items, never for a time
    if node.runs_children:
        child.due(run, definition, step, node, now, work)
    else:
        activity.due(run, definition, step, node.item_activity, now, work)


def leave(
    run: WorkflowRun, definition: Workflow, step: StepRun, node: Map, work: UnitOfWork
) -> None:
    """An item of a map over child workflows was cancelled: cancel its child."""
    if step.item is not None and node.runs_children:
        child.leave(run, definition, step, node, work)
