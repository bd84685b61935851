"""REST API v1 for human tasks: the caller's inbox, and the same actions as the inbox page.

Every action calls the same use case as the inbox with channel "api", so the
rules, the audit entries and the errors are the same; a decision on a task
already decided answers 409 naming who decided and when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from ninja import Field, Query, Router, Schema, Status

from approvals import human_tasks, run_data_filters, task_forms
from approvals.escalation import sla
from approvals.human_tasks import revisions
from approvals.inbox import decided, selectors
from approvals.models import COMMENT_MAX_LENGTH, Comment, HumanTask
from approvals.states import Channel, Outcome, Priority, Sla
from workflows import personal
from workflows.api import ERRORS, ApiIn, ApiProblem, IsoDateTime, not_found
from workflows.client_address import client_address

router = Router(tags=["tasks"])


class TaskOut(Schema):
    id: UUID
    run_id: UUID
    workflow_type: str
    node: str
    title: str
    state: str
    outcome: str
    priority: int
    sla: str
    assignee: str | None
    owner: str | None
    substitute_for: str | None
    due_at: datetime | None
    escalation_level: int
    version: int = Field(description="send it back to refuse acting on a stale view")
    decided_by: str | None
    decided_at: datetime | None
    channel: str
    comment: str
    form_schema: dict[str, Any] | None = Field(
        description="the JSON Schema of the values approving takes (`form` of a decision), "
        "or null when its approval has no form"
    )
    form_values: dict[str, Any] = Field(description="what the decider entered in the form")
    kind: str = Field(
        description="`approval` (a reviewer decides: POST /tasks/{id}/decision), `revision` "
        "(the requester changes and resubmits the request: POST /tasks/{id}/resubmit) or "
        "`entry` (someone fills in `form_schema` and completes it: POST /tasks/{id}/complete, "
        "keeping a draft meanwhile with PUT /tasks/{id}/draft)"
    )
    draft: dict[str, Any] = Field(
        default_factory=dict,
        description="an `entry` task's form as last saved, not yet valid (empty once completed)",
    )
    draft_saved_at: datetime | None = Field(None, description="when the draft was last saved")
    changes: dict[str, Any] = Field(
        description="for a resubmitted revision, what changed in the input: {field: [old, new]}"
    )
    created_at: datetime
    run_state: str | None = Field(
        None,
        description="the state of the task's run now (`tab=decided` only): what became of "
        "the request after the decision",
    )


class TaskPageOut(Schema):
    items: list[TaskOut]
    next_cursor: str | None


class VersionIn(ApiIn):
    version: int | None = Field(None, ge=1)


class DecisionIn(VersionIn):
    outcome: Literal["approve", "reject", "request_changes"] = Field(
        description="`request_changes` sends the request back to its requester (where the "
        "approval allows it); they change and resubmit it, and it comes back to this approval"
    )
    comment: str = Field(
        "",
        max_length=COMMENT_MAX_LENGTH,
        description="required to reject or to request changes (the requester reads it)",
    )
    form: dict[str, Any] | None = Field(
        None,
        description="to approve a task whose approval has a form: its values, as the task's "
        "`form_schema` says; a rejection "
        "takes none",
    )


class CompleteIn(VersionIn):
    form: dict[str, Any] = Field(
        description="the values of the task's form, as its `form_schema` says; all of them, "
        "validated: a value that does not fit answers 422 naming it, and nothing is completed"
    )
    comment: str = Field("", max_length=COMMENT_MAX_LENGTH, description="an optional note")


class DraftIn(ApiIn):
    form: dict[str, Any] = Field(
        description="the form's fields filled in so far, by name; not validated (only field "
        "names the form has, at most 32 kB): it replaces the draft kept before"
    )


class DraftOut(Schema):
    task_id: UUID
    draft: dict[str, Any]
    draft_saved_at: datetime


class ResubmitIn(VersionIn):
    input: dict[str, Any] = Field(
        description="the request's input as its type's start schema says, changed where "
        "the reviewer asked; the field naming whom it is for keeps its value"
    )
    comment: str = Field("", max_length=COMMENT_MAX_LENGTH, description="a note to the reviewer")


class HandOverIn(VersionIn):
    to: str = Field(min_length=1, max_length=150, description="a username")
    comment: str = Field("", max_length=COMMENT_MAX_LENGTH)


class CommentIn(ApiIn):
    body: str = Field(min_length=1, max_length=COMMENT_MAX_LENGTH)


class CommentOut(Schema):
    id: int
    author: str
    body: str
    created_at: datetime


class SnoozeIn(ApiIn):
    until: IsoDateTime = Field(
        description="when the task comes back into your lists (ISO 8601; UTC if no offset)"
    )


class SnoozeOut(Schema):
    task_id: UUID
    until: datetime


class SelectedTaskIn(ApiIn):
    id: UUID
    version: int | None = Field(None, ge=1, description="the version seen; a newer one is refused")


class BulkApproveIn(ApiIn):
    tasks: list[SelectedTaskIn] = Field(min_length=1, max_length=100)


class BulkResultOut(Schema):
    id: UUID
    approved: bool
    error: str = Field(description="why this one was not approved; empty when it was")


class BulkApproveOut(Schema):
    approved: int
    results: list[BulkResultOut]


class InboxQuery(ApiIn):
    tab: Literal["mine", "queue", "delegated", "decided"] = Field(
        "mine",
        description="`decided`: the tasks the caller decided, newest decision first, with "
        "each run's state now; it takes `type`, `outcome` and `q` (priority, SLA, run data "
        "and sort describe live work, and are refused with it)",
    )
    outcome: Outcome | None = Field(
        None, description="`tab=decided` only: the decisions with this outcome"
    )
    type: str | None = Field(None, max_length=100)
    priority: Priority | None = None
    sla: Sla | None = None
    q: str | None = Field(None, max_length=200)
    where: str | None = Field(
        None,
        max_length=200,
        description="conditions on the run's searchable input fields, comma-separated: "
        "`amount>1000,vendor_name=Acme` (=, >, >=, <, <=; comparisons take numbers)",
    )
    sort: Literal["due", "priority"] = "due"
    cursor: str | None = Field(None, max_length=500)


def _name(user: Any) -> str | None:
    return user.get_username() if user else None


def task_out(task: HumanTask) -> dict[str, Any]:
    node = task_forms.approval_of(task)
    form = node.form if node else None
    return {
        "id": task.pk,
        "run_id": task.run_id,
        "workflow_type": task.workflow_type,
        "node": task.node,
        "title": task.title,
        "state": task.state,
        "outcome": task.outcome,
        "priority": task.priority,
        "sla": sla(due_at=task.due_at, now=timezone.now()),
        "assignee": _name(task.assignee),
        "owner": _name(task.owner),
        "substitute_for": _name(task.substitute_for),
        "due_at": task.due_at,
        "escalation_level": task.escalation_level,
        "version": task.version,
        "decided_by": _name(task.decided_by),
        "decided_at": task.decided_at,
        "channel": task.channel,
        "comment": task.comment,
        "form_schema": task_forms.json_schema_of(form) if form else None,
        "form_values": personal.shown(task.form_values),
        "kind": task.kind,
        "changes": personal.shown(task.changes),
        "draft": personal.shown(task.draft),
        "draft_saved_at": task.draft_saved_at,
        "created_at": task.created_at,
    }


@router.get("", response={200: TaskPageOut, **ERRORS}, summary="The caller's inbox")
def list_tasks(request: HttpRequest, query: Query[InboxQuery]) -> dict[str, Any]:
    if query.tab == decided.TAB:
        return _decided_tasks(request, query)
    if query.outcome:
        raise ApiProblem(
            422,
            _("Invalid request"),
            _("`outcome` filters decisions made: use it with tab=decided."),
            errors=[{"field": "outcome", "message": _("applies to tab=decided only")}],
        )
    try:
        where = run_data_filters.parse(query.where or "", workflow_type=query.type or "")
    except run_data_filters.BadFilter as error:
        raise ApiProblem(
            422,
            _("Invalid request"),
            _("The run data filter cannot be read: %(error)s.") % {"error": error},
            errors=[{"field": "where", "message": str(error)}],
        ) from None
    filters = selectors.InboxFilters(
        tab=query.tab,
        workflow_type=query.type or "",
        priority=query.priority,
        sla=query.sla or "",
        search=query.q or "",
        sort=query.sort,
        cursor=query.cursor or "",
        where=where,
    )
    try:
        page = selectors.inbox(user=request.user, filters=filters, now=timezone.now())
    except selectors.BadCursor:
        raise ApiProblem(
            400, _("Bad cursor"), _("The cursor is not one this API gave out.")
        ) from None
    return {
        "items": [task_out(task) for task in selectors.loaded_tasks(page)],
        "next_cursor": page.next_cursor or None,
    }


def _decided_tasks(request: HttpRequest, query: InboxQuery) -> dict[str, Any]:
    refused = [
        name
        for name, given in (
            ("priority", query.priority is not None),
            ("sla", bool(query.sla)),
            ("where", bool(query.where)),
            ("sort", query.sort != "due"),
        )
        if given
    ]
    if refused:
        raise ApiProblem(
            422,
            _("Invalid request"),
            _(
                "tab=decided takes `type`, `outcome` and `q`; %(names)s describe live work and"
                " do not apply to decisions made."
            )
            % {"names": ", ".join(refused)},
            errors=[
                {"field": name, "message": _("does not apply to tab=decided")} for name in refused
            ],
        )
    filters = decided.DecidedFilters(
        workflow_type=query.type or "", outcome=query.outcome or "", search=query.q or ""
    )
    try:
        page = decided.decided_by(
            user=request.user,
            cursor=query.cursor or "",
            limit=decided.PAGE_SIZE,
            filters=filters,
        )
    except decided.BadCursor:
        raise ApiProblem(
            400, _("Bad cursor"), _("The cursor is not one this API gave out.")
        ) from None
    return {
        "items": [{**task_out(task), "run_state": task.run.state} for task in page.tasks],
        "next_cursor": page.next_cursor or None,
    }


def _visible(request: HttpRequest, task_id: UUID) -> HumanTask:
    try:
        return human_tasks.visible_task(task_id=task_id, user=request.user)
    except human_tasks.TaskNotFound:
        raise not_found(_("such task")) from None


@router.post(
    "/bulk-approve", response={200: BulkApproveOut, **ERRORS}, summary="Approve several tasks"
)
def bulk_approve(request: HttpRequest, body: BulkApproveIn) -> dict[str, Any]:
    """Approve each task on its own (one decision and audit entry each), as the inbox's
    "Approve selected" does: one refused (stale, decided, not yours, a form to fill in)
    leaves the others approved, and its result says why."""
    results = human_tasks.bulk_approve(
        selection=[(task.id, task.version) for task in body.tasks],
        user=request.user,
        channel=Channel.API,
        remote_addr=client_address(request),
    )
    return {
        "approved": sum(1 for result in results if not result.error),
        "results": [
            {"id": result.task_id, "approved": not result.error, "error": result.error}
            for result in results
        ],
    }


@router.get("/{task_id}", response={200: TaskOut, **ERRORS}, summary="Get a task")
def get_task(request: HttpRequest, task_id: UUID) -> dict[str, Any]:
    return task_out(_visible(request, task_id))


def _act(request: HttpRequest, task_id: UUID, version: int | None, action: Callable) -> dict:
    """Call one use case with the API's channel; map its refusals onto problems."""
    with refusals_as_problems():
        task = action(
            task_id=task_id,
            user=request.user,
            channel=Channel.API,
            expected_version=version,
            remote_addr=client_address(request),
        )
    return task_out(_visible(request, task.pk))


