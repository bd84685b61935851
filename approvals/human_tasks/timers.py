"""A human task's due times, fired by the engine's sweep: escalate it, settle it at its
deadline, remind its holder. Each fires once, whatever sweeps run at the same time.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from approvals import audit, duties, escalation
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.acting import Act, audit_task, lock_task, may_decide
from approvals.human_tasks.decide import approval_node_of, settle_approval, trace_closed
from approvals.human_tasks.lifecycle import warn_missing_groups
from approvals.models import (
    HumanTask,
    ReportingLine,
)
from approvals.notify import emails, notifications, webhooks
from approvals.states import LIVE_TASK_STATES, Channel, Outcome
from workflows import due_times, engine
from workflows.dsl import Approval

User = get_user_model()


# ---------------------------------------------------------------------------
# Escalations and deadlines (fired by the engine's sweep)
# ---------------------------------------------------------------------------


def escalate_human_task(*, task_id: UUID, now: datetime) -> bool:
    """Escalate a task whose escalation time passed; return False if nothing was due."""
    with transaction.atomic():
        task = lock_task(task_id)
        if not task.is_live or task.escalate_at is None or task.escalate_at > now:
            return False
        _escalate(task, approval_node_of(task), now)
    return True


def _escalate(task: HumanTask, node: Approval, now: datetime) -> bool:
    """Widen who may decide by the next level of the node's policy, reopen and email them.

    Return False, changing nothing, once every level has been used: escalating
    the same level again would only take the task from whoever holds it now.
    """
    if task.escalation_level >= len(node.escalations):
        return False
    policy = node.escalations[task.escalation_level]
    holders = [user for user in (task.assignee, task.owner) if user is not None]
    new_groups = list(Group.objects.filter(name__in=policy.to_groups))
    warn_missing_groups(task.run, task.step, policy.to_groups, found=new_groups, now=now)
    new_users = []
    if policy.to_manager:
        subjects = holders or list(task.candidate_users.all())
        new_users = [
            line.manager
            for line in ReportingLine.objects.filter(user__in=subjects).select_related("manager")
        ]
    task.candidate_users.add(*holders, *new_users)
    task.candidate_groups.add(*new_groups)
    task.escalate(
        next_escalation_at=escalation.next_escalation_at(
            node=node,
            level=task.escalation_level + 1,
            now=now,
            calendars=due_times.load_calendars(durations=due_times.approval_durations(node)),
        )
    )
    task.save()
    inbox_entries.refresh(task)
    system = audit.system_actor()
    audit.record(
        task=task,
        event="escalated",
        actor=system,
        channel=Channel.SYSTEM,
        now=now,
        changes={
            "escalation_level": [task.escalation_level - 1, task.escalation_level],
            "groups": [None, [group.name for group in new_groups]],
            "users": [None, [user.get_username() for user in new_users]],
        },
    )
    recipients = {user.pk: user for user in new_users}
    for user in User.objects.filter(groups__in=new_groups, is_active=True).distinct():
        recipients[user.pk] = user
    # No decision link for someone who may not decide (the requester in the finance group).
    task_duties = duties.duties_of(task)
    allowed = [user for user in recipients.values() if may_decide(user, task_duties)]
    emails.send_escalation(task=task, recipients=allowed, now=now)
    webhooks.task_escalated(task=task, now=now)
    return True


def handle_deadline(*, task_id: UUID, now: datetime) -> bool:
    """Do what the node chose for a task past its final deadline; False if not due."""
    with transaction.atomic():
        task = lock_task(task_id)
        if not task.is_live or task.due_at is None or task.due_at > now:
            return False
        node = approval_node_of(task)
        system = Act(user=audit.system_actor(), channel=Channel.SYSTEM, now=now)
        if node.on_deadline == "reject":
            task.complete(
                outcome=Outcome.REJECTED,
                by=system.user,
                channel=Channel.SYSTEM,
                comment="No decision by the deadline.",
                now=now,
            )
            task.save()
            trace_closed(task, task.run, Outcome.REJECTED, now)
            inbox_entries.refresh(task)
            audit_task(task, Outcome.REJECTED, system, comment="No decision by the deadline.")
            settle_approval(task, now)
        elif node.on_deadline == "fail":
            task.expire(now=now)
            task.save()
            trace_closed(task, task.run, "expired", now)
            inbox_entries.refresh(task)
            audit_task(task, "expired", system)
            engine.fail_waiting_step(
                run_id=task.run_id,
                node=task.node,
                error={"type": "DeadlinePassed", "message": "no decision by the deadline"},
                now=now,
            )
        else:
            previous = task.due_at
            calendars = due_times.load_calendars(durations=[node.deadline_delay()])
            task.due_at = escalation.deadline_at(node=node, created_at=now, calendars=calendars)
            task.remind_at = escalation.reminder_at(node=node, due_at=task.due_at, now=now)
            if not _escalate(task, node, now):
                task.save(update_fields=["due_at", "remind_at"])
                inbox_entries.refresh(task)
                audit_task(
                    task,
                    "deadline_extended",
                    system,
                    changes={"due_at": [previous.isoformat(), task.due_at.isoformat()]},
                )
    return True


def remind_human_task(*, task_id: UUID, now: datetime) -> bool:
    """Remind a task's holders that it is due soon; return False if nothing was due."""
    with transaction.atomic():
        task = lock_task(task_id)
        if not task.is_live or task.remind_at is None or task.remind_at > now:
            return False
        task.remind_at = None
        task.save(update_fields=["remind_at"])
        notifications.task_due_soon(
            task=task, requesters=duties.duties_of(task).requesters, now=now
        )
    return True


def fire_due_human_tasks(*, now: datetime, limit: int = 200) -> int:
    """Remind, escalate and time out what is due; each through its own locked use case."""
    live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES)
    reminding = live.filter(remind_at__lte=now).order_by("remind_at")
    escalating = live.filter(escalate_at__lte=now).order_by("escalate_at")
    expiring = live.filter(due_at__lte=now).order_by("due_at")
    fired = sum(
        remind_human_task(task_id=task_id, now=now)
        for task_id in reminding.values_list("id", flat=True)[:limit]
    )
    fired += sum(
        escalate_human_task(task_id=task_id, now=now)
        for task_id in escalating.values_list("id", flat=True)[:limit]
    )
    fired += sum(
        handle_deadline(task_id=task_id, now=now)
        for task_id in expiring.values_list("id", flat=True)[:limit]
    )
    return fired
