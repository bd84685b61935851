"""Reads the engine makes on every step, with their SQL written once.

Building a queryset and compiling it costs more than its round trip to the
server: 0.39 ms of CPU for the record's `select_related(...).select_for_update()`
on this kind of machine, paid again on every step. The SQL here is built once
per process from the models' own columns, and rows are read back as the ORM
would build them (`workflows.rows`).
"""

from __future__ import annotations

import functools

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model

from workflows import rows
from workflows.models import StepRun, WorkflowRun


def step_with_locked_run(step_id: int) -> StepRun | None:
    """The step and its run, the run locked FOR UPDATE (as the ORM's
    `select_related("run").select_for_update(of=("run",))` would), or None."""
    connection = connections[DEFAULT_DB_ALIAS]
    with connection.cursor() as cursor:
        cursor.execute(_step_with_locked_run_sql(connection.vendor), [step_id])
        row = cursor.fetchone()
    if row is None:
        return None
    steps, runs = _attnames(StepRun), _attnames(WorkflowRun)
    step = rows.loaded(StepRun, steps, row[: len(steps)])
    step.run = rows.loaded(WorkflowRun, runs, row[len(steps) :])
    return step


@functools.cache
def _step_with_locked_run_sql(vendor: str) -> str:
    # The vendor names the cache entry: SQLite has no FOR UPDATE (it locks the file).
    connection = connections[DEFAULT_DB_ALIAS]
    quote = connection.ops.quote_name
    columns = [
        *(f"step.{quote(field.column)}" for field in StepRun._meta.concrete_fields),
        *(f"run.{quote(field.column)}" for field in WorkflowRun._meta.concrete_fields),
    ]
    lock = " FOR UPDATE OF run" if connection.features.has_select_for_update_of else ""
    steps, runs = StepRun._meta.db_table, WorkflowRun._meta.db_table
    # Model metadata only (table and column names, quoted); the step id is bound.
    return (
        f"SELECT {', '.join(columns)} FROM {quote(steps)} AS step "  # nosec B608
        f"JOIN {quote(runs)} AS run ON run.{quote('id')} = step.{quote('run_id')} "
        f"WHERE step.{quote('id')} = %s{lock}"
    )


@functools.cache
def _attnames(model: type[Model]) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)
