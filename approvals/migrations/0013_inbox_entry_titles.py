from django.db import migrations, models

# Entries already written take their task's title (a correlated subquery, which
# PostgreSQL and SQLite both run).
BACKFILL = """
UPDATE approvals_inboxentry
SET title = (SELECT title FROM approvals_humantask WHERE id = approvals_inboxentry.task_id)
"""


class Migration(migrations.Migration):
    """Each inbox entry carries its task's title, so a search filters the tab's own range."""

    dependencies = [
        ("approvals", "0012_task_list_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="inboxentry",
            name="title",
            field=models.CharField(default="", max_length=200),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
