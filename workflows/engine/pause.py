"""Pausing and resuming a run at an operator's request."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from workflows.engine.errors import IllegalRunOperation
from workflows.engine.work import UnitOfWork, definition_of, lock_run, redispatch_at, settle
from workflows.models import WorkflowRun
from workflows.states import EventKind, RunState, StepState


def pause_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Start no new step until resumed; steps already running finish and are recorded."""
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if run.state == RunState.PAUSED:
            return run
        if run.state not in (RunState.RUNNING, RunState.WAITING):
            raise IllegalRunOperation(
                f"Only a running or waiting run can be paused; this one is {run.state}."
            )
        run.pause()
        work.event(run, None, EventKind.OPERATOR, now, detail={"action": "paused"})
        work.finish(run)
    return run


def resume_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Let a paused run go on, re-sending the steps it held back."""
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if run.state != RunState.PAUSED:
            raise IllegalRunOperation(f"Only a paused run can be resumed; this one is {run.state}.")
        run.resume()
        definition = definition_of(run)
        for step in run.steps.filter(state=StepState.SCHEDULED):
            # The wait while paused does not count against schedule-to-start.
            step.scheduled_at = now
            step.due_at = redispatch_at(definition.node(step.node), now)
            step.save(update_fields=["scheduled_at", "due_at"])
            work.send(step)
        settle(run, work)
        work.event(run, None, EventKind.OPERATOR, now, detail={"action": "resumed"})
        work.finish(run)
    return run
