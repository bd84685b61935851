"""A child run's end, told to the step of its parent run that waits for it.

The child's unit of work calls this after the child's transaction commits, so the
parent is locked only once the child's lock is released (lock order: parent, then
child; see nodes/child.py). A word lost on the way is made up by the sweep, which
looks at every step waiting for a child now and then.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from workflows.engine.nodes import child
from workflows.engine.work import UnitOfWork, definition_of, lock_run
from workflows.models import StepRun
from workflows.states import StepKind, StepState


def child_ended(*, step_id: int, now: datetime | None = None) -> None:
    """Let the parent step `step_id` take its child's outcome (or its undo's), if it still
    waits for it; a repeated or late word changes nothing."""
    now = now or timezone.now()
    run_id = StepRun.objects.filter(pk=step_id).values_list("run_id", flat=True).first()
    if run_id is None:
        return
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        step = run.steps.get(pk=step_id)
        if step.state != StepState.WAITING:
            # The child was compensated for its parent: the undo's step waits for it.
            step = run.steps.filter(
                node=step.node,
                kind=StepKind.COMPENSATION,
                round=step.round,
                item=step.item,
                state=StepState.WAITING,
            ).first()
            if step is None:
                return
        step.run = run
        child.take_outcome(run, definition_of(run), step, now, work)
        work.finish(run)
