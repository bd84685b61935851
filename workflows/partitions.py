"""Monthly range partitions of the append-only tables, on PostgreSQL: create, list, drop.

The step events (`workflows_stepevent`, by `at`) and the audit entries
(`auditlog_logentry`, by `timestamp`) only ever grow, so they are partitioned
by calendar month (UTC) of their time column: one partition a month, named
`<table>_pYYYYMM`, and a default partition, `<table>_default`, that catches a
row whose month has none (a clock far off, a test's date, a month not created
yet), so an insert never fails for want of a partition. Retention then drops a
month whole (`drop_month`, a catalogue change) instead of deleting its rows one
by one.

`convert_to_monthly` turns an existing table into a partitioned one (the
migrations call it): PostgreSQL requires the primary key to include the
partition column, so it becomes (id, time); every other index is recreated on
the partitioned table; rows are copied into their months. `make_partitions`
creates the coming months' partitions of every table partitioned so (beat sends
`baton.make_partitions` daily, and each migrate runs it), moving any row the
default partition caught for such a month into it.

SQLite (the demo) has no partitions: every function here does nothing there,
and the tables stay plain tables. Table and column names in the SQL come from
the catalogue and the migrations, never from input (hence `nosec B608`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection, transaction

logger = logging.getLogger("baton.partitions")

# Months created ahead of the current one, so a missed day of beat changes nothing.
MONTHS_AHEAD = 3

_MONTH_SUFFIX = re.compile(r"_p(\d{4})(\d{2})$")


@dataclass(frozen=True)
class Partitioned:
    """A table partitioned by month of `column`."""

    table: str
    column: str


def month_of(moment: datetime) -> date:
    """Return the first day of `moment`'s month, in UTC."""
    moment = moment.astimezone(UTC)
    return date(moment.year, moment.month, 1)


def add_months(month: date, months: int) -> date:
    """Return the first day of the month `months` after `month` (before it, if negative)."""
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def partition_name(table: str, month: date) -> str:
    return f"{table}_p{month:%Y%m}"


def default_partition(table: str) -> str:
    return f"{table}_default"


def bound(month: date) -> str:
    """Return the literal of a month's first instant, UTC, as partition bounds are written."""
    return f"{month:%Y-%m-%d} 00:00:00+00"


def is_available() -> bool:
    """Say whether the database partitions tables (PostgreSQL does; SQLite does not)."""
    return connection.vendor == "postgresql"


def partitioned_tables() -> list[Partitioned]:
    """Return the tables partitioned by range of one column, as `convert_to_monthly` makes them."""
    if not is_available():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, a.attname
              FROM pg_partitioned_table p
              JOIN pg_class c ON c.oid = p.partrelid
              JOIN pg_namespace n ON n.oid = c.relnamespace
              JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = p.partattrs[0]
             WHERE p.partstrat = 'r' AND p.partnatts = 1
               AND n.nspname = current_schema()
             ORDER BY c.relname
            """
        )
        return [Partitioned(table, column) for table, column in cursor.fetchall()]


def is_partitioned(table: str) -> bool:
    return any(found.table == table for found in partitioned_tables())


def months(table: str) -> list[date]:
    """Return the months that have a partition of `table`, oldest first."""
    if not is_available():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname FROM pg_inherits i
              JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = %s::regclass
            """,
            [table],
        )
        names = [name for (name,) in cursor.fetchall()]
    found = []
    for name in names:
        match = _MONTH_SUFFIX.search(name)
        if match and name == partition_name(table, date(int(match[1]), int(match[2]), 1)):
            found.append(date(int(match[1]), int(match[2]), 1))
    return sorted(found)


def make_partitions(*, now: datetime, ahead: int = MONTHS_AHEAD) -> list[str]:
    """Create the partitions of this month and the `ahead` next, of every partitioned table.

    Return the names created (none when all exist). Safe to run twice, and in
    two processes at once (each month is created under a lock on its table).
    """
    created = []
    for partitioned in partitioned_tables():
        first = month_of(now)
        for offset in range(ahead + 1):
            if ensure_month(partitioned, add_months(first, offset)):
                created.append(partition_name(partitioned.table, add_months(first, offset)))
    if created:
        logger.info("partitions.created", extra={"partitions": created})
    return created


def ensure_month(partitioned: Partitioned, month: date) -> bool:
    """Create `month`'s partition unless it exists; return whether it was created.

    Rows the default partition caught for that month move into the new one
    (PostgreSQL refuses to attach a range the default partition holds rows of).
    """
    table, column = partitioned.table, partitioned.column
    name = partition_name(table, month)
    low, high = bound(month), bound(add_months(month, 1))
    with transaction.atomic(), connection.cursor() as cursor:
        # Whoever creates a month holds this until commit; the other finds it made.
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [table])
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if cursor.fetchone()[0]:
            return False
        default = default_partition(table)
        cursor.execute(
            f'SELECT EXISTS (SELECT 1 FROM "{default}" WHERE "{column}" >= %s AND "{column}" < %s)',  # nosec B608
            [low, high],
        )
        if not cursor.fetchone()[0]:
            cursor.execute(
                f'CREATE TABLE "{name}" PARTITION OF "{table}" FOR VALUES FROM (%s) TO (%s)',
                [low, high],
            )
            return True
        cursor.execute(
            f'CREATE TABLE "{name}" (LIKE "{table}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
        )
        cursor.execute(
            f'WITH moved AS (DELETE FROM "{default}" WHERE "{column}" >= %s AND "{column}" < %s '  # nosec B608
            f'RETURNING *) INSERT INTO "{name}" SELECT * FROM moved',
            [low, high],
        )
        cursor.execute(
            f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" FOR VALUES FROM (%s) TO (%s)',
            [low, high],
        )
        return True


