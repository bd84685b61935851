"""Model instances from rows of SQL written or compiled once, as the ORM would build them.

A hot path that keeps its SQL rather than building a queryset each time still wants
the ORM's instances: `converted` applies the converters Django's compiler would
(JSON decoded; on SQLite, times and UUIDs parsed from text), found once per model,
columns and database vendor; `loaded` then builds the instance with `Model.from_db`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model


def loaded(model: type[Model], attnames: Sequence[str], values: Sequence[Any]) -> Any:
    """An instance of `model` with `attnames` (in the model's field order) set from `values`."""
    connection = connections[DEFAULT_DB_ALIAS]
    return model.from_db(connection.alias, attnames, converted(model, attnames, values))


def converted(model: type[Model], attnames: Sequence[str], values: Sequence[Any]) -> list[Any]:
    """The first len(attnames) `values`, turned into Python as the ORM's compiler would."""
    connection = connections[DEFAULT_DB_ALIAS]
    result = list(values[: len(attnames)])
    for index, convert, column in _converters(model, tuple(attnames), connection.vendor):
        result[index] = convert(result[index], column, connection)
    return result


@functools.cache
def _converters(
    model: type[Model], attnames: tuple[str, ...], vendor: str
) -> list[tuple[int, Callable[..., Any], Any]]:
    # The vendor names the cache entry: each database converts its own way.
    connection = connections[DEFAULT_DB_ALIAS]
    fields = {field.attname: field for field in model._meta.concrete_fields}
    found = []
    for index, attname in enumerate(attnames):
        column = fields[attname].get_col(model._meta.db_table)
        for convert in [
            *connection.ops.get_db_converters(column),
            *fields[attname].get_db_converters(connection),
        ]:
            found.append((index, convert, column))
    return found
