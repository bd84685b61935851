"""Open and close the human tasks of an approval node: the engine's hooks, called inside
its own transaction when a run enters or leaves the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone, translation

from approvals import audit, duties, escalation, permissions, run_data_filters
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.acting import may_decide
from approvals.human_tasks.decide import trace_closed
from approvals.human_tasks.personal import substitute_for
from approvals.models import (
    HumanTask,
)
from approvals.notify import notifications, webhooks
from approvals.states import LIVE_TASK_STATES, Channel, Outcome, TaskKind, TaskState
from workflows import due_times, engine
from workflows.dsl import Approval, Node, RunData, UserTask
from workflows.models import StepRun, WorkflowRun

User = get_user_model()


# ---------------------------------------------------------------------------
# Engine hooks: creating and closing the tasks of an approval node
# ---------------------------------------------------------------------------


def open_tasks_for_step(run: WorkflowRun, step: StepRun, node: Approval) -> list[HumanTask]:
    """Create the node's tasks: one for all candidates, or one each when N of M must approve."""
    now = step.scheduled_at
    data = RunData(input=run.input, results=run.results)
    usernames = node.assignees_for(data)
    users = list(User.objects.filter(username__in=usernames, is_active=True))
    groups = list(Group.objects.filter(name__in=node.groups))
    warn_missing_groups(run, step, node.groups, found=groups, now=now)
    if node.required > 1:
        shares = [([user], []) for user in users] + [([], [group]) for group in groups]
    else:
        shares = [(users, groups)]
    task_duties = duties.duties_for(run, node.name)
    calendars = due_times.load_calendars(durations=due_times.approval_durations(node))
    returning = _returning_reviewer(run, step, node, task_duties)
    return [
        _open_task(
            run, step, node, data, share_users, share_groups, now, task_duties, calendars, returning
        )
        for share_users, share_groups in shares
    ]


def warn_missing_groups(
    run: WorkflowRun, step: StepRun, names: tuple[str, ...], *, found: list[Group], now: Any
) -> None:
    """Warn on the run's timeline when the node names groups that do not exist (deleted
    since start-up, when the system check approvals.E002 would have said so): nobody
    in them will see the task."""
    missing = sorted(set(names) - {group.name for group in found})
    if not missing:
        return
    listed = ", ".join(repr(name) for name in missing)
    engine.warn_run(
        run=run,
        step=step,
        message=(
            f"Group{'s' if len(missing) > 1 else ''} {listed} named by approval {step.node!r} "
            f"do{'es' if len(missing) == 1 else ''} not exist, so nobody in "
            f"{'them' if len(missing) > 1 else 'it'} can see its task. Create the group, or "
            "reassign the task from the console."
        ),
        now=now,
        detail={"missing_groups": missing},
    )


def _returning_reviewer(
    run: WorkflowRun, step: StepRun, node: Approval, task_duties: permissions.Duties
) -> Any | None:
    """Return who asked for changes at this approval in the round before, so that the
    resubmitted request goes straight back to them (the same assignee, as a reviewer
    expects), or None: the first round, N of M, or someone who may no longer decide it."""
    if step.round == 0 or node.required > 1:
        return None
    asked = (
        HumanTask.objects.filter(
            run=run,
            node=node.name,
            kind=TaskKind.APPROVAL,
            outcome=Outcome.CHANGES_REQUESTED,
            step__round=step.round - 1,
        )
        .select_related("decided_by")
        .order_by("-decided_at")
        .first()
    )
    reviewer = asked.decided_by if asked else None
    if reviewer is None or not reviewer.is_active or not may_decide(reviewer, task_duties):
        return None
    return reviewer


def _open_task(
    run, step, node, data, users, groups, now, task_duties, calendars, returning=None
) -> HumanTask:
    assignee = substitute = None
    if returning is not None or (len(users) == 1 and not groups):
        assignee = returning or users[0]
        stand_in = substitute_for(assignee, now)
        # A stand-in who may not decide this task (say, the requester) is passed over.
        if stand_in is not None and may_decide(stand_in, task_duties):
            assignee, substitute = stand_in, assignee
    due_at = escalation.deadline_at(node=node, created_at=now, calendars=calendars)
    task = HumanTask(
        run=run,
        step=step,
        node=node.name,
        kind=TaskKind.ENTRY if isinstance(node, UserTask) else TaskKind.APPROVAL,
        workflow_type=run.workflow_type,
        title=stored_title(lambda: node.title_for(data)),
        search_data=run_data_filters.searchable_values(
            run.workflow_type, run.workflow_version, run.input
        ),
        state=TaskState.CLAIMED if assignee else TaskState.OPEN,
        priority=node.priority,
        assignee=assignee,
        substitute_for=substitute,
        due_at=due_at,
        escalate_at=escalation.first_escalation_at(node=node, created_at=now, calendars=calendars),
        remind_at=escalation.reminder_at(node=node, due_at=due_at, now=now),
        created_at=now,
        claimed_at=now if assignee else None,
    )
    task.save()
    if returning is not None:
        # Back with its reviewer, its candidates as before: they may still release it.
        task.candidate_users.set({*users, assignee})
    else:
        task.candidate_users.set(users if assignee is None else [assignee])
    task.candidate_groups.set(groups)
    inbox_entries.refresh(task)
    notifications.task_opened(task=task, requesters=task_duties.requesters, now=now)
    webhooks.task_opened(task=task, now=now)
    audit.record(
        task=task,
        event="created",
        actor=audit.system_actor(),
        channel=Channel.SYSTEM,
        now=now,
        changes={"assignee": [None, assignee.get_username() if assignee else None]},
    )
    return task


def close_tasks_for_step(run: WorkflowRun, step: StepRun, node: Node) -> None:
    """Cancel the node's tasks still open (an approval's or a revision's): decided
    elsewhere, timed out, or run cancelled."""
    now = timezone.now()
    for task in HumanTask.objects.select_for_update().filter(step=step, state__in=LIVE_TASK_STATES):
        task.cancel(now=now)
        task.save()
        trace_closed(task, run, "cancelled", now)
        inbox_entries.refresh(task)
        audit.record(
            task=task,
            event="cancelled",
            actor=audit.system_actor(),
            channel=Channel.SYSTEM,
            now=now,
        )


def stored_title(make: Callable[[], str]) -> str:
    """Return the title `make` writes, as a task keeps it: in the site's language.

    A title is stored with the task and copied into its inbox rows, where people search
    and sort by it, so it is written once, in settings.LANGUAGE_CODE, rather than in the
    language of whoever's action opened the task (a request, or a worker in English).
    """
    with translation.override(settings.LANGUAGE_CODE):
        return " ".join(str(make()).split())[:200]
