"""The use cases of human tasks, shared by the inbox, the API, the admin and email links.

Each is one transaction that locks the run row and then the task row (the same
order the engine uses, so a decision and a timeout never deadlock), checks who
may act, transitions, audits and, when a decision settles the approval node,
signals the run. A replay is refused with a domain error, never a second effect.
Whatever changes a task's state, holders, candidates, priority or due time also
calls `inbox_entries.refresh(task)`, in the same transaction, so the inbox stays true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from approvals import (
    audit,
    duties,
    emails,
    escalation,
    inbox_entries,
    links,
    notifications,
    permissions,
    task_forms,
)
from approvals.models import (
    COMMENT_MAX_LENGTH,
    Comment,
    GroupManager,
    HumanTask,
    ReportingLine,
    Snooze,
    Substitution,
)
from approvals.states import LIVE_TASK_STATES, Channel, Outcome, TaskState
from workflows import due_times, engine, metrics, registry, tracing
from workflows.cleaning import Refused, clean_text
from workflows.dsl import Approval, RunData
from workflows.dsl import InvalidForm as InvalidFormValues
from workflows.models import StepRun, WorkflowRun

User = get_user_model()


# ---------------------------------------------------------------------------
# Errors, each with the HTTP status the views and the API answer with
# ---------------------------------------------------------------------------


class TaskError(Exception):
    status = 400


class TaskNotFound(TaskError):
    status = 404

    def __init__(self) -> None:
        super().__init__("No such task (or it is not yours to see).")


class NotAllowed(TaskError):
    status = 403


class ConflictOfDuty(NotAllowed):
    """Separation of duties forbids it: a requester's own run, or a second stage."""


class InvalidRequest(TaskError):
    status = 422


