"""Re-hash the audit chain written before it was keyed, with the key (BATON_AUDIT_KEY).

Set BATON_AUDIT_KEY before this runs: entries are re-hashed with the key in
force now. Only entries whose old, unkeyed chain still holds are re-hashed,
each marked `rekeyed` with the time; see approvals.audit.rekey_unkeyed_chain.
"""

from django.db import migrations
from django.utils import timezone


def rekey(apps, schema_editor):
    from approvals.audit import rekey_unkeyed_chain

    rekey_unkeyed_chain(log_entries=apps.get_model("auditlog", "LogEntry"), now=timezone.now())


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0004_decisions_index"),
        ("auditlog", "0017_add_actor_email"),
    ]

    operations = [migrations.RunPython(rekey, migrations.RunPython.noop, elidable=True)]
