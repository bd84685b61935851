"""Decide a human task: claim and release, approve, reject, request changes, in bulk, and
by an emailed link.

Each is one transaction that locks the run row and then the task row (the same
order the engine uses, so a decision and a timeout never deadlock), checks who
may act, transitions, audits and, when a decision settles the approval node,
signals the run. A replay is refused with a domain error, never a second effect.
Whatever changes a task's state, holders, candidates, priority or due time also
calls `inbox_entries.refresh(task)`, in the same transaction, so the inbox stays true.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from approvals import audit, duties, permissions, quorum, rework_rounds, task_forms
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.acting import (
    Act,
    act_of,
    audit_task,
    authorised,
    clean_comment,
    may_decide,
)
from approvals.human_tasks.errors import (
    InvalidForm,
    InvalidRequest,
    NotAllowed,
    TaskConflict,
    TaskError,
)
from approvals.models import (
    Attachment,
    Comment,
    HumanTask,
)
from approvals.notify import emails, links, notifications, webhooks
from approvals.states import Channel, Outcome, TaskKind
from workflows import engine, metrics, registry, tracing
from workflows.dsl import Approval, Workflow
from workflows.dsl import InvalidForm as InvalidFormValues
from workflows.models import WorkflowRun

User = get_user_model()


# ---------------------------------------------------------------------------
# Claim and release
# ---------------------------------------------------------------------------


def claim_human_task(
    *, task_id: UUID, user: Any, channel: str, now: datetime | None = None, **extra: Any
) -> HumanTask:
    """Take an open task so that only you work on it."""
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        task = authorised(
            task_id,
            request,
            permissions.can_claim,
            "Only a candidate can claim this task.",
            action="claim",
        )
        task.claim(user=user, now=request.now)
        task.save()
        inbox_entries.refresh(task)
        audit_task(task, "claimed", request, changes={"assignee": [None, user.get_username()]})
    return task


def release_human_task(
    *, task_id: UUID, user: Any, channel: str, now: datetime | None = None, **extra: Any
) -> HumanTask:
    """Give a claimed group task back to its candidates."""
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        task = authorised(
            task_id,
            request,
            permissions.can_release,
            "Only the reviewer who claimed this task can release it.",
        )
        previous = task.assignee.get_username()
        task.release()
        task.save()
        inbox_entries.refresh(task)
        audit_task(task, "released", request, changes={"assignee": [previous, None]})
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
    request = act_of(user, channel, now, **extra)
    comment = clean_comment(comment)
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
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        return _decide(
            task_id, request, Outcome.REJECTED, clean_comment(reason, label=_("The reason"))
        )


def request_changes(
    *,
    task_id: UUID,
    user: Any,
    channel: str,
    reason: str,
    now: datetime | None = None,
    **extra: Any,
) -> HumanTask:
    """Send the request back to its requester instead of deciding it: the reason is
    required (it is what they read), and the approval must allow it
    (`Approval.on_changes_requested`) with rounds left in its loop. Once they
    resubmit, the same approval asks the same reviewers again."""
    request = act_of(user, channel, now, **extra)
    with transaction.atomic():
        return _decide(
            task_id,
            request,
            Outcome.CHANGES_REQUESTED,
            clean_comment(reason, label=_("The reason")),
        )


def _decide(
    task_id: UUID,
    request: Act,
    outcome: Outcome,
    comment: str,
    values: Mapping[str, Any] | None = None,
) -> HumanTask:
    task = authorised(
        task_id,
        request,
        permissions.can_decide,
        _("You are not a reviewer of this task."),
        action="decide",
    )
    if task.kind == TaskKind.ENTRY:
        raise NotAllowed(
            _(
                "This task asks for its form to be filled in and completed; it is not approved,"
                " rejected or sent back."
            )
        )
    if outcome == Outcome.REJECTED and not comment:
        raise InvalidRequest(_("Say why you reject it: a reason is required."))
    if outcome == Outcome.CHANGES_REQUESTED:
        refusal = rework_rounds.why_no_changes(
            run=task.run, definition=_definition(task), node=approval_node_of(task)
        )
        if refusal:
            raise NotAllowed(refusal)
        if not comment:
            raise InvalidRequest(
                _("Say what should change: a reason is required, and the requester reads it.")
            )
    _refuse_second_share(task, request.user)
    # Only an approval fills in the form: a rejection or a request for changes needs
    # its reason, nothing more.
    form_values = validated_form_values(task, values) if outcome == Outcome.APPROVED else {}
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
    trace_closed(task, task.run, outcome, request.now)
    inbox_entries.refresh(task)
    if comment:
        Comment.objects.create(task=task, author=request.user, body=comment, created_at=request.now)
    changes: dict[str, Any] = {"state": ["live", outcome]}
    if form_values:
        changes["form_values"] = [{}, form_values]
    audit_task(task, outcome, request, comment=comment, changes=changes)
    notifications.request_decided(task=task, now=request.now)
    webhooks.task_decided(task=task, now=request.now)
    if task.owner_id is not None:
        emails.send_delegation_done(task=task)
    settle_approval(task, request.now)
    return task


def validated_form_values(task: HumanTask, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the approval's form values as its form reads them; refuse, naming each
    field, values that do not fit (nothing is decided then: the caller's transaction
    rolls back)."""
    node = approval_node_of(task)
    try:
        cleaned = node.validate_form(dict(values or {}))
    except InvalidFormValues as invalid:
        raise InvalidForm(node, invalid.errors) from None
    if node.form is not None:
        named = {
            name: cleaned[name]
            for name in task_forms.attachment_fields(node.form)
            if cleaned.get(name) is not None
        }
        attached = {
            str(pk)
            for pk in Attachment.objects.filter(
                run_id=task.run_id, pk__in=list(named.values())
            ).values_list("pk", flat=True)
        }
        strays = [
            {"field": name, "message": "is not a file attached to this request"}
            for name, value in named.items()
            if str(value) not in attached
        ]
        if strays:
            raise InvalidForm(node, strays)
    return cleaned