@contextmanager
def refusals_as_problems() -> Iterator[None]:
    """Answer a use case's refusal (a TaskError) as the problem its status says."""
    try:
        yield
    except human_tasks.TaskError as error:
        title = {
            404: _("Not found"),
            403: _("Forbidden"),
            409: _("Conflict"),
            422: _("Invalid request"),
        }
        extra: dict[str, Any] = {}
        if isinstance(error, human_tasks.AlreadyDecided):
            extra = {"state": error.task.outcome}
        if isinstance(error, human_tasks.InvalidForm | revisions.InvalidResubmission):
            where = "form" if isinstance(error, human_tasks.InvalidForm) else "input"
            # Named as the caller wrote them: inside the body's `form`.
            extra = {
                "errors": [
                    {**problem, "field": f"{where}.{problem['field']}"} for problem in error.errors
                ]
            }
        raise ApiProblem(
            error.status, title.get(error.status, _("Error")), str(error), **extra
        ) from None


@router.post("/{task_id}/claim", response={200: TaskOut, **ERRORS}, summary="Claim a task")
def claim_task(request: HttpRequest, task_id: UUID, body: VersionIn | None = None) -> dict:
    return _act(request, task_id, body.version if body else None, human_tasks.claim_human_task)


@router.post("/{task_id}/release", response={200: TaskOut, **ERRORS}, summary="Release a task")
def release_task(request: HttpRequest, task_id: UUID, body: VersionIn | None = None) -> dict:
    return _act(request, task_id, body.version if body else None, human_tasks.release_human_task)


