"""No index of a step event's step: each event took an entry there that no query read.

A step's events are read with its run's, through event_run_at_idx (the timeline, the
limits' `first_hold`, which names the run too), never by the step alone, and they are
deleted by run: retention's SQL, and Django's collector, which deleted them a second
time by step (the key's on_delete was CASCADE, now DO_NOTHING: a step goes only with its
run). Without the index that second delete would have read every month's partition.

On PostgreSQL the events are partitioned, and a partitioned index has no concurrent
drop: it is dropped under a lock waited for at most 5 s a try (else every step's event
would queue behind the waiting drop), as migration 0022 dropped the run's. Reversible
(going back builds the index in one statement, holding the events' writes for its
build).
"""

import time

from django.db import OperationalError, migrations, models, transaction

EVENTS = "workflows_stepevent"
LOCK_ATTEMPTS = 6


def _statement(schema_editor, *, forwards: bool) -> str:
    qn = schema_editor.quote_name
    name = schema_editor._create_index_name(EVENTS, ["step_id"])
    if forwards:
        return f"DROP INDEX IF EXISTS {qn(name)}"
    return f"CREATE INDEX IF NOT EXISTS {qn(name)} ON {qn(EVENTS)} ({qn('step_id')})"


def _execute(schema_editor, statement: str) -> None:
    """Run `statement`; on PostgreSQL, a lock it cannot have within 5 s (a long prune or a
    dump reading the events) is waited for again a few times, then refused with a clear
    error."""
    if schema_editor.connection.vendor != "postgresql":
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


def forwards(apps, schema_editor):
    _execute(schema_editor, _statement(schema_editor, forwards=True))


def backwards(apps, schema_editor):
    _execute(schema_editor, _statement(schema_editor, forwards=False))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("workflows", "0026_fewer_index_entries_per_step"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.AlterField(
                    model_name="stepevent",
                    name="step",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=models.deletion.DO_NOTHING,
                        related_name="events",
                        to="workflows.steprun",
                    ),
                ),
            ],
        ),
    ]
