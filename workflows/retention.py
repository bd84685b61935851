"""Retention: delete finished runs past an age, with their steps, events, signals and tasks.

Only runs in a final state go: succeeded, failed, compensated, cancelled. Live
runs, paused ones and dead letters (which wait for an operator) are never
touched. Deleting a run cascades to its steps, events, signals and human tasks
(with their inbox entries, comments and email links). The audit log is kept
whole: its entries refer to a human task by content type and primary key, not by
a foreign key, and each carries in its hash chain everything the chain covers,
so `manage.py verify_audit` still verifies every entry after the task is gone.

Runs go in batches, one transaction each, locked with SKIP LOCKED so a run an
operator is acting on is left for the next pass, and a batch re-checks the
run's state under its lock.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.apps import apps
from django.db import transaction
from django.db.models import Q, QuerySet

from workflows import registry
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun
from workflows.states import FINAL_RUN_STATES

logger = logging.getLogger("baton.retention")

# What a dry run counts, and a real one reports, by the model label Django deletes under:
# the engine's own rows, and those other apps register (`registry.register_run_rows`).
COUNTED = {
    "runs": "workflows.WorkflowRun",
    "steps": "workflows.StepRun",
    "events": "workflows.StepEvent",
    "signals": "workflows.Signal",
}


def counted() -> dict[str, str]:
    """Return every kind of row a prune counts, by name, with its model's label."""
    return {**COUNTED, **registry.run_rows()}


_AGE = re.compile(r"^\s*(\d+)\s*([dhms])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_age(text: str) -> timedelta:
    """Read an age such as "90d", "12h", "30m" or "45s"; raise ValueError saying why not."""
    match = _AGE.match(text)
    if not match:
        raise ValueError(
            f"an age is a whole number and a unit (d, h, m or s) like 90d, not {text!r}"
        )
    age = timedelta(**{_UNITS[match[2]]: int(match[1])})
    if not age:
        raise ValueError("an age of 0 would take runs that just finished; give a longer one")
    return age


@dataclass
class PruneReport:
    """How many rows of each kind were (or, in a dry run, would be) deleted."""

    finished_before: datetime
    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0

    def count(self, what: str) -> int:
        return self.deleted.get(what, 0)


def prunable_runs(*, finished_before: datetime) -> QuerySet[WorkflowRun]:
    """Return the finished runs that ended before `finished_before`.

    A run that finished before the cutoff was also created before it, so the
    filter on `created_at` lets PostgreSQL read the (state, created_at) index
    instead of every finished run. A child run goes with its parent, never before
    it: a live parent may still need it (undoing it compensates the child).
    """
    return WorkflowRun.objects.filter(
        state__in=FINAL_RUN_STATES,
        created_at__lt=finished_before,
        finished_at__lt=finished_before,
        parent_run__isnull=True,
    )


def count_prunable(*, finished_before: datetime) -> PruneReport:
    """Count what `prune_runs` would delete, deleting nothing."""
    top = prunable_runs(finished_before=finished_before)
    # Their children go in the same delete (grandchildren are counted with them too
    # only as far as one level: a rough count is enough for a dry run).
    runs = WorkflowRun.objects.filter(Q(pk__in=top.values("pk")) | Q(parent_run__in=top))
    return PruneReport(
        finished_before=finished_before,
        deleted={
            "runs": runs.count(),
            "steps": StepRun.objects.filter(run__in=runs).count(),
            "events": StepEvent.objects.filter(run__in=runs).count(),
            "signals": Signal.objects.filter(run__in=runs).count(),
            **{
                name: apps.get_model(label).objects.filter(run__in=runs).count()
                for name, label in registry.run_rows().items()
            },
        },
    )


def prune_runs(
    *, finished_before: datetime, batch: int = 500, max_batches: int | None = None
) -> PruneReport:
    """Delete finished runs that ended before `finished_before`, `batch` runs per transaction.

    Stops when none is left, or after `max_batches` batches (the periodic task's
    bound, so one pass never runs for long).
    """
    report = PruneReport(finished_before=finished_before)
    labels = {label: what for what, label in counted().items()}
    while max_batches is None or report.batches < max_batches:
        with transaction.atomic():
            run_ids = list(
                prunable_runs(finished_before=finished_before)
                .select_for_update(skip_locked=True)
                .order_by()
                .values_list("pk", flat=True)[:batch]
            )
            if not run_ids:
                break
            _, deleted = WorkflowRun.objects.filter(pk__in=run_ids).delete()
        report.batches += 1
        for label, number in deleted.items():
            if label in labels:
                report.deleted[labels[label]] = report.count(labels[label]) + number
        if len(run_ids) < batch:
            break
    logger.info(
        "prune.done",
        extra={"finished_before": finished_before.isoformat(), "deleted": report.deleted},
    )
    return report
