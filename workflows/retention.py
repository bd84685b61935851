"""Retention: delete finished runs past an age, with their steps, events, signals and tasks.

Only runs in a final state go: succeeded, failed, compensated, cancelled. Live
runs, paused ones and dead letters (which wait for an operator) are never
touched. A run goes with its steps, events, signals and human tasks (with their
inbox entries, comments, email links, snoozes and notifications), and its child
runs with it. The audit log is kept whole: its entries refer to a human task by
content type and primary key, not by a foreign key, and each carries in its hash
chain everything the chain covers, so `manage.py verify_audit` still verifies
every entry after the task is gone (approvals.audit.retention drops old months
of it separately, under checkpoints).

Runs go in batches of thousands, one transaction each, locked with SKIP LOCKED
so a run an operator is acting on is left for the next pass. A batch deletes
set-wise: one statement per table (`DELETE ... WHERE run_id = ANY(batch)`),
following the models' cascades, never one run at a time, and children first:
the keys into runs, steps and tasks are ON DELETE RESTRICT
(workflows.foreign_keys), one check per deleted row when its statement ends,
which then finds nothing. Step events are partitioned by month on PostgreSQL
(workflows.partitions): once no prunable run is left, every month wholly
before the cutoff's is dropped whole, after the few events of runs that stay
(a run that lived longer than the retention) were moved to the default
partition; a batch deletes only its runs' events from the months that stay.
On SQLite (the demo) Django's collector deletes each batch. Table and column
names in the SQL come from the models' metadata, never from input (hence `nosec B608`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db import OperationalError, connection, models, transaction
from django.db.models import Q, QuerySet
from django.db.models.deletion import ProtectedError, get_candidate_relations_to_delete

from workflows import partitions, registry
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
    *, finished_before: datetime, batch: int = 10_000, max_batches: int | None = None
) -> PruneReport:
    """Delete finished runs that ended before `finished_before`, `batch` runs per transaction.

    Stops when none is left, then drops the step events' months wholly before the
    cutoff's; or stops after `max_batches` batches (the periodic task's bound, so
    one pass never runs for long), leaving the months for a later pass.
    """
    report = PruneReport(finished_before=finished_before)
    labels = {label: what for what, label in counted().items()}
    events_from = _first_kept_month(finished_before)
    drained = False
    while max_batches is None or report.batches < max_batches:
        with transaction.atomic():
            run_ids = list(
                prunable_runs(finished_before=finished_before)
                .select_for_update(skip_locked=True)
                .order_by()
                .values_list("pk", flat=True)[:batch]
            )
            if not run_ids:
                drained = True
                break
            deleted: dict[str, int] = {}
            postgresql = connection.vendor == "postgresql"
            with _by_index_only() if postgresql else nullcontext():
                for hook in registry.prune_hooks():
                    hook(run_ids)
                if postgresql:
                    window = None if events_from is None else (events_from, finished_before)
                    _delete_set(WorkflowRun, run_ids, deleted=deleted, events_from=window)
                else:  # SQLite, the demo's: Django's collector is set-wise enough there
                    _, deleted = WorkflowRun.objects.filter(pk__in=run_ids).delete()
        report.batches += 1
        for label, number in deleted.items():
            if label in labels:
                report.deleted[labels[label]] = report.count(labels[label]) + number
        if len(run_ids) < batch:
            drained = True
            break
    if drained and events_from is not None:
        dropped = drop_event_months(before=events_from)
        report.deleted["events"] = report.count("events") + dropped
    logger.info(
        "prune.done",
        extra={"finished_before": finished_before.isoformat(), "deleted": report.deleted},
    )
    return report


EVENTS = "workflows_stepevent"


@contextmanager
def _by_index_only() -> Iterator[None]:
    """Plan the statements inside the block without sequential scans.

    Every statement of a batch reads rows by a set of keys, through the index on
    that key: thousands of rows of a table of millions. PostgreSQL prices such a
    statement from its estimate of rows per key, which a skewed table gets wrong:
    at 10M runs, notifications (50 for a task offered to a group, none for most)
    were estimated at 134 per task, so deleting a batch's read all 25M of them,
    twice a batch (3.5 s each), and prune ran at 1,700 runs/s where the small
    database ran 5,600. The setting is local to the transaction (so a pooler in
    transaction mode hands on no changed session) and put back as the block ends,
    for a caller whose transaction goes on; a block that fails is rolled back,
    which puts it back too.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('enable_seqscan'), set_config('enable_seqscan', 'off', true)"
        )
        before = cursor.fetchone()[0]
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('enable_seqscan', %s, true)", [before])


def _first_kept_month(finished_before: datetime) -> Any:
    """The first month whose event partition a prune keeps, or None without partitions."""
    if not partitions.is_partitioned(EVENTS):
        return None
    return partitions.month_of(finished_before)


def _delete_set(
    model: type[models.Model], pks: list[Any], *, deleted: dict[str, int], events_from: Any
) -> None:
    """Delete the rows of `model` whose primary key is in `pks`, and what cascades from them.

    One statement per table and kind of row, the rows that point before the rows
    they point at (children first): the keys into runs, steps and tasks are
    `ON DELETE RESTRICT` (workflows.foreign_keys), checked when each statement
    ends, and a check then finds its children already gone. A table whose rows
    others point at is first read for its keys (`SELECT`), its children deleted by
    them, then it is deleted by its primary key; a table nothing points at is
    deleted by the key it points with. Follows on_delete as Django's collector
    would (CASCADE, SET_NULL, DO_NOTHING; PROTECT and RESTRICT refuse), without
    signals, which none of these models has; SET_NULL updates run before the rows
    they point at go.
    """
    with connection.cursor() as cursor:
        _delete_where(
            cursor, model, model._meta.pk.column, pks, deleted=deleted, events_from=events_from
        )


