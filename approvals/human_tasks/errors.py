"""The errors of the human-task use cases, each with the HTTP status the views and the
API answer with, and a message a person can act on.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from approvals import task_forms
from approvals.models import (
    HumanTask,
)
from workflows.dsl import Approval, UserTask

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
        elif isinstance(node, UserTask):
            words = task_forms.in_words(node.form, errors)
            super().__init__(
                f"Fill in the form to complete it: {words} Nothing was completed; "
                "what you typed is kept."
            )
        else:
            words = task_forms.in_words(node.form, errors)
            super().__init__(f"Fill in the form to approve: {words} Nothing was decided.")


class TaskConflict(TaskError):
    status = 409


class AlreadyDecided(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        self.task = task
        who = display_name(task.decided_by)
        when = timezone.localtime(task.decided_at).strftime("%Y-%m-%d %H:%M %Z")
        super().__init__(f"This task was already {task.outcome} by {who} at {when}.")


class TaskClosed(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        super().__init__(f"This task is {task.state}: there is nothing left to decide.")


class StaleTask(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        holder = f" (now with {display_name(task.assignee)})" if task.assignee else ""
        super().__init__(
            f"This task changed since you opened it{holder}. Reload it to see where it stands."
        )


def display_name(user: Any) -> str:
    if user is None:
        return "someone"
    return user.get_full_name() or user.get_username()
