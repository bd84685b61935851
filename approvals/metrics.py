"""The human-task gauges Baton's /metrics reads at scrape time: open tasks by SLA and by group.

Registered with `workflows.metrics.add_scrape_gauges` when the app starts. Each
count reads an index (`task_state_due_idx` for the SLA, the queue rows'
`inbox_group_due_idx` for groups) and stops at `workflows.exposition.COUNT_CAP`,
so a scrape costs the same with a thousand open tasks or a million.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import Group

from approvals.escalation import DUE_SOON
from approvals.models import HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES, Sla
from workflows.exposition import COUNT_CAP, capped_count


def human_task_gauges(now: datetime) -> list:
    """Open human tasks by SLA state, and tasks waiting in each group's queue."""
    live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES)
    by_sla = {
        Sla.OVERDUE: live.filter(due_at__lte=now),
        Sla.DUE_SOON: live.filter(due_at__gt=now, due_at__lte=now + DUE_SOON),
        Sla.ON_TIME: live.filter(due_at__gt=now + DUE_SOON),
        "no_due_time": live.filter(due_at__isnull=True),
    }
    queued = [
        ([name], float(capped_count(InboxEntry.objects.filter(group_id=group_id))))
        for group_id, name in Group.objects.order_by("name").values_list("id", "name")
    ]
    return [
        (
            "baton_open_human_tasks",
            f"Open human tasks by SLA state (counted up to {COUNT_CAP} each).",
            ["sla"],
            [([str(sla)], float(capped_count(tasks))) for sla, tasks in by_sla.items()],
        ),
        (
            "baton_queued_human_tasks",
            f"Human tasks waiting in each group's queue (counted up to {COUNT_CAP} each).",
            ["group"],
            queued,
        ),
    ]