def trace_closed(task: HumanTask, run: WorkflowRun, outcome: str, now: datetime) -> None:
    tracing.human_task_closed(
        run=run,
        node=task.node,
        task_id=task.pk,
        opened_at=task.created_at,
        closed_at=now,
        outcome=outcome,
    )


def settle_approval(task: HumanTask, now: datetime) -> None:
    """Signal the run once the node's tasks reach a decision: N approvals, or too many
    rejections for N to be reachable, or too few shares left that anyone may decide
    (approvals.quorum). The engine then closes the remaining tasks.

    The signal's payload becomes the approval step's result, so later steps and
    conditions read each decision's form values there: `decisions[i]["values"]`,
    and, for an approval one person decides, `values` (RunData.form_values).
    """
    node = approval_node_of(task)
    siblings = list(
        HumanTask.objects.filter(step_id=task.step_id)
        .select_related("assignee")
        .prefetch_related("candidate_users", "candidate_groups")
    )
    outcomes = [sibling.outcome for sibling in siblings]
    live = [sibling for sibling in siblings if sibling.is_live]
    shares = quorum.Shares(
        approved=outcomes.count(Outcome.APPROVED),
        rejected=outcomes.count(Outcome.REJECTED),
        changes_requested=outcomes.count(Outcome.CHANGES_REQUESTED),
        open=len(live),
    )
    found = quorum.verdict(shares, required=node.required)
    barred: list[HumanTask] = []
    if found is None and live:
        barred = undecidable_shares(live, node=node)
        shares = replace(shares, open=len(live) - len(barred), undecidable=len(barred))
        found = quorum.verdict(shares, required=node.required)
    if found is None:
        return
    reason = ""
    if found is quorum.Verdict.UNREACHABLE:
        # Kept as written, in the site's language (not the language of whoever decided
        # last): it goes on the run's timeline, into the barred shares' audit trail and
        # into the step's result, records that are read as they were made.
        with translation.override(settings.LANGUAGE_CODE):
            reason = quorum.unreachable_reason(
                shares, required=node.required, barred=[holders_of(share) for share in barred]
            )
        _record_unreachable(task, barred, reason, now)
    signal = {
        quorum.Verdict.APPROVED: node.approved_signal,
        quorum.Verdict.REJECTED: node.rejected_signal,
        quorum.Verdict.UNREACHABLE: node.rejected_signal,
        quorum.Verdict.CHANGES_REQUESTED: node.changes_requested_signal,
    }[found]
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
    if reason:
        payload["reason"] = reason
    engine.signal_run(
        run_id=task.run_id,
        name=signal,
        signal_id=f"{engine.RESERVED_SIGNAL_ID_PREFIX}step-{task.step_id}",
        from_human_task=True,
        payload=payload,
        now=now,
    )


