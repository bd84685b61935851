"""The states of a human task, its outcomes, and the channels a decision comes through."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class TaskState(models.TextChoices):
    OPEN = "open", _("open (unclaimed)")
    CLAIMED = "claimed", _("Claimed")
    DELEGATED = "delegated", _("Delegated")
    COMPLETED = "completed", _("Completed")
    EXPIRED = "expired", _("Expired")
    CANCELLED = "cancelled", _("Cancelled")


class Outcome(models.TextChoices):
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    # A reviewer sent the request back to its requester (Approval.on_changes_requested).
    CHANGES_REQUESTED = "changes_requested", _("changes requested")
    # The requester answered a revision task with the input changed
    # (see approvals.human_tasks.revisions).
    RESUBMITTED = "resubmitted", _("Resubmitted")
    # Someone filled in a data-entry task's form and completed it (dsl.UserTask).
    COMPLETED = "completed", _("Completed")


def outcome_words(outcome: str) -> str:
    """An outcome as the verb of a sentence: "carol approved", "carol sent back"."""
    words = {
        Outcome.APPROVED: gettext("approved"),
        Outcome.REJECTED: gettext("rejected"),
        Outcome.CHANGES_REQUESTED: gettext("sent back"),
        Outcome.RESUBMITTED: gettext("resubmitted"),
        Outcome.COMPLETED: gettext("completed"),
    }
    return words.get(outcome, outcome)


class TaskKind(models.TextChoices):
    """Whose work a human task is: a reviewer's decision, the requester's revision, or
    a form someone fills in and completes (dsl.UserTask)."""

    APPROVAL = "approval", _("Approval")
    REVISION = "revision", _("Revision")
    ENTRY = "entry", _("data entry")


class Channel(models.TextChoices):
    INBOX = "inbox", _("inbox")
    EMAIL = "email", _("email")
    API = "api", _("api")
    ADMIN = "admin", _("admin")
    SYSTEM = "system", _("system")


class Priority(models.IntegerChoices):
    LOW = 1, _("Low")
    NORMAL = 2, _("Normal")
    HIGH = 3, _("High")
    URGENT = 4, _("Urgent")


class InboxTab(models.TextChoices):
    """The lists of a reviewer's inbox."""

    MINE = "mine", _("My tasks")
    QUEUE = "queue", _("My groups' queue")
    DELEGATED = "delegated", _("Delegated by me")


class Sla(models.TextChoices):
    """How a task stands against its due time (derived, never stored)."""

    ON_TIME = "on_time", _("on time")
    DUE_SOON = "due_soon", _("due soon")
    OVERDUE = "overdue", _("Overdue")


LIVE_TASK_STATES = (TaskState.OPEN, TaskState.CLAIMED, TaskState.DELEGATED)


class NoticeKind(models.TextChoices):
    """What a notification tells its reader."""

    TASK_ASSIGNED = "task_assigned", _("a task was assigned to you")
    TASK_QUEUED = "task_queued", _("a task waits in your group's queue")
    TASK_DELEGATED = "task_delegated", _("a task was delegated to you")
    TASK_DUE_SOON = "task_due_soon", _("a task of yours is due soon")
    REQUEST_DECIDED = "request_decided", _("your request was decided")
    CHANGES_REQUESTED = "changes_requested", _("changes were requested on your request")
    REQUEST_ENDED = "request_ended", _("your request ended")


class EmailMode(models.TextChoices):
    """How a person wants their notifications by email."""

    IMMEDIATE = "immediate", _("one email each")
    DAILY = "daily", _("one digest a day")
    OFF = "off", _("no emails (in the app only)")


class WebhookEvent(models.TextChoices):
    """What an outbound webhook can tell a subscribed endpoint (see approvals.notify.webhooks)."""

    RUN_STARTED = "run.started"
    RUN_ENDED = "run.ended"
    RUN_FAILED = "run.failed"
    TASK_OPENED = "task.opened"
    TASK_DECIDED = "task.decided"
    TASK_ESCALATED = "task.escalated"
