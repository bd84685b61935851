"""Warn on a run's timeline: something an operator should know that changes no state.

Another app's hook (an approval naming a group that does not exist, a quorum
nobody can reach any more) calls `warn_run` inside the engine's or its own
transaction; the warning is one more append-only line of the run's timeline,
shown on the run's console page and the request's page, and a warning log line.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from workflows.engine.work import log_fields
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import EventKind

logger = logging.getLogger("baton.engine")


def warn_run(
    *,
    run: WorkflowRun,
    step: StepRun | None,
    message: str,
    now: datetime,
    detail: dict[str, Any] | None = None,
) -> StepEvent:
    """Add a warning, in words, to `run`'s timeline (at `step`, if given), and log it."""
    detail = {"message": message, **(detail or {})}
    event = StepEvent.objects.create(
        run=run,
        step=step,
        node=step.node if step else "",
        kind=EventKind.WARNING,
        attempt=step.attempt if step else 0,
        at=now,
        detail=detail,
    )
    logger.warning("run.warning", extra=log_fields(run, step, detail))
    return event