def _relations(model: type[models.Model]) -> list[Any]:
    """The relations a delete of `model` follows: leaves first (their rows go by the
    key they point with, in one statement), so a SET_NULL on a row deleted by
    its run anyway (a signal consumed by a step of the run) finds nothing to update."""
    relations = [
        relation
        for relation in get_candidate_relations_to_delete(model._meta)
        # DO_NOTHING is followed by nobody: an event's step key is one (its events are
        # its run's, deleted once, by run).
        if relation.field.remote_field.on_delete is not models.DO_NOTHING
    ]
    return sorted(
        relations,
        key=lambda relation: (
            relation.field.remote_field.on_delete is models.SET_NULL,
            bool(get_candidate_relations_to_delete(relation.related_model._meta)),
        ),
    )


def _delete_where(
    cursor: Any,
    model: type[models.Model],
    column: str,
    values: list[Any],
    *,
    deleted: dict[str, int],
    events_from: Any,
) -> None:
    if model is StepEvent:
        _delete_events(cursor, column, values, deleted=deleted, events_from=events_from)
        return
    table, key = model._meta.db_table, model._meta.pk.column
    relations = _relations(model)
    if not relations:
        cursor.execute(f'DELETE FROM "{table}" WHERE "{column}" = ANY(%s)', [values])  # nosec B608
        deleted[model._meta.label] = deleted.get(model._meta.label, 0) + cursor.rowcount
        return
    if column == key:
        keys = values
    else:
        cursor.execute(
            f'SELECT "{key}" FROM "{table}" WHERE "{column}" = ANY(%s)',  # nosec B608
            [values],
        )
        keys = [row[0] for row in cursor.fetchall()]
    if not keys:
        return
    for relation in relations:
        related, field = relation.related_model, relation.field
        on_delete = field.remote_field.on_delete
        if on_delete is models.SET_NULL:
            cursor.execute(
                f'UPDATE "{related._meta.db_table}" SET "{field.column}" = NULL '  # nosec B608
                f'WHERE "{field.column}" = ANY(%s)',
                [keys],
            )
        elif on_delete is models.CASCADE:
            _delete_where(
                cursor, related, field.column, keys, deleted=deleted, events_from=events_from
            )
        else:
            cursor.execute(
                f'SELECT 1 FROM "{related._meta.db_table}" WHERE "{field.column}" = ANY(%s) '  # nosec B608
                "LIMIT 1",
                [keys],
            )
            if cursor.fetchone():
                raise ProtectedError(
                    f"{related._meta.label} rows protect the runs being pruned.", set()
                )
    cursor.execute(f'DELETE FROM "{table}" WHERE "{key}" = ANY(%s)', [keys])  # nosec B608
    deleted[model._meta.label] = deleted.get(model._meta.label, 0) + cursor.rowcount


def _delete_events(
    cursor: Any, column: str, values: list[Any], *, deleted: dict[str, int], events_from: Any
) -> None:
    label = StepEvent._meta.label
    if events_from is None:
        cursor.execute(f'DELETE FROM "{EVENTS}" WHERE "{column}" = ANY(%s)', [values])  # nosec B608
    else:
        # `events_from` is (the first month kept, the cutoff). The months before it are
        # dropped whole once the runs are gone, and these runs' events all come before
        # the cutoff (a run's events end when it does): naming both bounds lets
        # PostgreSQL read one or two months' partitions here, not every month's. An
        # event written after its run ended, if any, is left to its month's drop.
        first_kept, cutoff = events_from
        cursor.execute(
            f'DELETE FROM "{EVENTS}" WHERE "{column}" = ANY(%s) AND at >= %s AND at < %s',  # nosec B608
            [values, partitions.bound(first_kept), cutoff + timedelta(seconds=1)],
        )
    deleted[label] = deleted.get(label, 0) + cursor.rowcount


def drop_event_months(*, before: Any) -> int:
    """Drop the step events' monthly partitions wholly before the month `before`.

    Events of runs that still exist (a run that lived longer than the retention,
    a dead letter) are moved to the default partition first, so a run's timeline
    is never cut; the default partition's old events of runs that are gone are
    deleted. Return how many events went. Each month is one short transaction; a
    month whose lock is not had within a few seconds (a long query reading the
    events) is left for the next pass.
    """
    went = 0
    default = partitions.default_partition(EVENTS)
    for month in partitions.months(EVENTS):
        if month >= before:
            continue
        name = partitions.partition_name(EVENTS, month)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '5s'")
                cursor.execute(
                    "CREATE TEMPORARY TABLE kept_events ON COMMIT DROP AS "  # nosec B608
                    f'SELECT e.* FROM "{name}" e '
                    "WHERE EXISTS (SELECT 1 FROM workflows_workflowrun r WHERE r.id = e.run_id)"
                )
                kept = cursor.rowcount
                cursor.execute(f'SELECT count(*) FROM "{name}"')  # nosec B608
                total = cursor.fetchone()[0]
                partitions.drop_month(EVENTS, month)
                cursor.execute(f'INSERT INTO "{EVENTS}" SELECT * FROM kept_events')  # nosec B608
                cursor.execute("DROP TABLE kept_events")  # also when inside a caller's transaction
        except OperationalError:
            logger.warning("prune.month_busy", extra={"partition": name})
            continue
        went += total - kept
        logger.info("prune.month_dropped", extra={"partition": name, "kept": kept})
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f'DELETE FROM "{default}" e WHERE e.at < %s AND NOT EXISTS '  # nosec B608
            "(SELECT 1 FROM workflows_workflowrun r WHERE r.id = e.run_id)",
            [partitions.bound(before)],
        )
        went += cursor.rowcount
    return went