def drop_month(table: str, month: date) -> None:
    """Drop `month`'s partition of `table`, rows and all; call inside a transaction."""
    with connection.cursor() as cursor:
        # Keys checked at commit (Django's) would leave trigger events pending on rows
        # written earlier in the transaction, which PostgreSQL refuses to drop under.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f'DROP TABLE IF EXISTS "{partition_name(table, month)}"')
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def convert_to_monthly(
    schema_editor: Any,
    *,
    table: str,
    column: str,
    now: datetime,
    ahead: int = MONTHS_AHEAD,
    keep_foreign_keys: bool = True,
) -> None:
    """Turn the plain table `table` into one partitioned by month of `column`, keeping its rows.

    The primary key becomes (id, `column`); the other indexes, check constraints,
    the identity column (and where it had got to) and the foreign keys out of the
    table are kept (the last unless `keep_foreign_keys`). A month gets a
    partition from the oldest row's to `ahead` months after `now`; the default
    partition catches the rest. Foreign keys
    *into* the table are refused: PostgreSQL cannot point one at a partitioned
    table whose key has a column more (make such fields `db_constraint=False`).
    A migration's operation; nothing on SQLite, nothing if already partitioned.
    """
    if schema_editor.connection.vendor != "postgresql" or is_partitioned(table):
        return
    old = f"{table}_unpartitioned"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE confrelid = %s::regclass AND contype = 'f'",
            [table],
        )
        inbound = [name for (name,) in cursor.fetchall()]
        if inbound:
            raise RuntimeError(
                f"{table} cannot be partitioned while foreign keys point into it: "
                f"{', '.join(inbound)}. Declare those fields with db_constraint=False first."
            )
        cursor.execute(
            """
            SELECT i.relname, pg_get_indexdef(i.oid), x.indisprimary, x.indisunique
              FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
             WHERE x.indrelid = %s::regclass
            """,
            [table],
        )
        indexes = cursor.fetchall()
        cursor.execute(
            """
            SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
             WHERE conrelid = %s::regclass AND contype = 'f'
            """,
            [table],
        )
        outbound = cursor.fetchall()
        cursor.execute(
            """
            SELECT a.attname FROM pg_index x
              JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey)
             WHERE x.indrelid = %s::regclass AND x.indisprimary
            """,
            [table],
        )
        key = [name for (name,) in cursor.fetchall()]
        for name, _, primary, unique in indexes:
            if unique and not primary:
                raise RuntimeError(
                    f"{table} has the unique index {name}, which cannot hold on a table "
                    f"partitioned by {column}."
                )
        # Free the names for the partitioned table: drop the old table's indexes and
        # foreign keys (its rows are copied and the table dropped in this migration).
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
        for name, _ in outbound:
            cursor.execute(f'ALTER TABLE "{old}" DROP CONSTRAINT "{name}"')
        for name, _, primary, _ in indexes:
            if primary:
                cursor.execute(f'ALTER TABLE "{old}" DROP CONSTRAINT "{name}"')
            else:
                cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(
            f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS INCLUDING IDENTITY '
            f"INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS) "
            f'PARTITION BY RANGE ("{column}")'
        )
        columns = ", ".join(f'"{name}"' for name in dict.fromkeys([*key, column]))
        cursor.execute(
            f'ALTER TABLE "{table}" ADD CONSTRAINT "{table}_pkey" PRIMARY KEY ({columns})'
        )
        for _, definition, primary, _ in indexes:
            if not primary:
                cursor.execute(definition)  # written as "ON public.<table>", the new one
        for name, definition in outbound if keep_foreign_keys else []:
            cursor.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
        cursor.execute(f'CREATE TABLE "{default_partition(table)}" PARTITION OF "{table}" DEFAULT')
        cursor.execute(f'SELECT min("{column}") FROM "{old}"')  # nosec B608
        oldest = cursor.fetchone()[0]
        first = month_of(oldest) if oldest else month_of(now)
        last = add_months(month_of(now), ahead)
        month = min(first, month_of(now))
        while month <= last:
            cursor.execute(
                f'CREATE TABLE "{partition_name(table, month)}" PARTITION OF "{table}" '
                "FOR VALUES FROM (%s) TO (%s)",
                [bound(month), bound(add_months(month, 1))],
            )
            month = add_months(month, 1)
        cursor.execute(f'INSERT INTO "{table}" OVERRIDING SYSTEM VALUE SELECT * FROM "{old}"')  # nosec B608
        cursor.execute(f'DROP TABLE "{old}"')
        for name in key:
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, name])
            sequence = cursor.fetchone()[0]
            if sequence:
                cursor.execute(
                    f'SELECT setval(%s, COALESCE((SELECT max("{name}") FROM "{table}"), 0) + 1, '  # nosec B608
                    "false)",
                    [sequence],
                )
