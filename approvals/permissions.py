"""Who may see a human task and who may act on it: pure predicates over plain facts.

The rule of thumb the views and the API follow: a task you may not see is a 404,
a task you may see but not act on is a 403.
"""

from __future__ import annotations

from dataclasses import dataclass

from approvals.states import LIVE_TASK_STATES, TaskState


@dataclass(frozen=True)
class Reviewer:
    user_id: int
    group_ids: frozenset[int]
    managed_group_ids: frozenset[int]
    is_operator: bool


@dataclass(frozen=True)
class TaskFacts:
    state: str
    assignee_id: int | None
    owner_id: int | None
    decided_by_id: int | None
    candidate_user_ids: frozenset[int]
    candidate_group_ids: frozenset[int]


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
    return task.state == TaskState.OPEN and (reviewer.is_operator or is_candidate(reviewer, task))


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
    if task.state not in LIVE_TASK_STATES:
        return False
    if reviewer.is_operator or reviewer.user_id == task.assignee_id:
        return True
    return task.state == TaskState.OPEN and is_candidate(reviewer, task)


def can_delegate(reviewer: Reviewer, task: TaskFacts) -> bool:
    return task.state in (TaskState.OPEN, TaskState.CLAIMED) and can_decide(reviewer, task)


def can_reassign(reviewer: Reviewer, task: TaskFacts) -> bool:
    """The owner (who delegated it, or holds it), a candidate group's manager, an operator."""
    if task.state not in LIVE_TASK_STATES:
        return False
    holder = task.owner_id if task.owner_id is not None else task.assignee_id
    return (
        reviewer.is_operator
        or reviewer.user_id == holder
        or bool(reviewer.managed_group_ids & task.candidate_group_ids)
    )


def can_comment(reviewer: Reviewer, task: TaskFacts) -> bool:
    return can_see(reviewer, task)
