"""Starting runs: validate the input, insert the run already running, enter its first node."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from workflows import due_times, registry, tracing
from workflows.dsl import Workflow
from workflows.engine import advance
from workflows.engine.work import (
    LIVE_FORWARD_RUN_STATES,
    UNDOING_RUN_STATES,
    UnitOfWork,
    definition_of,
    settle,
)
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, RunState


@tracing.traced_start
def start_workflow(
    *,
    workflow_type: str,
    input: Any,
    idempotency_key: str | None = None,
    correlation_id: str = "",
    started_by: Any = None,
    now: datetime | None = None,
    parent_step: StepRun | None = None,
) -> tuple[WorkflowRun, bool]:
    """Start a run of the latest version of `workflow_type` in one transaction.

    Return the run and whether it was created: a second start with the same
    idempotency key returns the first run and starts nothing. Raise
    UnknownWorkflow or InvalidInput before anything is written. A child run names
    the step of its parent that waits for it (`parent_step`, see nodes/child.py).
    """
    definition = registry.get(workflow_type)
    data = definition.validate_input(input)
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = WorkflowRun(
            workflow_type=definition.name,
            workflow_version=definition.version,
            input=data,
            idempotency_key=idempotency_key or "",
            correlation_id=correlation_id,
            started_by=started_by,
            parent_step=parent_step,
            parent_run_id=parent_step.run_id if parent_step is not None else None,
            trace_context=tracing.current_context(),
        )
        if definition.deadline is not None:
            # Counted from the request, so a run that waited in `pending` has no longer.
            run.deadline_at = due_times.due_at(duration=definition.deadline, start=now)
        runnable = _has_capacity(definition)
        if runnable:
            run.start(now=now)  # inserted as running: no second write of the row
        if idempotency_key:
            # Only a keyed start can collide, so only it is written on its own, in a
            # savepoint; any other is written with its first step and events.
            try:
                with transaction.atomic():
                    run.save(force_insert=True)
            except IntegrityError:
                # A start with the same key came first: return its run, start nothing.
                return _run_for_key(workflow_type, idempotency_key), False  # type: ignore[return-value]
        else:
            work.insert(run)
        work.event(run, None, EventKind.STARTED, now, detail={"version": definition.version})
        if runnable:
            advance.enter_node(
                run, definition, definition.start, came_from=None, now=now, work=work
            )
            settle(run, work)
        work.finish(run)
    return run, True


def _run_for_key(workflow_type: str, idempotency_key: str | None) -> WorkflowRun | None:
    return WorkflowRun.objects.filter(
        workflow_type=workflow_type, idempotency_key=idempotency_key
    ).first()


def _has_capacity(definition: Workflow) -> bool:
    if definition.concurrency_limit is None:
        return True
    if connection.vendor == "postgresql":
        # Serialise the count-then-start of this type so two starts cannot both
        # take the last slot.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [definition.name])
    live = WorkflowRun.objects.filter(
        workflow_type=definition.name,
        state__in=[*LIVE_FORWARD_RUN_STATES, *UNDOING_RUN_STATES],
    ).count()
    return live < definition.concurrency_limit


def _begin(run: WorkflowRun, definition: Workflow, *, now: datetime, work: UnitOfWork) -> None:
    run.start(now=now)
    advance.enter_node(run, definition, definition.start, came_from=None, now=now, work=work)
    settle(run, work)


def start_pending_runs(*, now: datetime, limit: int) -> int:
    """Start runs that waited in `pending` for their type's concurrency limit to free up."""
    started = 0
    for definition in registry.all_definitions():
        if definition.concurrency_limit is None:
            continue
        while started < limit:
            work = UnitOfWork()
            with transaction.atomic():
                run = (
                    WorkflowRun.objects.select_for_update(skip_locked=True)
                    .filter(workflow_type=definition.name, state=RunState.PENDING)
                    .order_by("created_at")
                    .first()
                )
                if run is None or not _has_capacity(definition):
                    break
                _begin(run, definition_of(run), now=now, work=work)
                work.finish(run)
            started += 1
    return started
