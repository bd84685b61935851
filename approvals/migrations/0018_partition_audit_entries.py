"""Partition the audit entries (django-auditlog's table) by month of `timestamp`, on PostgreSQL.

The audit chain lives in auditlog_logentry; partitioning it lets retention drop
whole months of it (approvals.audit.retention). Nothing changes on SQLite. Not
reversible in the database: going back leaves the partitioned table, which
serves the older code as it is.
"""

from django.db import migrations
from django.utils import timezone

from workflows import partitions


def partition_audit_entries(apps, schema_editor):
    partitions.convert_to_monthly(
        schema_editor, table="auditlog_logentry", column="timestamp", now=timezone.now()
    )


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0017_decided_by_me_index'),
        ('auditlog', '0017_add_actor_email'),
    ]

    operations = [
        migrations.RunPython(partition_audit_entries, migrations.RunPython.noop, elidable=False),
    ]
