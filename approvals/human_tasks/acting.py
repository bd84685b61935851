"""Who acts on a human task, and what every use case checks before it changes one: the
lock order (run, then task), who may see and act, separation of duties, and the text
it accepts. `Act` is who acts, through which channel, from where and when.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals import audit, duties, permissions
from approvals.act import Act
from approvals.human_tasks.errors import (
    AlreadyDecided,
    ConflictOfDuty,
    InvalidRequest,
    NotAllowed,
    StaleTask,
    TaskClosed,
    TaskNotFound,
    display_name,
)
from approvals.models import (
    COMMENT_MAX_LENGTH,
    GroupManager,
    HumanTask,
    ReportingLine,
)
from approvals.states import TaskKind, TaskState
from workflows.cleaning import Refused, clean_text
from workflows.models import WorkflowRun

User = get_user_model()


# ---------------------------------------------------------------------------
# Who is asking
# ---------------------------------------------------------------------------


def reviewer_for(user: Any) -> permissions.Reviewer:
    group_ids = frozenset(user.groups.values_list("id", flat=True))
    managed = frozenset(
        GroupManager.objects.filter(manager=user).values_list("group_id", flat=True)
    )
    return permissions.Reviewer(
        user_id=user.pk,
        group_ids=group_ids,
        managed_group_ids=managed,
        is_operator=user.has_perm("approvals.operate_humantask"),
        username=user.get_username(),
    )


def person_for(user: Any) -> permissions.Person:
    """Where `user` sits, for permissions.may_hand_to."""
    line = ReportingLine.objects.filter(user=user).values_list("manager_id", flat=True).first()
    return permissions.Person(
        user_id=user.pk,
        group_ids=frozenset(user.groups.values_list("id", flat=True)),
        managed_group_ids=frozenset(
            GroupManager.objects.filter(manager=user).values_list("group_id", flat=True)
        ),
        manager_id=line,
        is_operator=user.has_perm("approvals.operate_humantask"),
    )


def facts_for(task: HumanTask) -> permissions.TaskFacts:
    return permissions.TaskFacts(
        state=task.state,
        assignee_id=task.assignee_id,
        owner_id=task.owner_id,
        decided_by_id=task.decided_by_id,
        candidate_user_ids=frozenset(task.candidate_users.values_list("id", flat=True)),
        candidate_group_ids=frozenset(task.candidate_groups.values_list("id", flat=True)),
        duties=duties.duties_of(task),
    )


def visible_task(*, task_id: UUID, user: Any) -> HumanTask:
    """Return the task if `user` may see it; raise TaskNotFound otherwise (read side)."""
    task = (
        HumanTask.objects.select_related("run__started_by", "assignee", "owner", "decided_by")
        .filter(pk=task_id)
        .first()
    )
    if task is None or not permissions.can_see(reviewer_for(user), facts_for(task)):
        raise TaskNotFound()
    return task


def act_of(user: Any, channel: str, now: datetime | None, **extra: Any) -> Act:
    """Return who acts, from a use case's keyword arguments."""
    return Act(user=user, channel=channel, now=now or timezone.now(), **extra)


def lock_task(task_id: UUID) -> HumanTask:
    """Lock the task's run, then the task: the engine's lock order."""
    run_id = HumanTask.objects.filter(pk=task_id).values_list("run_id", flat=True).first()
    if run_id is None:
        raise TaskNotFound()
    WorkflowRun.objects.select_for_update().filter(pk=run_id).first()
    return (
        HumanTask.objects.select_for_update(of=("self",))
        .select_related("run__started_by", "assignee", "owner", "decided_by", "substitute_for")
        .get(pk=task_id)
    )


def authorised(
    task_id: UUID,
    request: Act,
    allowed: Callable[[permissions.Reviewer, permissions.TaskFacts], bool],
    refusal: str,
    action: str = "",
) -> HumanTask:
    task = lock_task(task_id)
    reviewer = reviewer_for(request.user)
    facts = facts_for(task)
    if not permissions.can_see(reviewer, facts):
        raise TaskNotFound()
    if task.kind == TaskKind.REVISION:
        raise NotAllowed(
            _(
                "This task asks the requester to change their request: it is answered by "
                "resubmitting the request's form (or withdrawing it), not claimed or decided."
            )
        )
    if task.state == TaskState.COMPLETED:
        raise AlreadyDecided(task)
    if not task.is_live:
        raise TaskClosed(task)
    if request.expected_version is not None and request.expected_version != task.version:
        raise StaleTask(task)
    if action:
        _refuse_conflict_of_duty(task, facts, reviewer, action)
    if not allowed(reviewer, facts):
        raise NotAllowed(refusal)
    return task


