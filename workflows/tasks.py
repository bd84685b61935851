"""Celery tasks: thin entry points into the engine, with explicit names."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from datetime import timedelta

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from workflows import engine, heartbeats, metrics, partitions, retention, tracing
from workflows.beat import SCHEDULED_FOR_HEADER

logger = logging.getLogger("baton.engine")


@shared_task(name=engine.EXECUTE_STEP_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def execute_step(self: Task, step_id: int) -> None:
    """Run one step if it still needs running (a redelivered message is a no-op)."""
    with tracing.step_message_context(_trace_header(self), step_id):
        engine.execute_step(step_id=step_id)


@shared_task(name=engine.EXECUTE_STEPS_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def execute_steps(self: Task, step_ids: list[int]) -> None:
    """Run a batch of steps the sweep handed over together, each as `execute_step` does.

    A step that raises is logged and left to the sweep; the others still run.
    """
    headers = _trace_header(self)
    for step_id in step_ids:
        try:
            with tracing.step_message_context(headers, step_id):
                engine.execute_step(step_id=step_id)
        except Exception:
            logger.exception("step.execute_failed", extra={"step_id": step_id})


def _trace_header(task: Task) -> dict | None:
    """The run contexts a step message carries (see `workflows.tracing`), if tracing is on."""
    if not tracing.enabled():
        return None
    carried = _header(task, tracing.HEADER)
    return {tracing.HEADER: carried} if carried else None


SWEEP_TASK = "baton.sweep"
SWEEP_SCHEDULE = "baton-sweep"


@shared_task(name=SWEEP_TASK, acks_late=True, ignore_result=True)
def sweep() -> dict[str, int]:
    """Fire what is due: lost messages, expired leases, retries, timers, escalations.

    Records when it ran (see `workflows.heartbeats`), for /readyz and beat's healthcheck.
    Logged at info when it handled something and at debug when it found nothing,
    which is most sweeps: one every two seconds would otherwise fill the log.
    """
    began = time.monotonic()
    counts = engine.sweep()
    metrics.observe_sweep(time.monotonic() - began)
    heartbeats.record(name=heartbeats.SWEEP, now=timezone.now())
    level = logging.INFO if any(counts.values()) else logging.DEBUG
    logger.log(level, "sweep.done", extra={"counts": counts})
    return counts


class QuietSweepLogs(logging.Filter):
    """Let Celery's own info lines about the sweep through only when debug logging is on.

    Celery logs, at info, every message a worker receives, every task that
    succeeds and every message beat sends: three lines per sweep, 90 a minute,
    saying nothing. Installed on those loggers, this filter passes such a line on
    at debug if its logger would log debug, and drops it otherwise. Warnings and
    errors about the sweep, and every line about other tasks, pass unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not _about_the_sweep(record):
            return True
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


# Celery's loggers for "Task ... received", "Task ... succeeded" and "Sending due task".
CELERY_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace", "celery.beat")


def quiet_sweep_logs() -> QuietSweepLogs:
    """Install `QuietSweepLogs` on Celery's task loggers (once) and return it."""
    installed = next(
        (
            f
            for f in logging.getLogger(CELERY_TASK_LOGGERS[0]).filters
            if isinstance(f, QuietSweepLogs)
        ),
        None,
    )
    quiet = installed or QuietSweepLogs()
    for name in CELERY_TASK_LOGGERS:
        logging.getLogger(name).addFilter(quiet)  # adding it twice keeps one
    return quiet


def _about_the_sweep(record: logging.LogRecord) -> bool:
    args = record.args
    if isinstance(args, Mapping):  # the worker's lines: {"name": task name, "id": ...}
        return args.get("name") == SWEEP_TASK
    # beat's line: "Scheduler: Sending due task %s (%s)" % (schedule name, task name)
    return isinstance(args, tuple) and len(args) == 2 and args[1] == SWEEP_TASK


@shared_task(name="baton.start_scheduled_workflow", bind=True, acks_late=True)
def start_scheduled_workflow(
    self: Task, workflow_type: str, input: dict, correlation_id: str = ""
) -> str:
    """Start a run from a django-celery-beat schedule (cron or interval).

    Keyed on the schedule and the tick the message is for (see `workflows.beat`), so
    each tick starts one run however many beats sent it and however often the
    broker redelivered it. A message without those headers is keyed on its id.
    """
    run, _ = engine.start_workflow(
        workflow_type=workflow_type,
        input=input,
        correlation_id=correlation_id,
        idempotency_key=schedule_key(
            schedule_name=_header(self, "periodic_task_name"),  # set by django-celery-beat
            scheduled_for=_header(self, SCHEDULED_FOR_HEADER),
            message_id=self.request.id,
        ),
    )
    return str(run.id)


def schedule_key(
    *, schedule_name: str | None, scheduled_for: str | None, message_id: str | None
) -> str:
    """Return the idempotency key of a scheduled start: its schedule and tick, else its id."""
    if schedule_name and scheduled_for:
        if len(schedule_name) > 120:  # keys hold 200 characters; schedule names up to 200
            schedule_name = hashlib.sha256(schedule_name.encode()).hexdigest()
        return f"schedule:{schedule_name}@{scheduled_for}"
    return f"schedule:{message_id}" if message_id else ""


def _header(task: Task, name: str) -> str | None:
    # A worker's request carries custom message headers both as attributes and in
    # `headers`; an eager call's only in `headers`.
    return (task.request.headers or {}).get(name) or getattr(task.request, name, None)


@shared_task(name="baton.make_partitions", acks_late=True, ignore_result=True)
def make_partitions() -> list[str]:
    """Create the coming months' partitions of the append-only tables (nothing on SQLite)."""
    return partitions.make_partitions(now=timezone.now())


# Batches one periodic pass deletes at most, so a large backlog drains over passes.
PRUNE_MAX_BATCHES = 20


@shared_task(name="baton.prune_runs", acks_late=True, ignore_result=True)
def prune_runs() -> dict[str, int]:
    """Delete runs finished more than BATON_PRUNE_AFTER_DAYS ago; nothing when it is 0.

    Reads the setting when it runs, so turning it off stops pruning even where the
    schedule lives on in django-celery-beat's table.
    """
    days = settings.BATON_PRUNE_AFTER_DAYS
    if not days:
        logger.debug("prune.disabled")
        return {}
    report = retention.prune_runs(
        finished_before=timezone.now() - timedelta(days=days),
        batch=settings.BATON_PRUNE_BATCH,
        max_batches=PRUNE_MAX_BATCHES,
    )
    return report.deleted
