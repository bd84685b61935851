"""The sweep: fire what is due (safe to run in several processes at once)."""

from __future__ import annotations

import gc
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from workflows import registry
from workflows.dsl import Workflow
from workflows.engine import nodes, timers
from workflows.engine.deadlines import DEADLINE_RUN_STATES, fire_deadline
from workflows.engine.start import start_pending_runs
from workflows.engine.work import UNDOING_RUN_STATES, UnitOfWork, definition_of
from workflows.models import StepRun, WorkflowRun
from workflows.states import RunState, StepState

logger = logging.getLogger("baton.engine")


def sweep(*, now: datetime | None = None, batch: int | None = None) -> dict[str, int]:
    """Handle up to `batch` due steps, many runs per transaction, skipping runs others hold.

    Reads only what is due, through the partial index on `StepRun.due_at`, so its
    cost follows what is due, not how many runs exist. Two sweeps at once never
    handle the same run: each locks runs with SKIP LOCKED and re-reads their due
    steps under that lock, so every timer fires once. The runs of a batch share
    one transaction and one statement per kind of row; if handling one of them
    fails, the batch is retried one run per transaction, so that run is logged
    and left for the next sweep while the others go on.
    """
    now = now or timezone.now()
    batch = batch or settings.BATON_SWEEP_BATCH
    counts: dict[str, int] = {"deadlines": 0, "steps": 0, "failed_runs": 0}
    _sweep_due(_due_deadline_run_ids, _fire_deadlines, "deadlines", now, batch, counts)
    _sweep_due(_due_run_ids, _sweep_runs, "steps", now, batch, counts)
    counts["pending_started"] = start_pending_runs(now=now, limit=batch)
    for extra in registry.sweepers():
        counts[extra.__name__] = extra(now=now)
    return counts


# Sweeps the runs given, locked with SKIP LOCKED: returns how many things it handled,
# and the runs it locked.
_RunSweep = Callable[[list[uuid.UUID], datetime], tuple[int, set[uuid.UUID]]]


def _sweep_due(
    due_run_ids: Callable[[datetime, set[uuid.UUID]], QuerySet[Any, uuid.UUID]],
    sweep_runs: _RunSweep,
    counted_as: str,
    now: datetime,
    batch: int,
    counts: dict[str, int],
) -> None:
    """Sweep up to `batch` of what `due_run_ids` reads, one transaction's worth at a time."""
    # Runs another sweep holds, or whose handling failed: left for the next sweep.
    passed_over: set[uuid.UUID] = set()
    left = batch
    while left > 0:
        # One transaction's worth at a time, read after the last one committed: a
        # small LIMIT keeps PostgreSQL on the index in due order (asked for a
        # thousand, with thousands due, it read and sorted every due step, so one
        # sweep cost more the more was due).
        limit = min(left, _RUNS_PER_TRANSACTION)
        left -= limit
        due = list(due_run_ids(now, passed_over)[:limit])
        run_ids = list(dict.fromkeys(due))
        swept = _sweep_batch(run_ids, now, counts, sweep_runs, counted_as)
        passed_over.update(run_id for run_id in run_ids if run_id not in swept)
        if len(due) < limit:
            break


def _due_deadline_run_ids(
    now: datetime, passed_over: set[uuid.UUID]
) -> QuerySet[WorkflowRun, uuid.UUID]:
    """Runs moving forward whose deadline passed, earliest first (through run_deadline_idx)."""
    due = WorkflowRun.objects.filter(deadline_at__lte=now, state__in=DEADLINE_RUN_STATES)
    if passed_over:
        due = due.exclude(pk__in=passed_over)
    return due.order_by("deadline_at").values_list("pk", flat=True)


def _fire_deadlines(run_ids: list[uuid.UUID], now: datetime) -> tuple[int, set[uuid.UUID]]:
    """Fire the deadlines of the runs no one else holds; return how many, and the runs locked."""
    work = UnitOfWork(batched=True)
    with transaction.atomic():
        runs = list(
            WorkflowRun.objects.select_for_update(skip_locked=True)
            .filter(pk__in=run_ids, deadline_at__lte=now, state__in=DEADLINE_RUN_STATES)
            .order_by("pk")
        )
        for run in runs:
            fire_deadline(run, definition_of(run), now, work)
        work.finish(*runs)
    return len(runs), {run.pk for run in runs}