def _refuse_conflict_of_duty(
    task: HumanTask,
    facts: permissions.TaskFacts,
    reviewer: permissions.Reviewer,
    action: str,
) -> None:
    """Refuse, saying why, whoever separation of duties keeps from `action` on this task.

    Checked before who may act, so that an operator or a candidate hears the real
    reason. Reassigning is refused only to a requester: a manager who decided one
    stage may still hand another stage's task to someone else.
    """
    conflict = permissions.duty_conflict(
        user_id=reviewer.user_id, username=reviewer.username, duties=facts.duties
    )
    if conflict is None or (
        action == "reassign" and conflict.kind != permissions.Conflict.REQUESTER
    ):
        return
    raise ConflictOfDuty(
        duties.refusal_for_actor(conflict, workflow_type=task.workflow_type, action=action)
    )


def refuse_handing_to(task: HumanTask, giver: Any, person: Any, action: str) -> None:
    """Refuse to delegate or reassign a task to someone who may not decide it, or whom
    the giver may not hand tasks to (permissions.may_hand_to); duties first, as the
    more telling reason."""
    conflict = _conflict_of(person, duties.duties_of(task))
    if conflict is not None:
        raise ConflictOfDuty(
            duties.refusal_for_recipient(
                conflict,
                workflow_type=task.workflow_type,
                action=action,
                name=display_name(person),
            )
        )
    if not permissions.may_hand_to(person_for(giver), person_for(person)):
        if action == "reassign":
            message = _(
                "You can reassign tasks only to people in your groups or the groups you manage,"
                " your manager or your reports; %(person)s is none of these."
            )
        else:
            message = _(
                "You can delegate tasks only to people in your groups or the groups you manage,"
                " your manager or your reports; %(person)s is none of these."
            )
        raise NotAllowed(message % {"person": display_name(person)})


def _conflict_of(user: Any, task_duties: permissions.Duties) -> permissions.DutyConflict | None:
    return permissions.duty_conflict(
        user_id=user.pk, username=user.get_username(), duties=task_duties
    )


def may_decide(user: Any, task_duties: permissions.Duties) -> bool:
    return _conflict_of(user, task_duties) is None


def why_barred(*, task: HumanTask, user: Any) -> str:
    """Return why separation of duties keeps `user` from claiming or deciding `task`, or ""."""
    return _why(task.workflow_type, user, duties.duties_of(task))


def barred_on_page(*, tasks: Sequence[duties.TaskOnPage], user: Any) -> dict[UUID, str]:
    """Return, for each task of a page (plain values), why `user` may not decide it
    ("" if they may)."""
    page = duties.duties_on_page(tasks)
    return {task.pk: _why(task.workflow_type, user, page[task.pk]) for task in tasks}


def _why(workflow_type: str, user: Any, task_duties: permissions.Duties) -> str:
    conflict = _conflict_of(user, task_duties)
    if conflict is None:
        return ""
    return duties.refusal_for_actor(conflict, workflow_type=workflow_type, action="decide")


def audit_task(task: HumanTask, event: str, request: Act, **extra: Any) -> None:
    audit.record(
        task=task,
        event=event,
        actor=request.user,
        channel=request.channel,
        now=request.now,
        remote_addr=request.remote_addr,
        **extra,
    )


def _text(
    value: str, *, label: str = "", max_length: int | None = None, multiline: bool = True
) -> str:
    """Return text as stored, trimmed; refuse, saying why, what workflows.cleaning refuses."""
    try:
        return clean_text(value.strip(), max_length=max_length, multiline=multiline)
    except Refused as error:
        raise InvalidRequest(
            _("%(label)s %(error)s.") % {"label": label or _("The text"), "error": error}
        ) from None


def clean_comment(value: str, *, label: str = "") -> str:
    """Return a comment or reason as stored, refused past COMMENT_MAX_LENGTH (every channel)."""
    return _text(value, label=label or _("The comment"), max_length=COMMENT_MAX_LENGTH)


def user_named(username: str) -> Any:
    name = _text(username, label=_("The username"), max_length=150, multiline=False)
    user = User.objects.filter(username=name, is_active=True).first()
    if user is None:
        raise InvalidRequest(
            _("There is no active user called %(name)s.") % {"name": repr(username)}
        )
    return user
