"""Drop the engine's functions that no code calls any more: 0019's claim and start.

0020 and 0023 installed their successors beside them, so that code deployed before those
migrations could go on calling the old ones while it ran. Every release since calls the
new names only, and the checks (`workflows.checks.check_functions`) refuse to start a
process on a database that lacks a function the code calls, so no such process is left.
Migrating back installs them again from 0019's frozen text. PostgreSQL only.
"""

import importlib

from django.db import migrations

FIRST = importlib.import_module("workflows.migrations.0019_engine_functions")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FIRST.DROP_CLAIM_STEP)
        schema_editor.execute(FIRST.DROP_START_RUN)


def install_again(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FIRST.CLAIM_STEP)
        schema_editor.execute(FIRST.START_RUN)


class Migration(migrations.Migration):
    dependencies = [("workflows", "0027_events_found_by_run_alone")]

    operations = [migrations.RunPython(drop, install_again)]
