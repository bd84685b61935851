"""Room on each page of the steps' table for a step's next version (fillfactor 90).

A step's row is written three times: scheduled (inserted), claimed and recorded (two
updates). Its state is indexed (`step_live_idx`, `step_due_idx`), so neither update
can be HOT, but each can stay on the row's own page when that page has room. Packed
full (PostgreSQL's default, 100), it never has: the new version goes to whichever page
the free space map offers, on a table of years of history the small gaps of old,
cold pages, and new steps scatter into those gaps too. Migration 0024 did the same for
the runs' table, with the figures.

Only the pages written after the change are affected (a table is not rewritten). The
lock taken (SHARE UPDATE EXCLUSIVE) lets reads and writes go on. Nothing to do on
other databases.
"""

from django.db import migrations

STEPS = "workflows_steprun"
FILLFACTOR = 90


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(STEPS)
        schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {FILLFACTOR})")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(STEPS)} RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0024_room_for_a_runs_next_version"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
