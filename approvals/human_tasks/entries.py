"""Data-entry tasks (`dsl.UserTask`): keep a draft while the form is typed, then complete it.

A data-entry task is opened like an approval's (`lifecycle.open_tasks_for_step`, kind
"entry"), and claimed, delegated and reassigned like one; the same separation of
duties applies, so nobody completes a task of a run they requested. It is never
approved or rejected: whoever may decide it fills in the node's form and completes
it. Completing validates the values with the form (each problem named by field;
nothing changes then, the draft included), keeps them on the task and in the audit,
and signals the run with them, where later steps read `RunData.form_values(node)`.

Drafts: the task page posts the form as it is typed (debounced) and the API may PUT
it; the values so far are kept on the task (`HumanTask.draft`) unvalidated, so a
reload, or the same person on another device, finds them. A draft save changes no
state and does not bump the task's version (an open page's completion stays
current). It is audited lightly: the first save by each person records
"draft_started", without the values; later saves only move `draft_saved_at`. A
keystroke-by-keystroke audit would fill the append-only, hash-chained log with
hundreds of entries a task and copy half-typed bank details into it for ever; the
values that count are audited once, on completion.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals import permissions
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.acting import Act, act_of, audit_task, authorised, clean_comment
from approvals.human_tasks.decide import trace_closed, validated_form_values
from approvals.human_tasks.errors import InvalidRequest, NotAllowed
from approvals.models import Comment, HumanTask
from approvals.notify import emails, notifications, webhooks
from approvals.states import Outcome, TaskKind
from workflows import engine, metrics, personal, registry
from workflows.cleaning import Refused, refuse_unstorable
from workflows.dsl import UserTask

# A draft is what one form holds while it is typed: far below this, as JSON.
DRAFT_MAX_BYTES = 32 * 1024
NOT_YOURS = gettext_lazy(
    "Only whoever holds this task (or, while it is open, a candidate) may fill it in."
)


def complete_user_task(
    *,
    task_id: UUID,
    user: Any,
    channel: str,
    values: Mapping[str, Any] | None,
    comment: str = "",
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Complete a data-entry task with its form's `values`, which must fit the form: they
    are kept on the task, audited and passed into the run's data. Values that do not fit
    raise InvalidForm naming each field, and change nothing (the draft stays)."""
    request = act_of(user, channel, now, **extra)
    comment = clean_comment(comment)
    with transaction.atomic():
        task, node = _entry(task_id, request, str(NOT_YOURS))
        form_values = validated_form_values(task, values)
        task.complete(
            outcome=Outcome.COMPLETED,
            by=request.user,
            channel=request.channel,
            comment=comment,
            now=request.now,
            form_values=form_values,
        )
        task.draft = {}
        task.save()
        metrics.human_task_decided(
            workflow_type=task.workflow_type,
            node=task.node,
            outcome=Outcome.COMPLETED,
            opened_at=task.created_at,
            decided_at=request.now,
        )
        trace_closed(task, task.run, Outcome.COMPLETED, request.now)
        inbox_entries.refresh(task)
        if comment:
            Comment.objects.create(
                task=task, author=request.user, body=comment, created_at=request.now
            )
        audit_task(
            task,
            Outcome.COMPLETED,
            request,
            comment=comment,
            changes={"state": ["live", Outcome.COMPLETED], "form_values": [{}, form_values]},
        )
        notifications.request_decided(task=task, now=request.now)
        webhooks.task_decided(task=task, now=request.now)
        if task.owner_id is not None:
            emails.send_delegation_done(task=task)
        by = request.user.get_username()
        engine.signal_run(
            run_id=task.run_id,
            name=node.completed_signal,
            signal_id=f"{engine.RESERVED_SIGNAL_ID_PREFIX}step-{task.step_id}",
            from_human_task=True,
            payload={
                "outcome": Outcome.COMPLETED.value,
                "values": form_values,
                "by": by,
                "comment": comment,
                # The shape of an approval's payload, so readers of decisions need no case.
                "decisions": [
                    {
                        "task": str(task.pk),
                        "outcome": Outcome.COMPLETED.value,
                        "by": by,
                        "comment": comment,
                        "values": form_values,
                    }
                ],
            },
            now=request.now,
        )
    return task


def save_draft(
    *,
    task_id: UUID,
    user: Any,
    channel: str,
    values: Mapping[str, Any],
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Keep `values` (the form's fields so far, not yet valid) as the task's draft.

    Only who may complete the task may; a field the form does not have, or a draft past
    DRAFT_MAX_BYTES, is refused. The task's state and version do not change.
    """
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        task, node = _entry(task_id, request, str(NOT_YOURS))
        draft = _clean_draft(node, values)
        first = task.draft_saved_by_id != request.user.pk
        task.draft = draft
        task.draft_saved_at = request.now
        task.draft_saved_by = request.user
        task.save(update_fields=["draft", "draft_saved_at", "draft_saved_by"])
        if first:
            audit_task(task, "draft_started", request)
    return task


def _entry(task_id: UUID, request: Act, refusal: str) -> tuple[HumanTask, UserTask]:
    """Lock the task (run first) and check who acts; refuse a task that is not data entry."""
    task = authorised(task_id, request, permissions.can_decide, refusal, action="complete")
    if task.kind != TaskKind.ENTRY:
        raise NotAllowed(
            _("This task is decided (approved or rejected), not filled in and completed.")
        )
    node = registry.get(task.run.workflow_type, task.run.workflow_version).node(task.node)
    assert isinstance(node, UserTask)
    return task, node


def _clean_draft(node: UserTask, values: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(values, Mapping):
        raise InvalidRequest(_("A draft is the form's fields and their values, as an object."))
    assert node.form is not None
    fields = node.form.model_fields
    unknown = sorted(str(name) for name in values if name not in fields)
    if unknown:
        raise InvalidRequest(
            _("The form of %(form)s has no field %(unknown)s: its fields are %(fields)s.")
            % {
                "form": repr(node.name),
                "unknown": ", ".join(map(repr, unknown)),
                "fields": ", ".join(fields),
            }
        )
    draft = {name: value for name, value in values.items() if value not in (None, "")}
    try:
        refuse_unstorable(draft)
    except Refused as error:
        raise InvalidRequest(_("The draft cannot be kept: %(error)s.") % {"error": error}) from None
    size = len(json.dumps(draft, default=str))
    if size > DRAFT_MAX_BYTES:
        raise InvalidRequest(
            _("The draft is %(size)d bytes; a form's draft may hold at most %(most)d.")
            % {"size": size, "most": DRAFT_MAX_BYTES}
        )
    # Half-typed personal values are personal too: sealed at rest as the completed
    # form's are, erased and re-keyed with them (approvals.privacy).
    return personal.seal_fields(draft, node.personal_form)
