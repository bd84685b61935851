"""The requester's side of a request sent back for changes: the revision task.

When a reviewer asks for changes (`decide.request_changes`), the run enters a
`Revise` node and this module opens one human task of kind "revision" for the
run's requesters: "Changes requested by Carol Carter: …". Answering it turns the
rule of every other task around: only the requesters (or an operator acting for
them, audited as such) may, and reviewers may not. Resubmitting validates the
new input with the type's own schema (`Workflow.validate_input`, as the API
does), records what changed, field by field, on the task and in the audit, and
signals the run, which takes the new input and goes back to the approval.
Withdrawing is `approvals.requests.services.withdraw_request`, as for any live request.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals import audit, permissions, request_pages
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.errors import (
    AlreadyDecided,
    InvalidRequest,
    NotAllowed,
    StaleTask,
    TaskClosed,
    TaskNotFound,
)
from approvals.human_tasks.lifecycle import stored_title
from approvals.models import COMMENT_MAX_LENGTH, Comment, HumanTask
from approvals.notify import notifications
from approvals.states import LIVE_TASK_STATES, Channel, Outcome, Priority, TaskKind, TaskState
from workflows import engine, registry, starting
from workflows.cleaning import Refused, clean_text
from workflows.dsl import InvalidInput, Revise, RunData, Workflow
from workflows.models import StepRun, WorkflowRun

User = get_user_model()


class InvalidResubmission(InvalidRequest):
    """The changed request does not fit the type's schema; `errors` names each field
    ({"field", "message"}, as `InvalidInput` does) so the form shows each beside its box."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        problems = "; ".join(f"{error['field']}: {error['message']}" for error in errors)
        super().__init__(f"The request was not resubmitted: {problems}. Nothing changed.")


# ---------------------------------------------------------------------------
# Opening the task (the engine's hook for Revise nodes)
# ---------------------------------------------------------------------------


def open_revision_task(run: WorkflowRun, step: StepRun, node: Revise) -> HumanTask:
    """Give the request back to its requesters, saying who asked for what changes."""
    now = step.scheduled_at
    asked = changes_request_of(run)
    definition = registry.get(run.workflow_type, run.workflow_version)
    users = list(User.objects.filter(username__in=requesters(run, definition), is_active=True))
    assignee = users[0] if len(users) == 1 else None
    task = HumanTask(
        run=run,
        step=step,
        node=node.name,
        kind=TaskKind.REVISION,
        workflow_type=run.workflow_type,
        title=stored_title(lambda: _title(node, run, asked)),
        state=TaskState.CLAIMED if assignee else TaskState.OPEN,
        priority=Priority.NORMAL,
        assignee=assignee,
        created_at=now,
        claimed_at=now if assignee else None,
    )
    task.save()
    task.candidate_users.set(users)
    inbox_entries.refresh(task)
    notifications.changes_requested(task=task, requesters=users, url=revise_url(run), now=now)
    audit.record(
        task=task,
        event="created",
        actor=audit.system_actor(),
        channel=Channel.SYSTEM,
        now=now,
        comment=asked.comment if asked else "",
        changes={"assignee": [None, assignee.get_username() if assignee else None]},
    )
    return task


def _title(node: Revise, run: WorkflowRun, asked: HumanTask | None) -> str:
    if callable(node.title):
        return node.title(RunData(input=run.input, results=run.results))
    if node.title:
        return node.title
    if asked is None:
        return _("Changes requested")
    who = asked.decided_by.get_full_name() or asked.decided_by.get_username()
    return _("Changes requested by %(who)s: %(comment)s") % {"who": who, "comment": asked.comment}


def changes_request_of(run: WorkflowRun) -> HumanTask | None:
    """The reviewer's latest request for changes on `run` (what its revision answers)."""
    return (
        HumanTask.objects.filter(run=run, outcome=Outcome.CHANGES_REQUESTED)
        .select_related("decided_by")
        .order_by("-decided_at", "-created_at")
        .first()
    )


def revise_url(run: WorkflowRun) -> str:
    return reverse("requests:revise", args=[run.pk])


# ---------------------------------------------------------------------------
# Reading it
# ---------------------------------------------------------------------------


def requesters(run: WorkflowRun, definition: Workflow) -> frozenset[str]:
    started_by = run.started_by.get_username() if run.started_by_id else None
    return permissions.run_requesters(
        workflow=definition, run_input=run.input, started_by=started_by
    )


def open_revision(run: WorkflowRun) -> HumanTask | None:
    """The run's revision task still waiting for its requesters, if any."""
    return (
        HumanTask.objects.filter(run=run, kind=TaskKind.REVISION, state__in=LIVE_TASK_STATES)
        .order_by("-created_at")
        .first()
    )