@router.post("/{task_id}/decision", response={200: TaskOut, **ERRORS}, summary="Decide a task")
def decide_task(request: HttpRequest, task_id: UUID, body: DecisionIn) -> dict:
    if body.outcome == "approve":

        def action(**kwargs: Any) -> HumanTask:
            return human_tasks.approve_human_task(comment=body.comment, values=body.form, **kwargs)
    elif body.form:
        if body.outcome == "reject":
            detail = _(
                "A rejection takes no form values: the form is filled in to approve."
                " Say why in `comment`."
            )
        else:
            detail = _(
                "A request for changes takes no form values: the form is filled in to approve."
                " Say why in `comment`."
            )
        raise ApiProblem(
            422,
            _("Invalid request"),
            detail,
            errors=[{"field": "form", "message": _("must be empty or left out unless approving")}],
        )
    elif body.outcome == "request_changes":

        def action(**kwargs: Any) -> HumanTask:
            return human_tasks.request_changes(reason=body.comment, **kwargs)
    else:

        def action(**kwargs: Any) -> HumanTask:
            return human_tasks.reject_human_task(reason=body.comment, **kwargs)

    return _act(request, task_id, body.version, action)


@router.post(
    "/{task_id}/complete",
    response={200: TaskOut, **ERRORS},
    summary="Fill in and complete a data-entry task",
)
def complete_task(request: HttpRequest, task_id: UUID, body: CompleteIn) -> dict:
    """Complete a task of kind "entry" (a `UserTask` node) with its form's values: who may
    decide an approval may complete it (separation of duties applies), and its values
    reach the run's data. Approving or rejecting such a task is refused (403)."""

    def action(**kwargs: Any) -> HumanTask:
        return human_tasks.complete_user_task(values=body.form, comment=body.comment, **kwargs)

    return _act(request, task_id, body.version, action)


