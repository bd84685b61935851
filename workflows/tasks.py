"""Celery tasks: thin entry points into the engine, with explicit names."""

from __future__ import annotations

import logging

from celery import Task, shared_task

from workflows import engine

logger = logging.getLogger("baton.engine")


@shared_task(name=engine.EXECUTE_STEP_TASK, acks_late=True, reject_on_worker_lost=True)
def execute_step(step_id: int) -> None:
    """Run one step if it still needs running (a redelivered message is a no-op)."""
    engine.execute_step(step_id=step_id)


@shared_task(name=engine.EXECUTE_STEPS_TASK, acks_late=True, reject_on_worker_lost=True)
def execute_steps(step_ids: list[int]) -> None:
    """Run a batch of steps the sweep handed over together, each as `execute_step` does.

    A step that raises is logged and left to the sweep; the others still run.
    """
    for step_id in step_ids:
        try:
            engine.execute_step(step_id=step_id)
        except Exception:
            logger.exception("step.execute_failed", extra={"step_id": step_id})


@shared_task(name="baton.sweep", acks_late=True, ignore_result=True)
def sweep() -> dict[str, int]:
    """Fire what is due: lost messages, expired leases, retries, timers, escalations."""
    return engine.sweep()


@shared_task(name="baton.start_scheduled_workflow", bind=True, acks_late=True)
def start_scheduled_workflow(
    self: Task, workflow_type: str, input: dict, correlation_id: str = ""
) -> str:
    """Start a run from a django-celery-beat schedule (cron or interval).

    Keyed on the message id, so a redelivered schedule message starts no second run.
    """
    run, _ = engine.start_workflow(
        workflow_type=workflow_type,
        input=input,
        correlation_id=correlation_id,
        idempotency_key=f"schedule:{self.request.id}" if self.request.id else "",
    )
    return str(run.id)
