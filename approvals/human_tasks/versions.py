"""What a run moved to another version of its type means for its human tasks.

The engine renames the run's steps by the operator's plan (workflows.engine.migrate);
the tasks name their node too, and keep it in step with the step they belong to.
Nothing else changes: the same rows, ids, assignees, due times and decisions, so a
decided task stays decided and an open one is decided as before, now against the
target version's node. Their inbox entries show the node and the run's version, so
they are rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from approvals.human_tasks import inbox_entries
from approvals.models import HumanTask
from workflows.models import WorkflowRun


def rename_task_nodes(
    *, run: WorkflowRun, from_version: int, renames: Mapping[str, str], now: datetime
) -> int:
    """Rename the nodes of `run`'s human tasks by `renames`; return how many were renamed.

    Called inside the move's transaction, with the run locked (registered as a run
    migration hook by approvals.steps).
    """
    renamed = 0
    for old, new in renames.items():
        renamed += HumanTask.objects.filter(run=run, node=old).update(node=new)
    inbox_entries.refresh_run(run)
    return renamed
