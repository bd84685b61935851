"""Partition the step events by month of `at` on PostgreSQL (workflows.partitions).

The keys to the run and the step stop being enforced by the database (see
StepEvent). Nothing changes on SQLite. Not reversible in the database: going back
leaves the partitioned table, which serves the older code as it is.
"""

from django.db import migrations, models
from django.utils import timezone

import django.db.models.deletion

from workflows import partitions


def partition_step_events(apps, schema_editor):
    partitions.convert_to_monthly(
        schema_editor,
        table="workflows_stepevent",
        column="at",
        now=timezone.now(),
        keep_foreign_keys=False,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0016_activity_limiters'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='stepevent',
                    name='run',
                    field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='workflows.workflowrun'),
                ),
                migrations.AlterField(
                    model_name='stepevent',
                    name='step',
                    field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='workflows.steprun'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(partition_step_events, migrations.RunPython.noop, elidable=False),
    ]
