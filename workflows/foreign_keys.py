"""The database's rule for deleting a run, step or human task that rows still point at.

Django makes every foreign key `NO ACTION DEFERRABLE INITIALLY DEFERRED`: deleting a
referenced row queues a check that runs at commit, and a NO ACTION check is two
queries per deleted row and key (is another row with the same key there now? does
anything still point at it?). Retention deletes thousands of runs a second, each
with its steps and tasks, and eighteen keys point at those three tables: the
checks were most of a prune's time.

`ON DELETE RESTRICT` forbids the same deletes (integrity is unchanged: a row that is
still pointed at cannot go), checked at once when each statement ends, with one
query per deleted row and key instead of two. The cost is the order: whoever
deletes must delete the rows that point first, then what they point at.
Retention does (workflows.retention, children first), and so does Django's
collector for the keys made RESTRICT here: they are NOT NULL (Django deletes the
pointing model first) or SET_NULL (Django nulls them first), or their model has
nothing hanging off it (Django deletes it first, "fast"). The two keys of a child
run (`parent_run`, `parent_step`) stay deferred: a run and its steps point at each
other through them, which no order of Django's satisfies.

A RESTRICT key still checks new rows at commit (the key stays DEFERRABLE INITIALLY
DEFERRED for inserts and updates of the pointing row; PostgreSQL makes only the
delete check immediate). A later migration that alters one of these fields makes
Django recreate its key as NO ACTION again: slower to prune, never less safe;
tests/workflows/test_foreign_keys.py checks every key into the three tables.
PostgreSQL only; SQLite keeps Django's keys. Table and column names come from migrations, never
from input (hence `nosec B608`).
"""

from __future__ import annotations

from typing import Any

from django.db import connection as default_connection
from django.db import migrations

RESTRICT = "r"
NO_ACTION = "a"

# The tables a prune deletes from by the thousand, whose keys in are RESTRICT.
PRUNED_TABLES = ("workflows_workflowrun", "workflows_steprun", "approvals_humantask")
# Except a child run's keys: a run and its steps point at each other through them.
DEFERRED_KEYS = (
    ("workflows_workflowrun", "parent_run_id"),
    ("workflows_workflowrun", "parent_step_id"),
)

_KEYS_INTO = """
SELECT c.conrelid::regclass::text, a.attname, c.confdeltype
FROM pg_constraint c
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
WHERE c.contype = 'f' AND c.confrelid = ANY(%s::regclass[])
ORDER BY 1, 2
"""

_FIND = """
SELECT c.conname, c.confrelid::regclass::text, pa.attname, c.confdeltype
FROM pg_constraint c
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = c.confkey[1]
WHERE c.contype = 'f' AND c.conrelid = %s::regclass AND a.attname = %s
  AND cardinality(c.conkey) = 1
"""


def delete_rule(table: str, column: str, *, connection: Any = None) -> str | None:
    """Return the delete rule of the key on `table.column` (`RESTRICT`, `NO_ACTION`, or
    another of PostgreSQL's letters), or None when the column has no key."""
    with (connection or default_connection).cursor() as cursor:
        cursor.execute(_FIND, [table, column])
        row = cursor.fetchone()
    return None if row is None else row[3]


def keys_into(tables: tuple[str, ...], *, connection: Any = None) -> dict[tuple[str, str], str]:
    """Return every key pointing into `tables`, as (table, column), with its delete rule."""
    with (connection or default_connection).cursor() as cursor:
        cursor.execute(_KEYS_INTO, [list(tables)])
        return {(table, column): rule for table, column, rule in cursor.fetchall()}


def set_delete_rule(schema_editor: Any, *, keys: tuple[tuple[str, str], ...], rule: str) -> None:
    """Give the keys on each (table, column) in `keys` the delete rule `rule`.

    The key is dropped and added again under its own name, in one statement, NOT
    VALID (no scan while the table is locked), then validated (a scan that lets
    writes go on). PostgreSQL only; a column without a key is skipped.
    """
    if schema_editor.connection.vendor != "postgresql":
        return
    action = {RESTRICT: "RESTRICT", NO_ACTION: "NO ACTION"}[rule]
    with schema_editor.connection.cursor() as cursor:
        for table, column in keys:
            cursor.execute(_FIND, [table, column])
            row = cursor.fetchone()
            if row is None or row[3] == rule:
                continue
            name, parent, parent_column, _ = row
            cursor.execute(
                f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}", '  # nosec B608
                f'ADD CONSTRAINT "{name}" FOREIGN KEY ("{column}") '
                f'REFERENCES {parent} ("{parent_column}") ON DELETE {action} '
                "DEFERRABLE INITIALLY DEFERRED NOT VALID"
            )
            cursor.execute(f'ALTER TABLE "{table}" VALIDATE CONSTRAINT "{name}"')  # nosec B608


def restricting(keys: tuple[tuple[str, str], ...]) -> migrations.RunPython:
    """The migration operation that makes `keys` ON DELETE RESTRICT, and back to Django's
    NO ACTION when the migration is reversed."""

    def restrict(apps: Any, schema_editor: Any) -> None:
        set_delete_rule(schema_editor, keys=keys, rule=RESTRICT)

    def defer(apps: Any, schema_editor: Any) -> None:
        set_delete_rule(schema_editor, keys=keys, rule=NO_ACTION)

    return migrations.RunPython(restrict, defer, elidable=False)