def _due_run_ids(now: datetime, passed_over: set[uuid.UUID]) -> QuerySet[StepRun, uuid.UUID]:
    """Runs with a step due, by the step's due time (through step_due_idx)."""
    due = StepRun.objects.filter(
        state__in=_SWEPT_STATES, due_at__lte=now, run__state__in=_SWEPT_RUN_STATES
    )
    if passed_over:
        due = due.exclude(run_id__in=passed_over)
    return due.order_by("due_at").values_list("run_id", flat=True)


def _sweep_batch(
    run_ids: list[uuid.UUID],
    now: datetime,
    counts: dict[str, int],
    sweep_runs: _RunSweep,
    counted_as: str,
) -> set[uuid.UUID]:
    """Sweep the runs in one transaction, or one by one if that fails; return those swept."""
    if not run_ids:
        return set()
    try:
        with _collector_paused():
            steps, swept = sweep_runs(run_ids, now)
    except Exception:
        steps, swept = 0, set()
        for run_id in run_ids:
            try:
                handled, alone = sweep_runs([run_id], now)
            except Exception:
                counts["failed_runs"] += 1
                logger.exception("sweep.run_failed", extra={"run_id": str(run_id)})
            else:
                steps += handled
                swept |= alone
    counts[counted_as] += steps
    return swept


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector out of a batch, and let it run after.

    A batch builds tens of thousands of short-lived rows, dicts and lists, freed by
    reference counting as the batch ends. Counting them as they come, the collector
    ran every few hundred and walked the young objects, and every so often every
    object the process holds (all of Django): a sixth of the sweep's CPU. Anything
    cyclic a batch leaves is collected later, as usual; a collector that was off
    stays off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# Large enough that a batch's writes amortise their statements, small enough that
# one transaction holds few locks for long.
_RUNS_PER_TRANSACTION = 500


def _sweep_runs(run_ids: list[uuid.UUID], now: datetime) -> tuple[int, set[uuid.UUID]]:
    """Handle the due steps of the runs no one else holds; return how many steps, and
    the runs locked. Timers that lead straight to an activity fire as a set (see
    `timers`); every other due step is handled run by run."""
    work = UnitOfWork(batched=True)
    with transaction.atomic():
        # Only what the set path reads: a whole run (its input, its times) costs more
        # to load than to fire its timer, and most runs of a batch need no more.
        swept = list(
            WorkflowRun.objects.select_for_update(skip_locked=True)
            .filter(pk__in=run_ids, state__in=_SWEPT_RUN_STATES)
            .order_by("pk")
            .values_list("id", "workflow_type", "workflow_version", "trace_context", named=True)
        )
        if not swept:
            return 0, set()  # other sweeps hold them, or they moved on
        locked = {run.id for run in swept}
        fired = timers.fire_due_timers(swept, now)
        rest = [run.id for run in swept if run.id not in fired]
        if not rest:
            return len(fired), locked
        runs = list(WorkflowRun.objects.filter(pk__in=rest).order_by("pk"))  # locked above
        # Locking the steps fences a concurrent heartbeat: it waits, then finds its
        # lease gone if this sweep expired it.
        due: dict[uuid.UUID, list[StepRun]] = {run.pk: [] for run in runs}
        for step in StepRun.objects.select_for_update().filter(
            run__in=runs, state__in=_SWEPT_STATES, due_at__lte=now
        ):
            due[step.run_id].append(step)
        handled = len(fired)
        for run in runs:
            definition = definition_of(run)
            for index, step in enumerate(due[run.pk]):
                step.run = run
                if index:
                    # Handling one step can move another (a join cancels its siblings).
                    work.flush()
                    step.refresh_from_db()
                if step.state in _SWEPT_STATES and step.due_at is not None and step.due_at <= now:
                    handle_due_step(run, definition, step, now, work)
                    handled += 1
        work.finish(*runs)
    return handled, locked


_SWEPT_STATES = (
    StepState.SCHEDULED,
    StepState.RUNNING,
    StepState.RETRY_WAIT,
    StepState.WAITING,
)


# A paused run's due steps wait for it to resume; ended runs have nothing due.
_SWEPT_RUN_STATES = (RunState.RUNNING, RunState.WAITING, *UNDOING_RUN_STATES)


def handle_due_step(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: UnitOfWork
) -> None:
    node = definition.node(step.node)
    due = nodes.kind_of(node).due
    if due is not None:
        due(run, definition, step, node, now, work)
