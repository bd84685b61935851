"""The test kit with human tasks: `workflows.testing`'s environment, which also finds and
decides a run's human tasks through the same use cases as the inbox and the request page.

Enable it in a conftest.py with `pytest_plugins = ["approvals.testing"]` (instead of
`workflows.testing`): the `workflow_env` fixture then offers `task`, `approve`, `reject`,
`request_changes`, `resubmit`, and `save_draft` and `complete` for data-entry tasks
(`dsl.UserTask`) besides the engine's own actions, and its clock also
stops at every task's escalation and deadline. A refused decision raises the use case's
own error, `TaskError` (exported here), saying why, as the inbox would show it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from approvals.human_tasks import TaskError, decide, entries, revisions
from approvals.models import HumanTask
from approvals.states import LIVE_TASK_STATES, Channel
from workflows import testing
from workflows.models import WorkflowRun
from workflows.testing import as_if_committed, kept_in_process

__all__ = ["HumanTaskEnvironment", "TaskError", "workflow_env"]


class HumanTaskEnvironment(testing.WorkflowEnvironment):
    """`workflows.testing.WorkflowEnvironment`, deciding human tasks as people would."""

    def task(self, run: WorkflowRun, node: str, *, for_user: Any = None) -> Any:
        """The live human task of approval `node` (the one `for_user` may act on, if several)."""

        tasks = list(run.human_tasks.filter(node=node, state__in=LIVE_TASK_STATES).order_by("id"))
        if for_user is not None and len(tasks) > 1:
            tasks = [task for task in tasks if _is_candidate(task, for_user)] or tasks
        if not tasks:
            live = sorted(
                run.human_tasks.filter(state__in=LIVE_TASK_STATES).values_list("node", flat=True)
            )
            raise AssertionError(
                f"no live human task on {node!r}; the run is {self.refresh(run).state} "
                f"and has live tasks on {live or 'no node'}"
            )
        return tasks[0]

    def approve(
        self,
        run: WorkflowRun,
        node: str,
        *,
        as_user: Any,
        comment: str = "",
        values: dict[str, Any] | None = None,
        channel: str = "",
    ) -> WorkflowRun:
        """Approve the task of `node` as `as_user`, through the same service as the inbox;
        `values` fill in the approval's form, if it has one."""

        task = self.task(run, node, for_user=as_user)
        with as_if_committed():
            decide.approve_human_task(
                task_id=task.pk,
                user=as_user,
                channel=channel or Channel.INBOX,
                comment=comment,
                values=values,
                now=self.now,
            )
        self.settle()
        return self.refresh(run)

    def reject(
        self, run: WorkflowRun, node: str, *, as_user: Any, reason: str, channel: str = ""
    ) -> WorkflowRun:
        """Reject the task of `node` as `as_user` (a reason is required, as in the inbox)."""

        task = self.task(run, node, for_user=as_user)
        with as_if_committed():
            decide.reject_human_task(
                task_id=task.pk,
                user=as_user,
                channel=channel or Channel.INBOX,
                reason=reason,
                now=self.now,
            )
        self.settle()
        return self.refresh(run)

    def request_changes(
        self, run: WorkflowRun, node: str, *, as_user: Any, reason: str, channel: str = ""
    ) -> WorkflowRun:
        """Send the request back from approval `node` as `as_user`, with the reason its
        requester reads (the approval must allow it: `on_changes_requested`)."""

        task = self.task(run, node, for_user=as_user)
        with as_if_committed():
            decide.request_changes(
                task_id=task.pk,
                user=as_user,
                channel=channel or Channel.INBOX,
                reason=reason,
                now=self.now,
            )
        self.settle()
        return self.refresh(run)

    def resubmit(
        self,
        run: WorkflowRun,
        node: str,
        *,
        as_user: Any,
        input: dict[str, Any],
        comment: str = "",
        channel: str = "",
    ) -> WorkflowRun:
        """Answer the revision task of `Revise` node `node` as `as_user` (a requester) with
        the request's changed `input`, through the same service as the request page."""

        task = self.task(run, node, for_user=as_user)
        with as_if_committed():
            revisions.resubmit_request(
                task_id=task.pk,
                user=as_user,
                input=input,
                comment=comment,
                channel=channel or Channel.INBOX,
                now=self.now,
            )
        self.settle()
        return self.refresh(run)

    def save_draft(
        self, run: WorkflowRun, node: str, *, as_user: Any, values: dict[str, Any]
    ) -> Any:
        """Keep `values` as the draft of user task `node`, as its page does while typed;
        return the task (its `draft` holds them)."""

        task = self.task(run, node, for_user=as_user)
        return entries.save_draft(
            task_id=task.pk, user=as_user, channel=Channel.INBOX, values=values, now=self.now
        )

    def complete(
        self,
        run: WorkflowRun,
        node: str,
        *,
        as_user: Any,
        values: dict[str, Any],
        comment: str = "",
        channel: str = "",
    ) -> WorkflowRun:
        """Fill in and complete the data-entry task of `UserTask` node `node` as `as_user`,
        through the same service as the inbox; values that do not fit raise InvalidForm."""

        task = self.task(run, node, for_user=as_user)
        with as_if_committed():
            entries.complete_user_task(
                task_id=task.pk,
                user=as_user,
                channel=channel or Channel.INBOX,
                values=values,
                comment=comment,
                now=self.now,
            )
        self.settle()
        return self.refresh(run)


def next_human_task_due(now: datetime) -> datetime | None:
    """Return the earliest escalation or deadline of a live task after `now` (None if none)."""
    live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES)
    times = [
        live.filter(**{f"{column}__gt": now})
        .order_by(column)
        .values_list(column, flat=True)
        .first()
        for column in ("escalate_at", "due_at")
    ]
    return min((moment for moment in times if moment is not None), default=None)


if next_human_task_due not in testing.due_time_sources:
    testing.due_time_sources.append(next_human_task_due)


@pytest.fixture
def workflow_env(db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[HumanTaskEnvironment]:
    """A HumanTaskEnvironment on the test database, its clock at `DEFAULT_START`."""
    with kept_in_process(HumanTaskEnvironment(), monkeypatch) as env:
        yield env


def _is_candidate(task: Any, user: Any) -> bool:
    return (
        task.assignee_id == user.pk
        or task.candidate_users.filter(pk=user.pk).exists()
        or task.candidate_groups.filter(user=user).exists()
    )
