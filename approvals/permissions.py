"""Who may see a human task and who may act on it: pure predicates over plain facts.

The rule of thumb the views and the API follow: a task you may not see is a 404,
a task you may see but not act on is a 403. Whom you may hand a task to (and so
find in the user picker) is `may_hand_to`.

Separation of duties sits above every other rule, operators included: nobody
claims, decides or hands on a task of a run they requested, and, when the run's
definition asks for distinct approvers, nobody decides two of its approval stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from django.utils.translation import gettext as _

from approvals.states import LIVE_TASK_STATES, TaskState
from workflows.dsl import Workflow


@dataclass(frozen=True)
class Reviewer:
    user_id: int
    group_ids: frozenset[int]
    managed_group_ids: frozenset[int]
    is_operator: bool
    username: str = ""


@dataclass(frozen=True)
class StageDecision:
    """A person's decision at one approval stage (node) of a run."""

    node: str
    outcome: str
    decided_by_id: int
    decided_at: datetime


@dataclass(frozen=True)
class Duties:
    """What separation of duties needs to know about a task and its run."""

    node: str = ""
    # Usernames of who asked for the run (see run_requesters).
    requesters: frozenset[str] = frozenset()
    distinct_approvers: bool = False
    # People's decisions at the run's stages so far (system decisions left out).
    decisions: tuple[StageDecision, ...] = ()


@dataclass(frozen=True)
class TaskFacts:
    state: str
    assignee_id: int | None
    owner_id: int | None
    decided_by_id: int | None
    candidate_user_ids: frozenset[int]
    candidate_group_ids: frozenset[int]
    duties: Duties = field(default_factory=Duties)


# ---------------------------------------------------------------------------
# Separation of duties
# ---------------------------------------------------------------------------


def run_requesters(
    *, workflow: Workflow, run_input: Mapping[str, Any], started_by: str | None
) -> frozenset[str]:
    """Return the usernames who asked for a run: whoever started it and, for a type that
    runs on someone's behalf, the person its input names in `workflow.requester_field`."""
    names: list[Any] = [started_by]
    if workflow.requester_field:
        names.append(run_input.get(workflow.requester_field))
    return frozenset(name for name in names if isinstance(name, str) and name)


class Conflict(Enum):
    REQUESTER = "requester"
    EARLIER_STAGE = "earlier_stage"


@dataclass(frozen=True)
class DutyConflict:
    """Why a person may not decide a task: they requested its run, or decided another stage."""

    kind: Conflict
    earlier: StageDecision | None = None


def duty_conflict(*, user_id: int, username: str, duties: Duties) -> DutyConflict | None:
    """Return why this person may not claim, decide or be handed the task, or None."""
    if username and username in duties.requesters:
        return DutyConflict(Conflict.REQUESTER)
    if duties.distinct_approvers:
        for decision in duties.decisions:
            if decision.decided_by_id == user_id and decision.node != duties.node:
                return DutyConflict(Conflict.EARLIER_STAGE, earlier=decision)
    return None


def is_requester(reviewer: Reviewer, task: TaskFacts) -> bool:
    return bool(reviewer.username) and reviewer.username in task.duties.requesters


def _free_to_decide(reviewer: Reviewer, task: TaskFacts) -> bool:
    conflict = duty_conflict(
        user_id=reviewer.user_id, username=reviewer.username, duties=task.duties
    )
    return conflict is None


# ---------------------------------------------------------------------------
# Seeing and acting
# ---------------------------------------------------------------------------


def is_candidate(reviewer: Reviewer, task: TaskFacts) -> bool:
    return reviewer.user_id in task.candidate_user_ids or bool(
        reviewer.group_ids & task.candidate_group_ids
    )


def can_see(reviewer: Reviewer, task: TaskFacts) -> bool:
    return (
        reviewer.is_operator
        or reviewer.user_id in (task.assignee_id, task.owner_id, task.decided_by_id)
        or is_candidate(reviewer, task)
        or bool(reviewer.managed_group_ids & task.candidate_group_ids)
    )


def can_claim(reviewer: Reviewer, task: TaskFacts) -> bool:
    return (
        task.state == TaskState.OPEN
        and (reviewer.is_operator or is_candidate(reviewer, task))
        and _free_to_decide(reviewer, task)
    )


def can_release(reviewer: Reviewer, task: TaskFacts) -> bool:
    """Give a claimed task back to its candidates (only if it has some to go back to)."""
    others = task.candidate_user_ids - {task.assignee_id}
    has_candidates = bool(others or task.candidate_group_ids)
    return (
        task.state == TaskState.CLAIMED
        and has_candidates
        and (reviewer.is_operator or reviewer.user_id == task.assignee_id)
    )


