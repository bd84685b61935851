"""Room on each page of the runs' table for a run's next version (fillfactor 90).

A run's row changes as the run moves (started, asleep, woken, finished), and each
change of its state writes a new version of the row: the state is indexed, so the
version cannot be a HOT update, but it can stay on the row's own page when that page
has room. With every page packed full (PostgreSQL's default, 100), it never has, and
the new version goes to whichever page the free space map offers: on a table of years
of history, the small gaps of old, cold pages. The sweep that woke 100 runs asleep
among 100,000 (1M runs of history) read 101 pages of runs from outside shared_buffers
and dirtied 200, against 3 on a table of 10,000 runs; with 10 % of each page kept for
updates, 2.5. Inserts skip a page with less than that room, so they no longer scatter
into those gaps either: a new run goes where the last one went.

Only the pages written after the change are affected (a table is not rewritten: VACUUM
FULL or pg_repack would repack the old pages). The lock taken (SHARE UPDATE EXCLUSIVE)
lets reads and writes go on. Nothing to do on other databases.
"""

from django.db import migrations

RUNS = "workflows_workflowrun"
FILLFACTOR = 90


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(RUNS)
        schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {FILLFACTOR})")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(RUNS)} RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0023_start_constants_in_text"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
