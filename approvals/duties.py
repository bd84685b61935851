"""Separation of duties, read from the database and put in words.

The rules are pure, in `approvals.permissions`; this module gathers their facts
(who asked for a run, who decided its stages) for one task, or for a page of
tasks in a constant number of queries, and says in plain words why someone is
kept from a task.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from uuid import UUID

from django.utils import timezone

from approvals.models import HumanTask
from approvals.permissions import Conflict, Duties, DutyConflict, StageDecision, run_requesters
from approvals.states import Channel, TaskState
from workflows import registry
from workflows.dsl import Workflow
from workflows.models import WorkflowRun


def duties_for(run: WorkflowRun, node: str) -> Duties:
    """Return the duties of `node`'s tasks in `run` (the run's requesters, its decisions)."""
    definition = registry.get(run.workflow_type, run.workflow_version)
    decisions = _decisions([run.pk]) if definition.distinct_approvers else {}
    return _duties(run, definition, node, decisions.get(run.pk, ()))


def duties_of(task: HumanTask) -> Duties:
    return duties_for(task.run, task.node)


def duties_on_page(tasks: Sequence[HumanTask]) -> dict[UUID, Duties]:
    """Return each task's duties in two queries, however many tasks there are."""
    if not tasks:
        return {}
    runs = {
        run.pk: run
        for run in WorkflowRun.objects.filter(pk__in={task.run_id for task in tasks})
        .select_related("started_by")
        # `state` too: django-fsm reads it when each row is loaded.
        .only("id", "state", "workflow_type", "workflow_version", "input", "started_by__username")
    }
    definitions = {
        run_id: registry.get(run.workflow_type, run.workflow_version)
        for run_id, run in runs.items()
    }
    distinct = [run_id for run_id, workflow in definitions.items() if workflow.distinct_approvers]
    decisions = _decisions(distinct) if distinct else {}
    return {
        task.pk: _duties(
            runs[task.run_id], definitions[task.run_id], task.node, decisions.get(task.run_id, ())
        )
        for task in tasks
    }


def _duties(
    run: WorkflowRun, definition: Workflow, node: str, decisions: tuple[StageDecision, ...]
) -> Duties:
    started_by = run.started_by.get_username() if run.started_by_id else None
    return Duties(
        node=node,
        requesters=run_requesters(workflow=definition, run_input=run.input, started_by=started_by),
        distinct_approvers=definition.distinct_approvers,
        decisions=decisions,
    )


def _decisions(run_ids: Iterable[UUID]) -> dict[UUID, tuple[StageDecision, ...]]:
    """People's decisions in these runs (a deadline's automatic rejection is nobody's)."""
    rows = (
        HumanTask.objects.filter(run_id__in=list(run_ids), state=TaskState.COMPLETED)
        .exclude(channel=Channel.SYSTEM)
        .order_by("decided_at", "id")
        .values_list("run_id", "node", "outcome", "decided_by_id", "decided_at")
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

# What a refused person was trying to do, as the end of "so you cannot ... it".
ACTING = {
    "claim": "claim",
    "decide": "decide",
    "delegate": "choose who decides",
    "reassign": "choose who decides",
}
# How a task would have gone to someone else: "it cannot be ... to Alice".
HANDING = {"delegate": "delegated", "reassign": "reassigned"}


def _kind(workflow_type: str) -> str:
    return workflow_type.replace("_", " ")


def _stage(decision: StageDecision) -> str:
    when = timezone.localtime(decision.decided_at).strftime("%Y-%m-%d %H:%M %Z")
    return f"at its {decision.node.replace('_', ' ')} stage on {when}"


def refusal_for_actor(conflict: DutyConflict, *, workflow_type: str, action: str) -> str:
    """Say why the person acting may not claim, decide or hand on this task."""
    kind = _kind(workflow_type)
    if conflict.kind == Conflict.REQUESTER:
        return f"You requested this {kind}, so you cannot {ACTING[action]} it."
    assert conflict.earlier is not None
    return (
        f"You already {conflict.earlier.outcome} this {kind} {_stage(conflict.earlier)}; "
        "one person decides at most one of its stages, so someone else must decide this one."
    )


def refusal_for_recipient(
    conflict: DutyConflict, *, workflow_type: str, action: str, name: str
) -> str:
    """Say why this task may not be delegated or reassigned to `name`."""
    kind = _kind(workflow_type)
    handed = f"it cannot be {HANDING[action]} to {name}"
    if conflict.kind == Conflict.REQUESTER:
        return f"{name} requested this {kind}, so {handed}: nobody decides their own request."
    assert conflict.earlier is not None
    return (
        f"{name} already {conflict.earlier.outcome} this {kind} {_stage(conflict.earlier)}; "
        f"one person decides at most one of its stages, so {handed}."
    )
