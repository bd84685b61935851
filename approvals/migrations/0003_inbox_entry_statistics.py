"""Teach PostgreSQL's planner how rows spread over (user, tab) together.

It multiplies the selectivities of `user_id = %s` and `tab = %s` as if they were
independent, so it underestimates the tabs of the busiest reviewers (the users
who matter), and for them may prefer to fetch the whole tab and sort it over
reading the first rows of the index in order. A most-common-values statistic on
the pair gives it their real sizes. Other databases have no such statistics.
"""

from django.db import migrations

CREATE = (
    "CREATE STATISTICS IF NOT EXISTS inbox_entry_user_tab_stats (mcv)"
    " ON user_id, tab FROM approvals_inboxentry"
)
DROP = "DROP STATISTICS IF EXISTS inbox_entry_user_tab_stats"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)
        schema_editor.execute("ANALYZE approvals_inboxentry")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0002_inbox_entries")]

    operations = [migrations.RunPython(create, drop)]
