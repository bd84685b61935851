from django.db import migrations, transaction
from django.db.models import Q

# Frozen copies of approvals.human_tasks.inbox_entries' rules, as they were when this ran.
LIVE = ("open", "claimed", "delegated")
BATCH = 500


def fill_inbox_entry_view(apps, schema_editor):
    """Give the inbox entries of every live task the view values
    approvals.human_tasks.inbox_entries.view_of would (their task's node, state, version,
    its run's version and the usernames they name), so the page can read its rows from
    them.

    Safe on a big table, while the inbox is used: the new columns were added with
    constant defaults (no rewrite of the table), and this walks the live tasks in
    batches of BATCH, in the order of an index of theirs (task_live_created_idx), each
    batch in a transaction of its own that locks its tasks first, as the services do
    before they refresh a task's entries. So it never holds more than a batch of rows
    locked, never overwrites a refresh made since with older values, and a batch that
    fails leaves those before it done: running it again is harmless."""
    HumanTask = apps.get_model("approvals", "HumanTask")
    InboxEntry = apps.get_model("approvals", "InboxEntry")
    db = schema_editor.connection.alias
    live = HumanTask.objects.using(db).filter(state__in=LIVE).order_by("created_at", "id")
    after = None
    while True:
        with transaction.atomic(using=db):
            batch = live if after is None else live.filter(
                Q(created_at__gt=after[0]) | Q(created_at=after[0], id__gt=after[1])
            )
            tasks = list(
                batch.select_related("run__started_by", "assignee", "owner", "substitute_for")
                .select_for_update(of=("self",))[:BATCH]
            )
            if not tasks:
                return
            # A task's entries all show the same values: one short UPDATE a task, through
            # the entries' task index (one bulk_update of a batch's thousands of entries
            # is a CASE per column as long as the batch, quadratic in its size).
            for task in tasks:
                InboxEntry.objects.using(db).filter(task_id=task.pk).update(**_view(task))
        after = (tasks[-1].created_at, tasks[-1].pk)


def _view(task):
    def name(user):
        return user.username if user is not None else ""

    return {
        "run_id": task.run_id,
        "node": task.node,
        "kind": task.kind,
        "state": task.state,
        "outcome": task.outcome,
        "version": task.version,
        "workflow_version": task.run.workflow_version,
        "assignee": name(task.assignee),
        "owner": name(task.owner),
        "substitute_for": name(task.substitute_for),
        "started_by": name(task.run.started_by),
    }


class Migration(migrations.Migration):
    # Each batch commits on its own (see fill_inbox_entry_view).
    atomic = False

    dependencies = [("approvals", "0025_inbox_entry_view")]

    operations = [migrations.RunPython(fill_inbox_entry_view, migrations.RunPython.noop)]