def why_not_answer(*, run: WorkflowRun, user: Any) -> str:
    """Return why `user` may not change and resubmit `run`'s request, or "" if they may:
    its requesters may, and operators for them; nobody else, reviewers included."""
    definition = registry.get(run.workflow_type, run.workflow_version)
    asked_by = requesters(run, definition)
    if user.get_username() in asked_by or request_pages.is_request_operator(user):
        return ""
    who = _(" or ").join(sorted(asked_by)) or _("whoever asked for it")
    return _(
        "Only %(who)s, who asked for this %(type)s, may change and resubmit it (or an"
        " operator acting for them); reviewers ask for changes, they do not make them."
    ) % {"who": who, "type": starting.kind_of(definition)}


def changes_between(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Return each field whose value differs, as [old, new] (None where one is missing)."""
    return {
        name: [old.get(name), new.get(name)]
        for name in sorted({*old, *new})
        if old.get(name) != new.get(name)
    }


# ---------------------------------------------------------------------------
# Answering it
# ---------------------------------------------------------------------------


def resubmit_request(
    *,
    task_id: UUID,
    user: Any,
    input: Mapping[str, Any],
    channel: str,
    comment: str = "",
    remote_addr: str | None = None,
    expected_version: int | None = None,
    now: datetime | None = None,
) -> HumanTask:
    """Answer a revision task with the request's changed input: validate it with the
    type's schema, record what changed on the task and in the audit, and send the run
    back to the approval that asked. Input that does not fit changes nothing.

    The field naming whom the request is for (`Workflow.requester_field`) keeps its
    value: a request for someone else is a new request.
    """
    now = now or timezone.now()
    comment = _comment(comment)
    with transaction.atomic():
        task, run = _lock(task_id, user)
        refusal = why_not_answer(run=run, user=user)
        if refusal:
            raise NotAllowed(refusal)
        if task.state == TaskState.COMPLETED:
            raise AlreadyDecided(task)
        if not task.is_live:
            raise TaskClosed(task)
        if expected_version is not None and expected_version != task.version:
            raise StaleTask(task)
        definition = registry.get(run.workflow_type, run.workflow_version)
        node = definition.node(task.node)
        assert isinstance(node, Revise)
        new = _validated(definition, run.input, input)
        previous = run.input
        changes = changes_between(previous, new)
        task.complete(
            outcome=Outcome.RESUBMITTED, by=user, channel=channel, comment=comment, now=now
        )
        task.changes = changes
        task.save()
        inbox_entries.refresh(task)
        if comment:
            Comment.objects.create(task=task, author=user, body=comment, created_at=now)
        asked_by = requesters(run, definition)
        if user.get_username() not in asked_by:  # an operator, acting for them
            comment_for = f"for {' and '.join(sorted(asked_by))}"
            comment_for += f": {comment}" if comment else ""
        else:
            comment_for = comment
        audit.record(
            task=task,
            event=Outcome.RESUBMITTED,
            actor=user,
            channel=channel,
            now=now,
            comment=comment_for,
            remote_addr=remote_addr,
            changes=changes,
        )
        engine.signal_run(
            run_id=run.pk,
            name=node.resubmitted_signal,
            signal_id=f"{engine.RESERVED_SIGNAL_ID_PREFIX}step-{task.step_id}",
            from_human_task=True,
            payload={
                "input": new,
                "previous": previous,
                "changes": changes,
                "by": user.get_username(),
                "comment": comment,
            },
            now=now,
        )
    return task


def _lock(task_id: UUID, user: Any) -> tuple[HumanTask, WorkflowRun]:
    """Lock the task's run, then the task (the engine's lock order); a task of a request
    `user` may not see is not found."""
    run_id = (
        HumanTask.objects.filter(pk=task_id, kind=TaskKind.REVISION)
        .values_list("run_id", flat=True)
        .first()
    )
    if run_id is None:
        raise TaskNotFound()
    try:
        request_pages.visible_request(run_id=run_id, user=user)
    except request_pages.RequestNotFound:
        raise TaskNotFound() from None
    run = (
        WorkflowRun.objects.select_for_update(of=("self",))
        .select_related("started_by")
        .get(pk=run_id)
    )
    task = HumanTask.objects.select_for_update(of=("self",)).get(pk=task_id)
    return task, run


def _validated(
    definition: Workflow, current: Mapping[str, Any], posted: Mapping[str, Any]
) -> dict[str, Any]:
    data = dict(posted)
    field = definition.requester_field
    if field:
        if data.get(field) not in (None, "", current.get(field)):
            raise InvalidResubmission(
                [
                    {
                        "field": field,
                        "message": f"stays {current.get(field)}: a request for someone else "
                        "is a new request (withdraw this one and start another)",
                    }
                ]
            )
        data[field] = current.get(field)
    try:
        return definition.validate_input(data, previous=current)
    except InvalidInput as invalid:
        raise InvalidResubmission(invalid.errors) from None


def _comment(value: str) -> str:
    try:
        return clean_text(value.strip(), max_length=COMMENT_MAX_LENGTH, multiline=True)
    except Refused as error:
        raise InvalidRequest(_("The note %(error)s.") % {"error": error}) from None