def can_decide(reviewer: Reviewer, task: TaskFacts) -> bool:
    """The assignee (the delegate, while delegated) decides; an open task, any candidate."""
    if task.state not in LIVE_TASK_STATES or not _free_to_decide(reviewer, task):
        return False
    if reviewer.is_operator or reviewer.user_id == task.assignee_id:
        return True
    return task.state == TaskState.OPEN and is_candidate(reviewer, task)


def can_delegate(reviewer: Reviewer, task: TaskFacts) -> bool:
    return task.state in (TaskState.OPEN, TaskState.CLAIMED) and can_decide(reviewer, task)


def can_reassign(reviewer: Reviewer, task: TaskFacts) -> bool:
    """The owner (who delegated it, or holds it), a candidate group's manager, an operator;
    never the requester, who would be choosing who decides their own request."""
    if task.state not in LIVE_TASK_STATES or is_requester(reviewer, task):
        return False
    holder = task.owner_id if task.owner_id is not None else task.assignee_id
    return (
        reviewer.is_operator
        or reviewer.user_id == holder
        or bool(reviewer.managed_group_ids & task.candidate_group_ids)
    )


def can_comment(reviewer: Reviewer, task: TaskFacts) -> bool:
    return can_see(reviewer, task)


# ---------------------------------------------------------------------------
# Handing a task to someone
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    """Where someone sits: their groups, the groups they manage, whom they report to."""

    user_id: int
    group_ids: frozenset[int] = frozenset()
    managed_group_ids: frozenset[int] = frozenset()
    manager_id: int | None = None
    is_operator: bool = False


def may_hand_to(giver: Person, receiver: Person) -> bool:
    """Whom a person may delegate or reassign a task to, and find in the user picker:
    someone in one of their groups or the groups they manage, their manager, or one
    of their reports; an operator, anyone. Nobody else's name is theirs to learn.

    approvals.inbox.selectors.people_to_hand_to is the same rule as a query.
    """
    return (
        giver.is_operator
        or bool(receiver.group_ids & (giver.group_ids | giver.managed_group_ids))
        or (giver.manager_id is not None and receiver.user_id == giver.manager_id)
        or receiver.manager_id == giver.user_id
    )


# ---------------------------------------------------------------------------
# Requests: a run as seen by the people who asked for it
# ---------------------------------------------------------------------------


def can_see_request(
    *, username: str, requesters: frozenset[str], has_task: bool, is_operator: bool
) -> bool:
    """The run's requesters, anyone with a task on it, and operators see a request's page."""
    return is_operator or (bool(username) and username in requesters) or has_task


def can_withdraw(*, username: str, requesters: frozenset[str], is_operator: bool) -> bool:
    """Only whoever asked for a request, or an operator, may withdraw it."""
    return is_operator or (bool(username) and username in requesters)


# ---------------------------------------------------------------------------
# The operators' run console
# ---------------------------------------------------------------------------


def console_refusal(*, is_staff: bool, may_view_runs: bool, may_operate_runs: bool) -> str:
    """Return why someone may not open the run console, or "" if they may: it is for
    staff who may view or operate runs."""
    if not is_staff:
        return _("The run console is for operators (staff) only.")
    if not (may_view_runs or may_operate_runs):
        return _("The run console needs the permission to view or to operate workflow runs.")
    return ""


def operate_refusal(*, may_operate_runs: bool, what: str) -> str:
    """Return why someone may not `what` (retry, skip, cancel, pause, resume a run), or "".

    The permission alone decides, as for the API's and the admin's run actions; the
    console's pages are for staff on top of that (`console_refusal`).
    """
    if not may_operate_runs:
        return _(
            "Only operators may %(what)s: it needs the permission to operate workflow runs "
            "(“Can cancel, pause, resume and retry runs”)."
        ) % {"what": what}
    return ""


def task_overview_scope(
    *, console_refusal: str, managed_group_ids: frozenset[int], page: str
) -> tuple[frozenset[int] | None, str]:
    """Return which groups' tasks someone may see on an overview of human tasks (`page`:
    the SLA dashboard, the console's task list), and why not.

    Whoever may open the run console (an operator) sees everything: (None, ""). A
    group's manager sees the tasks offered to the groups they manage: (their groups,
    ""). Anyone else sees nothing, and is told why: (frozenset(), the reason).
    """
    if not console_refusal:
        return None, ""
    if managed_group_ids:
        return managed_group_ids, ""
    return frozenset(), _(
        "%(page)s is for operators and for group managers: you manage no group, and %(why)s"
    ) % {"page": page, "why": f"{console_refusal[0].lower()}{console_refusal[1:]}"}
