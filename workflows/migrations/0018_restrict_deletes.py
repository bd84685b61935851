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


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0017_partition_step_events"),
    ]

    operations = [
        foreign_keys.restricting(KEYS),
    ]
