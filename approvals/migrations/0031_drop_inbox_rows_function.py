"""Drop 0029's inbox rows function, which no code calls any more.

0030's page function returns a page's rows itself; 0029's stayed installed for the code
deployed before 0030, which called it while it ran. No such process is left: every
release since calls the page function only. Migrating back installs it again from
0029's frozen text. PostgreSQL only.
"""

import importlib

from django.db import migrations

ROWS = importlib.import_module("approvals.migrations.0029_inbox_rows_function")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(ROWS.DROP_INBOX_ROWS)


def install_again(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(ROWS.INBOX_ROWS)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0030_inbox_page_function")]

    operations = [migrations.RunPython(drop, install_again)]