class InvalidForm(InvalidRequest):
    """The approval's form is not filled in as it must be; `errors` names each field
    ({"field", "message"}, as pydantic says it) so a page can show each beside its box."""

    def __init__(self, node: Approval, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        if node.form is None:
            super().__init__("This decision has no form: send no form values.")
        else:
            words = task_forms.in_words(node.form, errors)
            super().__init__(f"Fill in the form to approve: {words} Nothing was decided.")


class TaskConflict(TaskError):
    status = 409


class AlreadyDecided(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        self.task = task
        who = _display_name(task.decided_by)
        when = timezone.localtime(task.decided_at).strftime("%Y-%m-%d %H:%M %Z")
        super().__init__(f"This task was already {task.outcome} by {who} at {when}.")


class TaskClosed(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        super().__init__(f"This task is {task.state}: there is nothing left to decide.")


class StaleTask(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        holder = f" (now with {_display_name(task.assignee)})" if task.assignee else ""
        super().__init__(
            f"This task changed since you opened it{holder}. Reload it to see where it stands."
        )


def _display_name(user: Any) -> str:
    if user is None:
        return "someone"
    return user.get_full_name() or user.get_username()


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


@dataclass(frozen=True)
class _Request:
    """Who acts, through which channel, from where, on which version they saw."""

    user: Any
    channel: str
    now: datetime
    remote_addr: str | None = None
    expected_version: int | None = None


def _request(user: Any, channel: str, now: datetime | None, **extra: Any) -> _Request:
    return _Request(user=user, channel=channel, now=now or timezone.now(), **extra)


def _lock(task_id: UUID) -> HumanTask:
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


def _authorised(
    task_id: UUID,
    request: _Request,
    allowed: Callable[[permissions.Reviewer, permissions.TaskFacts], bool],
    refusal: str,
    action: str = "",
) -> HumanTask:
    task = _lock(task_id)
    reviewer = reviewer_for(request.user)
    facts = facts_for(task)
    if not permissions.can_see(reviewer, facts):
        raise TaskNotFound()
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


def _refuse_handing_to(task: HumanTask, giver: Any, person: Any, action: str) -> None:
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
                name=_display_name(person),
            )
        )
    if not permissions.may_hand_to(person_for(giver), person_for(person)):
        raise NotAllowed(
            f"You can {action} tasks only to people in your groups or the groups you manage,"
            f" your manager or your reports; {_display_name(person)} is none of these."
        )


def _conflict_of(user: Any, task_duties: permissions.Duties) -> permissions.DutyConflict | None:
    return permissions.duty_conflict(
        user_id=user.pk, username=user.get_username(), duties=task_duties
    )


def _may_decide(user: Any, task_duties: permissions.Duties) -> bool:
    return _conflict_of(user, task_duties) is None


def why_barred(*, task: HumanTask, user: Any) -> str:
    """Return why separation of duties keeps `user` from claiming or deciding `task`, or ""."""
    return _why(task, user, duties.duties_of(task))


def barred_on_page(*, tasks: list[HumanTask], user: Any) -> dict[UUID, str]:
    """Return, for each task of a page, why `user` may not decide it ("" if they may)."""
    page = duties.duties_on_page(tasks)
    return {task.pk: _why(task, user, page[task.pk]) for task in tasks}


def _why(task: HumanTask, user: Any, task_duties: permissions.Duties) -> str:
    conflict = _conflict_of(user, task_duties)
    if conflict is None:
        return ""
    return duties.refusal_for_actor(conflict, workflow_type=task.workflow_type, action="decide")


def _audit(task: HumanTask, event: str, request: _Request, **extra: Any) -> None:
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
    value: str, *, label: str = "The text", max_length: int | None = None, multiline: bool = True
) -> str:
    """Return text as stored, trimmed; refuse, saying why, what workflows.cleaning refuses."""
    try:
        return clean_text(value.strip(), max_length=max_length, multiline=multiline)
    except Refused as error:
        raise InvalidRequest(f"{label} {error}.") from None


def _comment(value: str, *, label: str = "The comment") -> str:
    """Return a comment or reason as stored, refused past COMMENT_MAX_LENGTH (every channel)."""
    return _text(value, label=label, max_length=COMMENT_MAX_LENGTH)


def _user_named(username: str) -> Any:
    name = _text(username, label="The username", max_length=150, multiline=False)
    user = User.objects.filter(username=name, is_active=True).first()
    if user is None:
        raise InvalidRequest(f"There is no active user called {username!r}.")
    return user


# ---------------------------------------------------------------------------
# Claim and release
# ---------------------------------------------------------------------------


def claim_human_task(
    *, task_id: UUID, user: Any, channel: str, now: datetime | None = None, **extra: Any
) -> HumanTask:
    """Take an open task so that only you work on it."""
    request = _request(user, channel, now, **extra)
    with transaction.atomic():
        task = _authorised(
            task_id,
            request,
            permissions.can_claim,
            "Only a candidate can claim this task.",
            action="claim",
        )
        task.claim(user=user, now=request.now)
        task.save()
        inbox_entries.refresh(task)
        _audit(task, "claimed", request, changes={"assignee": [None, user.get_username()]})
    return task


def release_human_task(
    *, task_id: UUID, user: Any, channel: str, now: datetime | None = None, **extra: Any
) -> HumanTask:
    """Give a claimed group task back to its candidates."""
    request = _request(user, channel, now, **extra)
    with transaction.atomic():
        task = _authorised(
            task_id,
            request,
            permissions.can_release,
            "Only the reviewer who claimed this task can release it.",
        )
        previous = task.assignee.get_username()
        task.release()
        task.save()
        inbox_entries.refresh(task)
        _audit(task, "released", request, changes={"assignee": [previous, None]})
    return task


# ---------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------


def approve_human_task(
    *,
    task_id: UUID,
    user: Any,
    channel: str,
    comment: str = "",
    values: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Approve a task; `values` fill in its approval's form (Approval.form), which must
    fit it: they are kept on the decision, audited and passed into the run's data."""
    request = _request(user, channel, now, **extra)
    comment = _comment(comment)
    with transaction.atomic():
        return _decide(task_id, request, Outcome.APPROVED, comment, values=values)


def reject_human_task(
    *,
    task_id: UUID,
    user: Any,
    channel: str,
    reason: str,
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Reject a task; the reason is required and becomes a comment in its timeline."""
    request = _request(user, channel, now, **extra)
    with transaction.atomic():
        return _decide(task_id, request, Outcome.REJECTED, _comment(reason, label="The reason"))


def _decide(
    task_id: UUID,
    request: _Request,
    outcome: Outcome,
    comment: str,
    values: Mapping[str, Any] | None = None,
) -> HumanTask:
    task = _authorised(
        task_id,
        request,
        permissions.can_decide,
        "You are not a reviewer of this task.",
        action="decide",
    )
    if outcome == Outcome.REJECTED and not comment:
        raise InvalidRequest("Say why you reject it: a reason is required.")
    _refuse_second_share(task, request.user)
    # Only an approval fills in the form: a rejection needs its reason, nothing more.
    form_values = _form_values(task, values) if outcome == Outcome.APPROVED else {}
    task.complete(
        outcome=outcome,
        by=request.user,
        channel=request.channel,
        comment=comment,
        now=request.now,
        form_values=form_values,
    )
    task.save()
    metrics.human_task_decided(
        workflow_type=task.workflow_type,
        node=task.node,
        outcome=outcome,
        opened_at=task.created_at,
        decided_at=request.now,
    )
    _trace_closed(task, task.run, outcome, request.now)
    inbox_entries.refresh(task)
    if comment:
        Comment.objects.create(task=task, author=request.user, body=comment, created_at=request.now)
    changes: dict[str, Any] = {"state": ["live", outcome]}
    if form_values:
        changes["form_values"] = [{}, form_values]
    _audit(task, outcome, request, comment=comment, changes=changes)
    notifications.request_decided(task=task, now=request.now)
    if task.owner_id is not None:
        emails.send_delegation_done(task=task)
    _settle_approval(task, request.now)
    return task


def _form_values(task: HumanTask, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the approval's form values as its form reads them; refuse, naming each
    field, values that do not fit (nothing is decided then: the caller's transaction
    rolls back)."""
    node = _approval_node(task)
    try:
        return node.validate_form(dict(values or {}))
    except InvalidFormValues as invalid:
        raise InvalidForm(node, invalid.errors) from None


def _trace_closed(task: HumanTask, run: WorkflowRun, outcome: str, now: datetime) -> None:
    tracing.human_task_closed(
        run=run,
        node=task.node,
        task_id=task.pk,
        opened_at=task.created_at,
        closed_at=now,
        outcome=outcome,
    )


def _settle_approval(task: HumanTask, now: datetime) -> None:
    """Signal the run once the node's tasks reach a decision: N approvals, or too many
    rejections for N to be reachable. The engine then closes the remaining tasks.

    The signal's payload becomes the approval step's result, so later steps and
    conditions read each decision's form values there: `decisions[i]["values"]`,
    and, for an approval one person decides, `values` (RunData.form_values).
    """
    node = _approval_node(task)
    siblings = list(
        HumanTask.objects.filter(step_id=task.step_id).values_list("outcome", flat=True)
    )
    approvals = siblings.count(Outcome.APPROVED)
    rejections = siblings.count(Outcome.REJECTED)
    if approvals >= node.required:
        signal = node.approved_signal
    elif rejections > len(siblings) - node.required:
        signal = node.rejected_signal
    else:
        return
    decisions = HumanTask.objects.filter(step_id=task.step_id).exclude(outcome="")
    payload: dict[str, Any] = {
        "outcome": signal.rsplit(".", 1)[1],
        "decisions": [
            {
                "task": str(decision.pk),
                "outcome": decision.outcome,
                "by": decision.decided_by.get_username(),
                "comment": decision.comment,
                "values": decision.form_values,
            }
            for decision in decisions.select_related("decided_by").order_by("decided_at", "id")
        ],
    }
    if node.required == 1:
        payload["values"] = task.form_values
    engine.signal_run(
        run_id=task.run_id,
        name=signal,
        signal_id=f"{engine.RESERVED_SIGNAL_ID_PREFIX}step-{task.step_id}",
        from_human_task=True,
        payload=payload,
        now=now,
    )


def _refuse_second_share(task: HumanTask, user: Any) -> None:
    """N of M means N people: nobody decides two shares of one approval."""
    if _approval_node(task).required <= 1:
        return
    already = HumanTask.objects.filter(step_id=task.step_id, decided_by=user).exclude(pk=task.pk)
    if already.exists():
        raise TaskConflict(
            "You already decided another share of this approval; someone else must decide this one."
        )


def _approval_node(task: HumanTask) -> Approval:
    run = task.run
    node = registry.get(run.workflow_type, run.workflow_version).node(task.node)
    assert isinstance(node, Approval)
    return node


# ---------------------------------------------------------------------------
# Delegation and reassignment
# ---------------------------------------------------------------------------


def delegate_human_task(
    *,
    task_id: UUID,
    user: Any,
    to_username: str,
    channel: str,
    comment: str = "",
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Let someone else decide for you; you stay the owner and are told when it is done."""
    request = _request(user, channel, now, **extra)
    with transaction.atomic():
        task = _authorised(
            task_id,
            request,
            permissions.can_delegate,
            "Only this task's reviewer can delegate it.",
            action="delegate",
        )
        delegate = _user_named(to_username)
        if delegate.pk == user.pk:
            raise InvalidRequest("You cannot delegate a task to yourself.")
        _refuse_handing_to(task, user, delegate, "delegate")
        task.delegate(owner=user, delegate=delegate)
        task.save()
        inbox_entries.refresh(task)
        notifications.task_handed(task=task, to=delegate, by=user, delegated=True, now=request.now)
        _comment_if_any(task, user, comment, request.now)
        _audit(
            task,
            "delegated",
            request,
            comment=comment,
            changes={"assignee": [user.get_username(), to_username]},
        )
    return task


def reassign_human_task(
    *,
    task_id: UUID,
    user: Any,
    to_username: str,
    channel: str,
    comment: str = "",
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Hand the task to someone else for good (the owner, a group's manager or an operator)."""
    request = _request(user, channel, now, **extra)
    with transaction.atomic():
        task = _authorised(
            task_id,
            request,
            permissions.can_reassign,
            "Only the task's owner, its group's manager or an operator can reassign it.",
            action="reassign",
        )
        new_assignee = _user_named(to_username)
        previous = task.assignee.get_username() if task.assignee else None
        if new_assignee.pk == task.assignee_id:
            raise InvalidRequest(f"The task is already with {to_username}.")
        _refuse_handing_to(task, user, new_assignee, "reassign")
        task.reassign(to=new_assignee, now=request.now)
        task.save()
        task.candidate_users.add(new_assignee)
        inbox_entries.refresh(task)
        notifications.task_handed(
            task=task, to=new_assignee, by=user, delegated=False, now=request.now
        )
        _comment_if_any(task, user, comment, request.now)
        _audit(
            task,
            "reassigned",
            request,
            comment=comment,
            changes={"assignee": [previous, to_username]},
        )
    return task


def comment_on_human_task(
    *, task_id: UUID, user: Any, body: str, channel: str, now: datetime | None = None, **extra: Any
) -> Comment:
    request = _request(user, channel, now, **extra)
    body = _comment(body)
    if not body:
        raise InvalidRequest("A comment cannot be empty.")
    with transaction.atomic():
        task = _lock(task_id)
        if not permissions.can_comment(reviewer_for(user), facts_for(task)):
            raise TaskNotFound()
        comment = Comment.objects.create(task=task, author=user, body=body, created_at=request.now)
        _audit(task, "commented", request, comment=body)
    return comment


def _comment_if_any(task: HumanTask, user: Any, body: str, now: datetime) -> None:
    body = _comment(body)
    if body:
        Comment.objects.create(task=task, author=user, body=body, created_at=now)


# ---------------------------------------------------------------------------
# The reviewer's own view: snooze, substitutes
# ---------------------------------------------------------------------------


def snooze_human_task(*, task_id: UUID, user: Any, until: datetime) -> Snooze:
    """Hide a task from your lists until `until`; it comes back by itself."""
    visible_task(task_id=task_id, user=user)
    if until <= timezone.now():
        raise InvalidRequest("Snooze until a time in the future.")
    snooze, _ = Snooze.objects.update_or_create(
        task_id=task_id, user=user, defaults={"until": until}
    )
    return snooze


def set_substitution(
    *, user: Any, substitute_username: str, starts_at: datetime, ends_at: datetime
) -> Substitution:
    """While away, new tasks for `user` go to the substitute, visibly."""
    substitute = _user_named(substitute_username)
    if substitute.pk == user.pk:
        raise InvalidRequest("Choose someone else as your substitute.")
    if ends_at <= starts_at:
        raise InvalidRequest("The substitution must end after it starts.")
    return Substitution.objects.create(
        user=user, substitute=substitute, starts_at=starts_at, ends_at=ends_at
    )


def substitute_for(user: Any, now: datetime) -> Any | None:
    line = (
        Substitution.objects.filter(user=user, starts_at__lte=now, ends_at__gt=now)
        .select_related("substitute")
        .order_by("-starts_at")
        .first()
    )
    return line.substitute if line else None


# ---------------------------------------------------------------------------
# Bulk and email decisions
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkResult:
    task_id: UUID
    error: str = ""


def bulk_approve(
    *,
    selection: list[tuple[UUID, int | None]],
    user: Any,
    channel: str,
    now: datetime | None = None,
    **extra: Any,
) -> list[BulkResult]:
    """Approve each (task id, version seen) on its own: one decision, one audit entry,
    one transaction each; a task that changed since it was seen is refused as stale."""
    results = []
    for task_id, version in selection:
        try:
            approve_human_task(
                task_id=task_id,
                user=user,
                channel=channel,
                now=now,
                expected_version=version,
                **extra,
            )
        except TaskError as error:
            results.append(BulkResult(task_id=task_id, error=str(error)))
        else:
            results.append(BulkResult(task_id=task_id))
    return results


def decide_by_link(
    *,
    token: str,
    user: Any,
    outcome: str,
    comment: str = "",
    values: Mapping[str, Any] | None = None,
    remote_addr: str | None = None,
    now: datetime | None = None,
) -> HumanTask:
    """Decide through an emailed link: its recipient, signed in, once, on the version sent.

    Approving fills in the approval's form with `values`, as on the task's page; values
    that do not fit refuse the decision and leave the link unused.
    """
    now = now or timezone.now()
    with transaction.atomic():
        link = links.resolve(token, now=now, lock=True)
        links.check_recipient(link, user)
        link.used_at = now
        link.save(update_fields=["used_at"])
        metrics.email_link_used()
        extra = {"expected_version": link.task_version, "remote_addr": remote_addr, "now": now}
        if outcome == Outcome.APPROVED:
            return approve_human_task(
                task_id=link.task_id,
                user=user,
                channel=Channel.EMAIL,
                comment=comment,
                values=values,
                **extra,
            )
        if outcome == Outcome.REJECTED:
            return reject_human_task(
                task_id=link.task_id, user=user, channel=Channel.EMAIL, reason=comment, **extra
            )
        raise InvalidRequest("Choose approve or reject.")


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
    if node.required > 1:
        shares = [([user], []) for user in users] + [([], [group]) for group in groups]
    else:
        shares = [(users, groups)]
    task_duties = duties.duties_for(run, node.name)
    calendars = due_times.load_calendars(durations=due_times.approval_durations(node))
    return [
        _open_task(run, step, node, data, share_users, share_groups, now, task_duties, calendars)
        for share_users, share_groups in shares
    ]


def _open_task(run, step, node, data, users, groups, now, task_duties, calendars) -> HumanTask:
    assignee = substitute = None
    if len(users) == 1 and not groups:
        assignee = users[0]
        stand_in = substitute_for(assignee, now)
        # A stand-in who may not decide this task (say, the requester) is passed over.
        if stand_in is not None and _may_decide(stand_in, task_duties):
            assignee, substitute = stand_in, assignee
    due_at = escalation.deadline_at(node=node, created_at=now, calendars=calendars)
    task = HumanTask(
        run=run,
        step=step,
        node=node.name,
        workflow_type=run.workflow_type,
        title=" ".join(node.title_for(data).split())[:200],
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
    task.candidate_users.set(users if assignee is None else [assignee])
    task.candidate_groups.set(groups)
    inbox_entries.refresh(task)
    notifications.task_opened(task=task, requesters=task_duties.requesters, now=now)
    audit.record(
        task=task,
        event="created",
        actor=audit.system_actor(),
        channel=Channel.SYSTEM,
        now=now,
        changes={"assignee": [None, assignee.get_username() if assignee else None]},
    )
    return task


def close_tasks_for_step(run: WorkflowRun, step: StepRun, node: Approval) -> None:
    """Cancel the node's tasks still open: decided elsewhere, timed out, or run cancelled."""
    now = timezone.now()
    for task in HumanTask.objects.select_for_update().filter(step=step, state__in=LIVE_TASK_STATES):
        task.cancel(now=now)
        task.save()
        _trace_closed(task, run, "cancelled", now)
        inbox_entries.refresh(task)
        audit.record(
            task=task,
            event="cancelled",
            actor=audit.system_actor(),
            channel=Channel.SYSTEM,
            now=now,
        )


# ---------------------------------------------------------------------------
# Escalations and deadlines (fired by the engine's sweep)
# ---------------------------------------------------------------------------


def escalate_human_task(*, task_id: UUID, now: datetime) -> bool:
    """Escalate a task whose escalation time passed; return False if nothing was due."""
    with transaction.atomic():
        task = _lock(task_id)
        if not task.is_live or task.escalate_at is None or task.escalate_at > now:
            return False
        _escalate(task, _approval_node(task), now)
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
    allowed = [user for user in recipients.values() if _may_decide(user, task_duties)]
    emails.send_escalation(task=task, recipients=allowed, now=now)
    return True


def handle_deadline(*, task_id: UUID, now: datetime) -> bool:
    """Do what the node chose for a task past its final deadline; False if not due."""
    with transaction.atomic():
        task = _lock(task_id)
        if not task.is_live or task.due_at is None or task.due_at > now:
            return False
        node = _approval_node(task)
        system = _Request(user=audit.system_actor(), channel=Channel.SYSTEM, now=now)
        if node.on_deadline == "reject":
            task.complete(
                outcome=Outcome.REJECTED,
                by=system.user,
                channel=Channel.SYSTEM,
                comment="No decision by the deadline.",
                now=now,
            )
            task.save()
            _trace_closed(task, task.run, Outcome.REJECTED, now)
            inbox_entries.refresh(task)
            _audit(task, Outcome.REJECTED, system, comment="No decision by the deadline.")
            _settle_approval(task, now)
        elif node.on_deadline == "fail":
            task.expire(now=now)
            task.save()
            _trace_closed(task, task.run, "expired", now)
            inbox_entries.refresh(task)
            _audit(task, "expired", system)
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
                _audit(
                    task,
                    "deadline_extended",
                    system,
                    changes={"due_at": [previous.isoformat(), task.due_at.isoformat()]},
                )
    return True


def remind_human_task(*, task_id: UUID, now: datetime) -> bool:
    """Remind a task's holders that it is due soon; return False if nothing was due."""
    with transaction.atomic():
        task = _lock(task_id)
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
