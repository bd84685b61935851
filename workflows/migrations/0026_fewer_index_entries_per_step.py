"""Fewer index entries for each version of a step: one unique index where three were.

A step's row is written three times or more (scheduled, claimed, recorded), and each
version is a new entry in every index whose predicate it meets: its state is indexed,
so no update is HOT. Beside the primary key and the two indexes of live steps, every
version took an entry in Django's index of the run alone and in one of two partial
unique indexes: (run, node, kind, round) where item IS NULL, (run, node, kind, round,
item) where it is not. One unique index over (run, node, kind, round, COALESCE(item,
-1)) says what the pair said (a map's items are 0 and up; a step that is no item
counts as item -1, so two such steps clash), and its first column is the run, so it
serves every lookup by run (of a step, and of the key's check when a run is deleted):
the run's own index goes. A version now takes four entries at most, not five.

PostgreSQL 15's NULLS NOT DISTINCT would say the same, but SQLite (the demo) has no
such thing (Django skips the constraint there), and Django's check of one asks the
server its version, so `manage.py check` failed instead of warning when the database
was down. The COALESCE is one rule, one index, on both.

On PostgreSQL the new index is built CONCURRENTLY before the old ones are dropped
CONCURRENTLY, so writes go on and uniqueness always holds (the migration is not
atomic: run again after an interruption, it drops an index left invalid and finishes
what is left). Reversible. The model state changes alone (`SeparateDatabaseAndState`):
an AlterField of the run's key would make Django recreate the key, as NO ACTION
(workflows.foreign_keys).
"""

from django.db import migrations, models
from django.db.models.functions import Coalesce

STEPS = "workflows_steprun"
UNIQUE = "step_unique_per_round_and_item"
KEY = ("run_id", "node", "kind", "round")
# The pair the one index replaces: (name, columns, predicate).
PAIR = (
    ("step_unique_per_round", KEY, '"item" IS NULL'),
    ("step_item_unique_per_round", (*KEY, "item"), '"item" IS NOT NULL'),
)


def _run_index(schema_editor) -> str:
    """Django's name for the index of the run's key alone."""
    return schema_editor._create_index_name(STEPS, ["run_id"])


def _sql(schema_editor, *, forwards: bool) -> list[str]:
    postgresql = schema_editor.connection.vendor == "postgresql"
    concurrently = " CONCURRENTLY" if postgresql else ""
    qn = schema_editor.quote_name
    key = ", ".join(qn(column) for column in KEY)
    unique = (
        f"CREATE UNIQUE INDEX{concurrently} IF NOT EXISTS {qn(UNIQUE)} ON {qn(STEPS)} "
        f"({key}, (COALESCE({qn('item')}, -1)))"
    )
    pair = [
        f"CREATE UNIQUE INDEX{concurrently} IF NOT EXISTS {qn(name)} ON {qn(STEPS)} "
        f"({', '.join(qn(column) for column in columns)}) WHERE {predicate}"
        for name, columns, predicate in PAIR
    ]
    run_index = (
        f"CREATE INDEX{concurrently} IF NOT EXISTS {qn(_run_index(schema_editor))} "
        f"ON {qn(STEPS)} ({qn('run_id')})"
    )
    old = [name for name, _, _ in PAIR] + [_run_index(schema_editor)]
    if forwards:
        return [unique, *(f"DROP INDEX{concurrently} IF EXISTS {qn(name)}" for name in old)]
    return [*pair, run_index, f"DROP INDEX{concurrently} IF EXISTS {qn(UNIQUE)}"]


def _drop_invalid(schema_editor) -> None:
    """Drop what an interrupted CREATE INDEX CONCURRENTLY left: an invalid index of one of
    these names, which IF NOT EXISTS would otherwise keep."""
    if schema_editor.connection.vendor != "postgresql":
        return
    names = [UNIQUE, _run_index(schema_editor), *(name for name, _, _ in PAIR)]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE NOT i.indisvalid AND c.relname = ANY(%s)",
            [names],
        )
        invalid = [name for (name,) in cursor.fetchall()]
    for name in invalid:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")


def forwards(apps, schema_editor):
    _drop_invalid(schema_editor)
    for statement in _sql(schema_editor, forwards=True):
        schema_editor.execute(statement)


def backwards(apps, schema_editor):
    _drop_invalid(schema_editor)
    for statement in _sql(schema_editor, forwards=False):
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("workflows", "0025_room_for_a_steps_next_version"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.RemoveConstraint(model_name="steprun", name="step_unique_per_round"),
                migrations.RemoveConstraint(
                    model_name="steprun", name="step_item_unique_per_round"
                ),
                migrations.AlterField(
                    model_name="steprun",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="steps",
                        to="workflows.workflowrun",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="steprun",
                    constraint=models.UniqueConstraint(
                        models.F("run"),
                        models.F("node"),
                        models.F("kind"),
                        models.F("round"),
                        Coalesce("item", -1),
                        name=UNIQUE,
                    ),
                ),
            ],
        ),
    ]
