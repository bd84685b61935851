"""Reads the engine makes on every step, with their SQL written once.

Building a queryset and compiling it costs more than its round trip to the
server: 0.39 ms of CPU for the record's `select_related(...).select_for_update()`
on this kind of machine, paid again on every step. The SQL here is built once
per process from the models' own columns, and rows are read back through the
converters Django's compiler would apply, so the instances are those the ORM
would have built.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model

from workflows.models import StepRun, WorkflowRun


def step_with_locked_run(step_id: int) -> StepRun | None:
    """The step and its run, the run locked FOR UPDATE (as the ORM's
    `select_related("run").select_for_update(of=("run",))` would), or None."""
    connection = connections[DEFAULT_DB_ALIAS]
    steps, runs = _columns(StepRun), _columns(WorkflowRun)
    with connection.cursor() as cursor:
        cursor.execute(_step_with_locked_run_sql(connection.vendor), [step_id])
        row = cursor.fetchone()
    if row is None:
        return None
    step = steps.build(connection, row[: len(steps.names)])
    step.run = runs.build(connection, row[len(steps.names) :])
    return step


@functools.cache
def _step_with_locked_run_sql(vendor: str) -> str:
    # The vendor names the cache entry: SQLite has no FOR UPDATE (it locks the file).
    connection = connections[DEFAULT_DB_ALIAS]
    quote = connection.ops.quote_name
    steps, runs = StepRun._meta.db_table, WorkflowRun._meta.db_table
    columns = [
        *(f"step.{quote(name)}" for name in _columns(StepRun).columns),
        *(f"run.{quote(name)}" for name in _columns(WorkflowRun).columns),
    ]
    lock = " FOR UPDATE OF run" if connection.features.has_select_for_update_of else ""
    # Model metadata only (table and column names, quoted); the step id is bound.
    return (
        f"SELECT {', '.join(columns)} FROM {quote(steps)} AS step "  # nosec B608
        f"JOIN {quote(runs)} AS run ON run.{quote('id')} = step.{quote('run_id')} "
        f"WHERE step.{quote('id')} = %s{lock}"
    )


class _Columns:
    """A model's concrete columns and the converters that turn each value into Python."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.names = [field.attname for field in self.fields]
        self.columns = [field.column for field in self.fields]

    def build(self, connection: Any, values: Sequence[Any]) -> Any:
        values = list(values)
        for index, convert, column in self._converters(connection.vendor):
            values[index] = convert(values[index], column, connection)
        return self.model.from_db(connection.alias, self.names, values)

    @functools.cache  # noqa: B019 (one instance per model, kept for the process)
    def _converters(self, vendor: str) -> list[tuple[int, Callable[..., Any], Any]]:
        connection = connections[DEFAULT_DB_ALIAS]
        converters = []
        for index, field in enumerate(self.fields):
            column = field.get_col(self.model._meta.db_table)
            for convert in [
                *connection.ops.get_db_converters(column),
                *field.get_db_converters(connection),
            ]:
                converters.append((index, convert, column))
        return converters


@functools.cache
def _columns(model: type[Model]) -> _Columns:
    return _Columns(model)