@router.put(
    "/{task_id}/draft",
    response={200: DraftOut, **ERRORS},
    summary="Keep a data-entry task's form as filled in so far",
)
def save_task_draft(request: HttpRequest, task_id: UUID, body: DraftIn) -> dict[str, Any]:
    """Replace the draft of a task of kind "entry": who may complete it may keep one. The
    task's state and version do not change."""
    with refusals_as_problems():
        task = human_tasks.save_draft(
            task_id=task_id,
            user=request.user,
            channel=Channel.API,
            values=body.form,
            remote_addr=client_address(request),
        )
    return {
        "task_id": task.pk,
        "draft": personal.shown(task.draft),
        "draft_saved_at": task.draft_saved_at,
    }


@router.post(
    "/{task_id}/resubmit",
    response={200: TaskOut, **ERRORS},
    summary="Change and resubmit a request sent back for changes",
)
def resubmit_task(request: HttpRequest, task_id: UUID, body: ResubmitIn) -> dict:
    """Answer a revision task (kind "revision"): only the request's requesters, or an
    operator for them, may; the input is validated as when the request was started."""

    def action(**kwargs: Any) -> HumanTask:
        return revisions.resubmit_request(input=body.input, comment=body.comment, **kwargs)

    return _act(request, task_id, body.version, action)


@router.post("/{task_id}/delegate", response={200: TaskOut, **ERRORS}, summary="Delegate a task")
def delegate_task(request: HttpRequest, task_id: UUID, body: HandOverIn) -> dict:
    def action(**kwargs: Any) -> HumanTask:
        return human_tasks.delegate_human_task(to_username=body.to, comment=body.comment, **kwargs)

    return _act(request, task_id, body.version, action)


@router.post("/{task_id}/reassign", response={200: TaskOut, **ERRORS}, summary="Reassign a task")
def reassign_task(request: HttpRequest, task_id: UUID, body: HandOverIn) -> dict:
    def action(**kwargs: Any) -> HumanTask:
        return human_tasks.reassign_human_task(to_username=body.to, comment=body.comment, **kwargs)

    return _act(request, task_id, body.version, action)


@router.get(
    "/{task_id}/comments", response={200: list[CommentOut], **ERRORS}, summary="A task's comments"
)
def list_comments(request: HttpRequest, task_id: UUID) -> list[dict[str, Any]]:
    task = _visible(request, task_id)
    return [comment_out(comment) for comment in task.comments.select_related("author")]


def comment_out(comment: Comment) -> dict[str, Any]:
    return {
        "id": comment.pk,
        "author": comment.author.get_username(),
        "body": comment.body,
        "created_at": comment.created_at,
    }


@router.post(
    "/{task_id}/comments", response={201: CommentOut, **ERRORS}, summary="Comment on a task"
)
def add_comment(request: HttpRequest, task_id: UUID, body: CommentIn) -> Status:
    with refusals_as_problems():
        comment = human_tasks.comment_on_human_task(
            task_id=task_id,
            user=request.user,
            body=body.body,
            channel=Channel.API,
            remote_addr=client_address(request),
        )
    return Status(201, comment_out(comment))


@router.post("/{task_id}/snooze", response={200: SnoozeOut, **ERRORS}, summary="Snooze a task")
def snooze_task(request: HttpRequest, task_id: UUID, body: SnoozeIn) -> dict[str, Any]:
    """Hide the task from your lists until `until`; it comes back by itself."""
    with refusals_as_problems():
        snooze = human_tasks.snooze_human_task(task_id=task_id, user=request.user, until=body.until)
    return {"task_id": task_id, "until": snooze.until}
