"""The errors of the human-task use cases, each with the HTTP status the views and the
API answer with, and a message a person can act on.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.utils import formats, timezone
from django.utils.translation import gettext as _

from approvals import task_forms
from approvals.models import (
    HumanTask,
)
from approvals.states import outcome_words
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
        super().__init__(_("No such task (or it is not yours to see)."))


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
            super().__init__(_("This decision has no form: send no form values."))
        elif isinstance(node, UserTask):
            words = task_forms.in_words(node.form, errors)
            super().__init__(
                _(
                    "Fill in the form to complete it: %(problems)s Nothing was completed;"
                    " what you typed is kept."
                )
                % {"problems": words}
            )
        else:
            words = task_forms.in_words(node.form, errors)
            super().__init__(
                _("Fill in the form to approve: %(problems)s Nothing was decided.")
                % {"problems": words}
            )


class TaskConflict(TaskError):
    status = 409


class AlreadyDecided(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        self.task = task
        who = display_name(task.decided_by)
        when = formats.date_format(timezone.localtime(task.decided_at), _("Y-m-d H:i T"))
        super().__init__(
            _("This task was already %(outcome)s by %(person)s at %(when)s.")
            % {"outcome": outcome_words(task.outcome), "person": who, "when": when}
        )


class TaskClosed(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        super().__init__(
            _("This task is %(state)s: there is nothing left to decide.")
            % {"state": task.get_state_display()}
        )


class StaleTask(TaskConflict):
    def __init__(self, task: HumanTask) -> None:
        if task.assignee:
            message = _(
                "This task changed since you opened it (now with %(person)s)."
                " Reload it to see where it stands."
            ) % {"person": display_name(task.assignee)}
        else:
            message = _("This task changed since you opened it. Reload it to see where it stands.")
        super().__init__(message)


def display_name(user: Any) -> str:
    if user is None:
        return _("someone")
    return user.get_full_name() or user.get_username()
