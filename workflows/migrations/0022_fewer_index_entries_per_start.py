"""Fewer index entries for each run and event written.

- A run's keys to its parent run and step are indexed only where set: most runs
  have no parent, and the full indexes took an entry (a NULL) for each at its start
  and again at each change of its state.
- A step event's run had an index of its own beside event_run_at_idx, whose first
  column it is: every event took two entries for one lookup.

On PostgreSQL the new indexes are built CONCURRENTLY, before the old ones go, so
writes go on and a parent's lookup always has an index (the migration is not
atomic: run again after an interruption, it drops an index left invalid and
finishes what is left). The events' index is on a partitioned table, which has no concurrent drop: it is dropped under
a lock waited for at most 5 s a try (else every step's event would queue behind the
waiting drop), and migrate says so if a long query keeps it. Reversible (going back
builds the events' index in one statement, holding their writes for its build).
"""

import time

from django.db import OperationalError, migrations, models, transaction

PARTIAL = (
    ("run_parent_run_idx", "parent_run_id"),
    ("run_parent_step_idx", "parent_step_id"),
)
RUNS = "workflows_workflowrun"
EVENTS = "workflows_stepevent"


def _sql(schema_editor, *, forwards: bool) -> list[str]:
    concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
    qn = schema_editor.quote_name
    statements = []
    for name, column in PARTIAL:
        full = schema_editor._create_index_name(RUNS, [column])
        partial = (
            f"CREATE INDEX{concurrently} IF NOT EXISTS {qn(name)} ON {qn(RUNS)} "
            f"({qn(column)}) WHERE {qn(column)} IS NOT NULL"
        )
        whole = f"CREATE INDEX{concurrently} IF NOT EXISTS {qn(full)} ON {qn(RUNS)} ({qn(column)})"
        if forwards:
            statements += [partial, f"DROP INDEX{concurrently} IF EXISTS {qn(full)}"]
        else:
            statements += [whole, f"DROP INDEX{concurrently} IF EXISTS {qn(name)}"]
    events = schema_editor._create_index_name(EVENTS, ["run_id"])
    if forwards:
        statements.append(f"DROP INDEX IF EXISTS {qn(events)}")
    else:
        statements.append(f"CREATE INDEX IF NOT EXISTS {qn(events)} ON {qn(EVENTS)} (run_id)")
    return statements


def _drop_invalid(schema_editor) -> None:
    """Drop what an interrupted CREATE INDEX CONCURRENTLY left: an invalid index of that
    name, which IF NOT EXISTS would otherwise keep."""
    if schema_editor.connection.vendor != "postgresql":
        return
    names = [name for name, _ in PARTIAL] + [
        schema_editor._create_index_name(RUNS, [column]) for _, column in PARTIAL
    ]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE NOT i.indisvalid AND c.relname = ANY(%s)",
            [names],
        )
        invalid = [name for (name,) in cursor.fetchall()]
    for name in invalid:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")


def _execute(schema_editor, statement: str) -> None:
    """Run `statement`; on PostgreSQL, a lock it cannot have within 5 s (a long prune or a
    dump reading the events) is waited for again a few times, then refused with a clear
    error. Waiting without a limit would queue every step's event behind it."""
    if schema_editor.connection.vendor != "postgresql" or "CONCURRENTLY" in statement:
        schema_editor.execute(statement)
        return
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            with transaction.atomic(using=schema_editor.connection.alias):
                schema_editor.execute("SET LOCAL lock_timeout = '5s'")
                schema_editor.execute(statement)
            return
        except OperationalError:
            if attempt == LOCK_ATTEMPTS:
                raise OperationalError(
                    f"{statement}: no lock within {LOCK_ATTEMPTS} tries of 5 s; another session "
                    "holds the table (a prune, a dump). Run migrate again once it ends."
                ) from None
            time.sleep(1)


LOCK_ATTEMPTS = 6


def forwards(apps, schema_editor):
    _drop_invalid(schema_editor)
    for statement in _sql(schema_editor, forwards=True):
        _execute(schema_editor, statement)


def backwards(apps, schema_editor):
    _drop_invalid(schema_editor)
    for statement in _sql(schema_editor, forwards=False):
        _execute(schema_editor, statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("workflows", "0021_run_ids_time_ordered"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.AlterField(
                    model_name="stepevent",
                    name="run",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="events",
                        to="workflows.workflowrun",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflowrun",
                    name="parent_run",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        editable=False,
                        null=True,
                        on_delete=models.deletion.CASCADE,
                        related_name="children",
                        to="workflows.workflowrun",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflowrun",
                    name="parent_step",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        editable=False,
                        null=True,
                        on_delete=models.deletion.CASCADE,
                        related_name="children",
                        to="workflows.steprun",
                    ),
                ),
                migrations.AddIndex(
                    model_name="workflowrun",
                    index=models.Index(
                        condition=models.Q(("parent_run__isnull", False)),
                        fields=["parent_run"],
                        name="run_parent_run_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="workflowrun",
                    index=models.Index(
                        condition=models.Q(("parent_step__isnull", False)),
                        fields=["parent_step"],
                        name="run_parent_step_idx",
                    ),
                ),
            ],
        ),
    ]
