"""Make the engine's keys into runs and steps ON DELETE RESTRICT (workflows.foreign_keys).

Integrity is unchanged (a row still pointed at cannot be deleted); the check runs
when each delete statement ends, one query per row instead of two at commit, so
retention prunes faster. Validating each key reads its table once, with writes
going on. Reversible: going back makes them Django's NO ACTION again. SQLite:
nothing changes.
"""

from django.db import migrations

from workflows import foreign_keys

KEYS = (
    ("workflows_steprun", "run_id"),
    ("workflows_signal", "run_id"),
    ("workflows_signal", "consumed_by_id"),
)


def restrict(apps, schema_editor):
    foreign_keys.set_delete_rule(schema_editor, keys=KEYS, rule=foreign_keys.RESTRICT)


def defer(apps, schema_editor):
    foreign_keys.set_delete_rule(schema_editor, keys=KEYS, rule=foreign_keys.NO_ACTION)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0017_partition_step_events"),
    ]

    operations = [
        migrations.RunPython(restrict, defer, elidable=False),
    ]
