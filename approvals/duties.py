"""Separation of duties, read from the database and put in words.

The rules are pure, in `approvals.permissions`; this module gathers their facts
(who asked for a run, who decided its stages) for one task, or for a page of
tasks in a constant number of queries, and says in plain words why someone is
kept from a task.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import Case, OuterRef, QuerySet, When
from django.db.models.functions import JSONObject
from django.utils import formats, timezone
from django.utils.translation import gettext as _

from approvals.models import HumanTask
from approvals.permissions import Conflict, Duties, DutyConflict, StageDecision, run_requesters
from approvals.states import Channel, TaskKind, TaskState, outcome_words
from workflows import registry
from workflows.dsl import Workflow
from workflows.models import WorkflowRun


class TaskOnPage(Protocol):
    """What `duties_on_page` reads of each task of a page, and the refusals name, as plain
    values (approvals.inbox.selectors.PageTask)."""

    @property
    def pk(self) -> UUID: ...
    @property
    def workflow_type(self) -> str: ...
    @property
    def run_id(self) -> UUID: ...
    @property
    def node(self) -> str: ...
    @property
    def run_workflow_type(self) -> str: ...
    @property
    def workflow_version(self) -> int: ...
    @property
    def run_input(self) -> Any: ...
    @property
    def started_by(self) -> str: ...
    @property
    def viewer_decisions(self) -> Sequence[dict[str, Any]] | None: ...


def duties_for(run: WorkflowRun, node: str) -> Duties:
    """Return the duties of `node`'s tasks in `run` (the run's requesters, its decisions)."""
    definition = registry.get(run.workflow_type, run.workflow_version)
    decisions = _decisions([run.pk]) if definition.distinct_approvers else {}
    started_by = run.started_by.get_username() if run.started_by_id else None
    return _duties(
        definition,
        node=node,
        run_input=run.input,
        started_by=started_by,
        decisions=decisions.get(run.pk, ()),
    )


def duties_of(task: HumanTask) -> Duties:
    return duties_for(task.run, task.node)


def duties_on_page(tasks: Sequence[TaskOnPage]) -> dict[UUID, Duties]:
    """Return each task's duties: no query when the tasks carry the viewer's decisions
    (`page_annotations(viewer)`, as the inbox's page does on PostgreSQL; those duties then
    answer for that viewer only), else one however many tasks there are."""
    if not tasks:
        return {}
    definitions = {
        task.run_id: registry.get(task.run_workflow_type, task.workflow_version) for task in tasks
    }
    distinct = {run_id for run_id, workflow in definitions.items() if workflow.distinct_approvers}
    decisions: dict[UUID, tuple[StageDecision, ...]] = {}
    for task in tasks:
        if task.run_id in distinct and task.viewer_decisions is not None:
            decisions[task.run_id] = tuple(_decision(row) for row in task.viewer_decisions)
    if unread := distinct - decisions.keys():
        decisions.update(_decisions(unread))
    return {
        task.pk: _duties(
            definitions[task.run_id],
            node=task.node,
            run_input=task.run_input,
            started_by=task.started_by or None,
            decisions=decisions.get(task.run_id, ()),
        )
        for task in tasks
    }


def page_annotations(
    viewer: Any,
    *,
    separating: Sequence[str] | None = None,
    workflow_type: str = "run__workflow_type",
) -> dict[str, Any]:
    """What a page of tasks can carry so `duties_on_page` needs no query for `viewer`:
    the viewer's own decisions in each task's run, as JSON, read through the
    `task_decided_idx` index (PostgreSQL; elsewhere they are asked for separately).

    Only a run whose definition separates its approvers needs them: given the workflow
    types that may (`separating_types()`), other tasks carry NULL rather than a
    subquery's answer, which `duties_on_page` never reads for them. The rows annotated
    have a `run_id`, and `workflow_type` names their run's workflow type (the inbox's
    entries carry a copy)."""
    if connection.vendor != "postgresql":
        return {}
    mine = HumanTask.objects.filter(run_id=OuterRef("run_id"), decided_by=viewer)
    decided = _decided(mine).values(
        json=JSONObject(
            node="node", outcome="outcome", decided_by_id="decided_by_id", decided_at="decided_at"
        )
    )
    decisions: Any = ArraySubquery(decided)
    if separating is not None:
        decisions = Case(
            When(**{f"{workflow_type}__in": separating}, then=decisions),
            default=None,
            output_field=decisions.output_field,
        )
    return {"viewer_decisions": decisions}


def separating_types() -> tuple[str, ...]:
    """The workflow types of which some version separates its approvers (one person decides
    at most one stage of a run), in order."""
    return tuple(
        sorted(
            {
                workflow.name
                for workflow in registry.all_definitions()
                if workflow.distinct_approvers
            }
        )
    )


def requester_types() -> tuple[str, ...]:
    """The workflow types of which some version names a requester in the run's input
    (`requester_field`), in order: only their runs' input says who asked for a run."""
    return tuple(
        sorted(
            {workflow.name for workflow in registry.all_definitions() if workflow.requester_field}
        )
    )