def undecidable_shares(live: list[HumanTask], *, node: Approval) -> list[HumanTask]:
    """Return the live shares that nobody may decide: every candidate (the holder, the
    candidate people, their groups' active members) is inactive, barred by separation
    of duties, or, where N of M must approve, already decided another share."""
    if not live:
        return []
    task_duties = duties.duties_of(live[0])
    step_id = live[0].step_id
    decided = (
        set(
            HumanTask.objects.filter(step_id=step_id)
            .exclude(decided_by=None)
            .values_list("decided_by_id", flat=True)
        )
        if node.required > 1
        else set()
    )
    undecidable = []
    for share in live:
        people = User.objects.filter(is_active=True).filter(
            Q(pk=share.assignee_id)
            | Q(pk__in=[user.pk for user in share.candidate_users.all()])
            | Q(groups__in=[group.pk for group in share.candidate_groups.all()])
        )
        if not any(
            person.pk not in decided and may_decide(person, task_duties)
            for person in people.distinct()
        ):
            undecidable.append(share)
    return undecidable


def holders_of(share: HumanTask) -> str:
    """Name who a share waits on: its holder, else its candidate people and groups."""
    if share.assignee is not None:
        return share.assignee.get_username()
    names = [user.get_username() for user in share.candidate_users.all()]
    names += [f"group {group.name}" for group in share.candidate_groups.all()]
    return " or ".join(names) or "nobody"


def _record_unreachable(
    task: HumanTask, barred: list[HumanTask], reason: str, now: datetime
) -> None:
    """Put why the approval is rejected on the run's timeline and in each barred share's
    audit trail (the engine then cancels them, as it does every share left open)."""
    engine.warn_run(run=task.run, step=task.step, message=reason, now=now)
    system = audit.system_actor()
    for share in barred:
        audit.record(
            task=share,
            event="quorum_unreachable",
            actor=system,
            channel=Channel.SYSTEM,
            now=now,
            comment=reason,
        )


def _refuse_second_share(task: HumanTask, user: Any) -> None:
    """N of M means N people: nobody decides two shares of one approval."""
    if approval_node_of(task).required <= 1:
        return
    already = HumanTask.objects.filter(step_id=task.step_id, decided_by=user).exclude(pk=task.pk)
    if already.exists():
        raise TaskConflict(
            _(
                "You already decided another share of this approval;"
                " someone else must decide this one."
            )
        )


def _definition(task: HumanTask) -> Workflow:
    return registry.get(task.run.workflow_type, task.run.workflow_version)


def approval_node_of(task: HumanTask) -> Approval:
    node = _definition(task).node(task.node)
    assert isinstance(node, Approval)
    return node


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
        if outcome == Outcome.CHANGES_REQUESTED:
            return request_changes(
                task_id=link.task_id, user=user, channel=Channel.EMAIL, reason=comment, **extra
            )
        raise InvalidRequest(_("Choose approve, reject or request changes."))
