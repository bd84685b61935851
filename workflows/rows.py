"""Model instances from rows of SQL written or compiled once, as the ORM would build them.

A hot path that keeps its SQL rather than building a queryset each time still wants
the ORM's instances: `converted` applies the converters Django's compiler would
(JSON decoded; on SQLite, times and UUIDs parsed from text), found once per model,
columns and database vendor; `loaded` then builds the instance with `Model.from_db`.
A reader of many rows takes a `converter` once and applies it to each row.
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
    return converter(model, attnames)(values)


def converter(model: type[Model], attnames: Sequence[str]) -> Callable[[Sequence[Any]], list[Any]]:
    """Return what `converted` does for `model` and `attnames`, as a function of the values:
    the connection and its converters looked up once, not once per row (the lookup of
    the connection alone took a fifth of reading an inbox page's 25 rows)."""
    connection = connections[DEFAULT_DB_ALIAS]
    count = len(attnames)
    found = _converters(model, tuple(attnames), connection.vendor)

    def convert(values: Sequence[Any]) -> list[Any]:
        result = list(values[:count])
        for index, convert_one, column in found:
            result[index] = convert_one(result[index], column, connection)
        return result

    return convert


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
