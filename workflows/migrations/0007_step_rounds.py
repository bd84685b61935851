"""Key steps on (run, node, kind, round), so a node entered again by a GoBack gets a new step.

Existing steps are all round 0 and stay unique under the new key. The new
constraint is added before the old one is dropped, so steps are never
unconstrained (the migration runs in one transaction on PostgreSQL anyway).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0006_requests_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="steprun",
            name="round",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name="steprun",
            constraint=models.UniqueConstraint(
                fields=("run", "node", "kind", "round"), name="step_unique_per_round"
            ),
        ),
        migrations.RemoveConstraint(
            model_name="steprun",
            name="step_unique_per_run",
        ),
    ]
