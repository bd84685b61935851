"""The states of a human task, its outcomes, and the channels a decision comes through."""

from __future__ import annotations

from django.db import models


class TaskState(models.TextChoices):
    OPEN = "open", "open (unclaimed)"
    CLAIMED = "claimed"
    DELEGATED = "delegated"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class Outcome(models.TextChoices):
    APPROVED = "approved"
    REJECTED = "rejected"
    # A reviewer sent the request back to its requester (Approval.on_changes_requested).
    CHANGES_REQUESTED = "changes_requested", "changes requested"
    # The requester answered a revision task with the input changed
    # (see approvals.human_tasks.revisions).
    RESUBMITTED = "resubmitted"
    # Someone filled in a data-entry task's form and completed it (dsl.UserTask).
    COMPLETED = "completed"


def outcome_words(outcome: str) -> str:
    """An outcome as the verb of a sentence: "carol approved", "carol sent back"."""
    return "sent back" if outcome == Outcome.CHANGES_REQUESTED else outcome


class TaskKind(models.TextChoices):
    """Whose work a human task is: a reviewer's decision, the requester's revision, or
    a form someone fills in and completes (dsl.UserTask)."""

    APPROVAL = "approval"
    REVISION = "revision"
    ENTRY = "entry", "data entry"


class Channel(models.TextChoices):
    INBOX = "inbox"
    EMAIL = "email"
    API = "api"
    ADMIN = "admin"
    SYSTEM = "system"


class Priority(models.IntegerChoices):
    LOW = 1
    NORMAL = 2
    HIGH = 3
    URGENT = 4


class InboxTab(models.TextChoices):
    """The lists of a reviewer's inbox."""

    MINE = "mine", "My tasks"
    QUEUE = "queue", "My groups' queue"
    DELEGATED = "delegated", "Delegated by me"


class Sla(models.TextChoices):
    """How a task stands against its due time (derived, never stored)."""

    ON_TIME = "on_time", "on time"
    DUE_SOON = "due_soon", "due soon"
    OVERDUE = "overdue"


LIVE_TASK_STATES = (TaskState.OPEN, TaskState.CLAIMED, TaskState.DELEGATED)


class NoticeKind(models.TextChoices):
    """What a notification tells its reader."""

    TASK_ASSIGNED = "task_assigned", "a task was assigned to you"
    TASK_QUEUED = "task_queued", "a task waits in your group's queue"
    TASK_DELEGATED = "task_delegated", "a task was delegated to you"
    TASK_DUE_SOON = "task_due_soon", "a task of yours is due soon"
    REQUEST_DECIDED = "request_decided", "your request was decided"
    CHANGES_REQUESTED = "changes_requested", "changes were requested on your request"
    REQUEST_ENDED = "request_ended", "your request ended"


class EmailMode(models.TextChoices):
    """How a person wants their notifications by email."""

    IMMEDIATE = "immediate", "one email each"
    DAILY = "daily", "one digest a day"
    OFF = "off", "no emails (in the app only)"


class WebhookEvent(models.TextChoices):
    """What an outbound webhook can tell a subscribed endpoint (see approvals.notify.webhooks)."""

    RUN_STARTED = "run.started"
    RUN_ENDED = "run.ended"
    RUN_FAILED = "run.failed"
    TASK_OPENED = "task.opened"
    TASK_DECIDED = "task.decided"
    TASK_ESCALATED = "task.escalated"
