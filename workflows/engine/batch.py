"""Write a unit of work's rows in as few round trips as the database allows.

Each kind of row costs one statement: new rows one INSERT, changed rows one
UPDATE per set of rows changed alike. Fields convert exactly as `bulk_create` and
`update` would convert them: the UPDATEs come from Django's own compiler, and the
INSERTs take the UNNEST form its compiler gives them on PostgreSQL, built a column
at a time (see `_unnest_insert`). On PostgreSQL the statements of one write go to
the server in one round trip (the driver binds parameters on the client, so
several statements fit in one query); elsewhere they run one after the other.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from operator import attrgetter
from typing import Any

import django_fsm as fsm
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import DateField, DateTimeField, Field, Model, Q
from django.db.models.sql import InsertQuery, UpdateQuery
from django.utils import timezone

from workflows.models import SavesChanges

SEPARATOR = ";\n"


def statements_in(sql: str) -> int:
    """How many statements a query sent by `execute` holds."""
    return sql.count(SEPARATOR) + 1


@dataclass(frozen=True)
class Statement:
    sql: str
    params: Sequence[Any]
    # Reads the statement's result once it ran (the cursor is positioned on it).
    done: Callable[[Any], None]


def insert(model: type[Model], rows: list[Model], *, returning_ids: bool) -> Statement:
    """One INSERT of `rows`; with `returning_ids`, each row learns its primary key."""
    meta = model._meta
    # The database numbers an auto-incremented key; any other (a run's UUID) is ours.
    fields = [field for field in meta.concrete_fields if field is not meta.auto_field]
    for row in rows:
        row._prepare_related_fields_for_save(operation_name="bulk_create")
    connection = _connection()
    unnested = _unnest_insert(model, fields, rows, connection) if len(rows) > 1 else None
    if unnested is not None:
        sql, params = unnested
        if returning_ids:
            table = connection.ops.quote_name(meta.db_table)
            sql += f" RETURNING {table}.{connection.ops.quote_name(meta.pk.column)}"
    else:
        query = InsertQuery(model)
        query.insert_values(fields, rows)
        compiler = query.get_compiler(connection=connection)
        if returning_ids:
            compiler.returning_fields = [meta.pk]
        [(sql, params)] = compiler.as_sql()

    def done(cursor: Any) -> None:
        ids = [row[0] for row in cursor.fetchall()] if returning_ids else []
        for index, row in enumerate(rows):
            if returning_ids:
                row.pk = ids[index]
            row._state.adding = False
            row._state.db = connection.alias
            if isinstance(row, SavesChanges):
                row.mark_saved()

    return Statement(sql, params, done)


def _unnest_insert(
    model: type[Model], fields: list[Field], rows: list[Model], connection: Any
) -> tuple[str, list[Any]] | None:
    """The INSERT Django's compiler writes for these rows on PostgreSQL, `INSERT ...
    SELECT ... FROM UNNEST(<an array a column>)`, built a column at a time; None where
    Django would not use that form (another database, a field with a placeholder of
    its own, an expression as a value), and the compiler writes the statement.

    Each value is read with the field's `pre_save` and converted with its
    `get_db_prep_save`, as the compiler does, but a column's rows repeat most of their
    values (the same node, state and times, and many NULLs): each distinct value is
    converted once a column, and a column holding one value for every row is sent
    as that one value instead of an array of copies (the driver escapes an array
    element by element, in Python). Built value by value through the compiler, a
    batch's INSERTs were a seventh of the sweep's time, and their arrays a sixth more.
    """
    if connection.vendor != "postgresql" or not all(
        _unnestable(field, connection) for field in fields
    ):
        return None
    columns = []
    for field in fields:
        if reads_attribute(field):
            values = list(map(attrgetter(field.attname), rows))
        else:
            values = [field.pre_save(row, True) for row in rows]
        prepared: dict[Any, Any] = {}
        column = []
        last = converted = _NOTHING
        for value in values:
            if value is not last:  # most often the very same object as the row before
                key = _alike(value)
                if key in prepared:
                    converted = prepared[key]
                elif hasattr(value, "resolve_expression"):
                    return None
                else:
                    converted = prepared[key] = field.get_db_prep_save(value, connection=connection)
                last = value
            column.append(converted)
        columns.append((field, column, len(prepared) == 1))
    # UNNEST needs one array, for the number of rows.
    if all(alike for _, _, alike in columns):
        columns[0] = (columns[0][0], columns[0][1], False)
    qn = connection.ops.quote_name
    selected, arrays, names, params, array_params = [], [], [], [], []
    for field, column, alike in columns:
        db_type = field.db_type(connection).split("(")[0]
        if alike:
            selected.append(f"(%s)::{db_type}")
            params.append(column[0])
        else:
            selected.append(qn(field.column))
            arrays.append(f"(%s)::{db_type}[]")
            names.append(qn(field.column))
            array_params.append(column)
    # Model metadata only (quoted table and column names, column types); every value
    # is bound.
    sql = (
        f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "  # nosec B608
        f"SELECT {', '.join(selected)} FROM UNNEST({', '.join(arrays)}) "
        f"AS {qn('row')} ({', '.join(names)})"
    )
    return sql, params + array_params


_NOTHING = object()


def _unnestable(field: Field, connection: Any) -> bool:
    # As django.db.backends.postgresql.compiler.SQLInsertCompiler.assemble_as_sql decides.
    internal = (field.target_field if field.is_relation else field).get_internal_type()
    return not hasattr(field, "get_placeholder") and internal in connection.data_types


def reads_attribute(field: Field) -> bool:
    """Whether `field.pre_save(row, add=True)` only reads the row's attribute."""
    pre_save = type(field).pre_save
    if pre_save is Field.pre_save:
        return True
    return (
        pre_save in (DateField.pre_save, DateTimeField.pre_save)
        and not field.auto_now
        and not field.auto_now_add
    )


def updates(model: type[SavesChanges], rows: list[SavesChanges]) -> list[Statement]:
    """One UPDATE per set of rows a transition changed alike, fenced on their state.

    Rows moved from the same state to the same values (a batch of timers firing at
    one `now`) share one `UPDATE ... WHERE id IN (...) AND state = <their state
    before>`. Fenced like ConcurrentTransitionMixin: if a row is no longer in the
    state it was read in, ConcurrentTransition is raised and the transaction rolls
    back (the caller holds the rows' locks, so this is a second fence).
    """
    auto_now = [f.attname for f in model._meta.concrete_fields if getattr(f, "auto_now", False)]
    state_fields = [f.attname for f in model._meta.concrete_fields if isinstance(f, fsm.FSMField)]
    alike: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any], list[SavesChanges]]] = {}
    for row in rows:
        changes = {name: row.__dict__[name] for name in row.changed_fields()}
        if not changes:
            continue
        before = {name: row._saved_values[name] for name in state_fields}
        key = (_hashable(changes), _hashable(before))
        alike.setdefault(key, (changes, before, []))[2].append(row)
    now = timezone.now()
    return [
        _update(model, changes | dict.fromkeys(auto_now, now), before, group)
        for changes, before, group in alike.values()
    ]


def _update(
    model: type[SavesChanges],
    values: dict[str, Any],
    before: dict[str, Any],
    group: list[SavesChanges],
) -> Statement:
    query = UpdateQuery(model)
    query.add_update_values({model._meta.get_field(name).name: v for name, v in values.items()})
    query.add_q(Q(pk__in=[row.pk for row in group], **before))
    sql, params = query.get_compiler(connection=_connection()).as_sql()

    def done(cursor: Any) -> None:
        if cursor.rowcount != len(group):
            raise fsm.ConcurrentTransition(
                f"{len(group) - cursor.rowcount} of {len(group)} {model.__name__} rows "
                "changed state since they were read"
            )
        for row in group:
            row.__dict__.update(values)
            row.mark_saved(values)

    return Statement(sql, params, done)


def execute(statements: list[Statement]) -> None:
    """Run the statements in order, on PostgreSQL in one round trip.

    Only inside the use case's transaction: a fence that fails raises after every
    statement of the query ran, so only the rollback keeps their rows out.
    """
    if not statements:
        return
    connection = _connection()
    if not connection.in_atomic_block:
        raise RuntimeError("A unit of work writes only inside its use case's transaction.")
    with connection.cursor() as cursor:
        sent = [(statement.sql, statement.params) for statement in statements]
        for statement, result in zip(statements, results(cursor, sent), strict=True):
            statement.done(result)


def results(cursor: Any, statements: Sequence[tuple[str, Sequence[Any]]]) -> Iterator[Any]:
    """Run `statements` (SQL and parameters) in order on `cursor`, and yield the cursor on
    each one's result in turn: on PostgreSQL as one query, in one round trip (Django's
    psycopg backend binds values on the client, so several statements fit in one
    `execute`, and `nextset` moves to the next one's result); elsewhere one query each."""
    if cursor.db.vendor == "postgresql" and len(statements) > 1:
        cursor.execute(
            SEPARATOR.join(sql for sql, _ in statements),
            [param for _, params in statements for param in params],
        )
        for index in range(len(statements)):
            if index:
                cursor.nextset()
            yield cursor
        return
    for sql, params in statements:
        cursor.execute(sql, params)
        yield cursor


def _connection() -> Any:
    """The default database's connection itself, not `django.db.connection`: that proxy
    looks the connection up (a context-local read) on every attribute, and a
    compiler reads it for every value it converts: a third of a batch's time."""
    return connections[DEFAULT_DB_ALIAS]


def _hashable(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((name, _alike(value)) for name, value in values.items())


def _alike(value: Any) -> Any:
    """A key equal for two values only if the database would be given the same value.

    Plain values key themselves, with their type (True and 1 are equal in Python, not
    in a JSON column); a state, a str subclass, keys as a str. Anything else is keyed
    on its JSON text, the one costly case: most changes are states, times and ids."""
    if isinstance(value, str):
        return (str, str(value))
    if value is None or type(value) in _PLAIN_TYPES:
        return (type(value), value)
    return (json, json.dumps(value, sort_keys=True, default=str))


_PLAIN_TYPES = frozenset({bool, int, float, Decimal, datetime, date, timedelta, uuid.UUID})