def _decision(row: dict[str, Any]) -> StageDecision:
    return StageDecision(
        node=row["node"],
        outcome=row["outcome"],
        decided_by_id=row["decided_by_id"],
        decided_at=datetime.fromisoformat(row["decided_at"]),
    )


def _duties(
    definition: Workflow,
    *,
    node: str,
    run_input: Any,
    started_by: str | None,
    decisions: tuple[StageDecision, ...],
) -> Duties:
    return Duties(
        node=node,
        requesters=run_requesters(workflow=definition, run_input=run_input, started_by=started_by),
        distinct_approvers=definition.distinct_approvers,
        decisions=decisions,
    )


def _decided(tasks: QuerySet[HumanTask]) -> QuerySet[HumanTask]:
    """People's decisions among `tasks` (a deadline's automatic rejection is nobody's,
    and a requester's resubmission is no approval stage)."""
    return (
        tasks.filter(state=TaskState.COMPLETED, kind=TaskKind.APPROVAL)
        .exclude(channel=Channel.SYSTEM)
        .order_by("decided_at", "id")
    )


def _decisions(run_ids: Iterable[UUID]) -> dict[UUID, tuple[StageDecision, ...]]:
    rows = _decided(HumanTask.objects.filter(run_id__in=list(run_ids))).values_list(
        "run_id", "node", "outcome", "decided_by_id", "decided_at"
    )
    found: dict[UUID, list[StageDecision]] = {}
    for run_id, node, outcome, decided_by_id, decided_at in rows:
        found.setdefault(run_id, []).append(
            StageDecision(
                node=node, outcome=outcome, decided_by_id=decided_by_id, decided_at=decided_at
            )
        )
    return {run_id: tuple(decisions) for run_id, decisions in found.items()}


# ---------------------------------------------------------------------------
# In words
# ---------------------------------------------------------------------------


def _kind(workflow_type: str) -> str:
    return workflow_type.replace("_", " ")


def _stage(decision: StageDecision) -> str:
    when = formats.date_format(timezone.localtime(decision.decided_at), _("Y-m-d H:i T"))
    return _("at its %(stage)s stage on %(when)s") % {
        "stage": decision.node.replace("_", " "),
        "when": when,
    }


def refusal_for_actor(conflict: DutyConflict, *, workflow_type: str, action: str) -> str:
    """Say why the person acting may not claim, decide, complete or hand on this task (each case a
    sentence of its own, so each language orders its words)."""
    words = {"kind": _kind(workflow_type)}
    if conflict.kind == Conflict.REQUESTER:
        if action == "claim":
            return _("You requested this %(kind)s, so you cannot claim it.") % words
        if action == "decide":
            return _("You requested this %(kind)s, so you cannot decide it.") % words
        if action == "complete":
            return _("You requested this %(kind)s, so you cannot complete it.") % words
        return _("You requested this %(kind)s, so you cannot choose who decides it.") % words
    assert conflict.earlier is not None
    return _(
        "You already %(did)s this %(kind)s %(stage)s; one person decides at most one of"
        " its stages, so someone else must decide this one."
    ) % {
        **words,
        "did": outcome_words(conflict.earlier.outcome),
        "stage": _stage(conflict.earlier),
    }


def refusal_for_recipient(
    conflict: DutyConflict, *, workflow_type: str, action: str, name: str
) -> str:
    """Say why this task may not be delegated or reassigned to `name`."""
    words = {"kind": _kind(workflow_type), "name": name}
    delegated = action == "delegate"
    if conflict.kind == Conflict.REQUESTER:
        if delegated:
            return (
                _(
                    "%(name)s requested this %(kind)s, so it cannot be delegated to %(name)s:"
                    " nobody decides their own request."
                )
                % words
            )
        return (
            _(
                "%(name)s requested this %(kind)s, so it cannot be reassigned to %(name)s:"
                " nobody decides their own request."
            )
            % words
        )
    assert conflict.earlier is not None
    words |= {"did": outcome_words(conflict.earlier.outcome), "stage": _stage(conflict.earlier)}
    if delegated:
        return (
            _(
                "%(name)s already %(did)s this %(kind)s %(stage)s; one person decides at most one"
                " of its stages, so it cannot be delegated to %(name)s."
            )
            % words
        )
    return (
        _(
            "%(name)s already %(did)s this %(kind)s %(stage)s; one person decides at most one"
            " of its stages, so it cannot be reassigned to %(name)s."
        )
        % words
    )
