"""Make the keys into runs, steps and human tasks from the people's tables ON DELETE
RESTRICT (workflows.foreign_keys), as workflows.0018 does for the engine's.

Integrity is unchanged; retention prunes faster. Reversible. SQLite: nothing changes.
"""

from django.db import migrations

from workflows import foreign_keys

KEYS = (
    ("approvals_humantask", "run_id"),
    ("approvals_humantask", "step_id"),
    ("approvals_humantask_candidate_users", "humantask_id"),
    ("approvals_humantask_candidate_groups", "humantask_id"),
    ("approvals_inboxentry", "task_id"),
    ("approvals_comment", "task_id"),
    ("approvals_emaillink", "task_id"),
    ("approvals_snooze", "task_id"),
    ("approvals_notification", "task_id"),
    ("approvals_notification", "run_id"),
    ("approvals_webhookdelivery", "run_id"),
    ("approvals_attachment", "run_id"),
    ("approvals_attachment", "task_id"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0020_task_drafts"),
        ("workflows", "0018_restrict_deletes"),
    ]

    operations = [
        foreign_keys.restricting(KEYS),
    ]
