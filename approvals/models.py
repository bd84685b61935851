"""Human tasks and what surrounds them: comments, substitutes, reporting lines, email links.

Transitions change only their own row; `approvals.human_tasks` locks, transitions,
saves, audits and signals the run. Every transition bumps `version`, so a stale
form or email link (made for an older version) is refused.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import datetime

import django_fsm as fsm
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from approvals.states import (
    LIVE_TASK_STATES,
    Channel,
    EmailMode,
    InboxTab,
    NoticeKind,
    Outcome,
    Priority,
    TaskKind,
    TaskState,
    WebhookEvent,
)
from workflows.ids import time_ordered_id
from workflows.models import StepRun, WorkflowRun
from workflows.states import RunState

User = settings.AUTH_USER_MODEL
# The longest comment or reason anyone may write on a task, through any channel.
COMMENT_MAX_LENGTH = 4000
# Transitions only the engine and the sweep make; the admin offers the others.
_NOT_IN_ADMIN = {"admin": False}


class HumanTask(fsm.ConcurrentTransitionMixin, models.Model):
    # Time-ordered, as a run's is: the task's id keys the candidate, inbox, notification
    # and audit rows every new task writes, and a random one would land each of them on
    # a random leaf page of those indexes (workflows.ids).
    id = models.UUIDField(primary_key=True, default=time_ordered_id, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="human_tasks")
    step = models.ForeignKey(StepRun, on_delete=models.CASCADE, related_name="human_tasks")
    node = models.CharField(max_length=100)
    # A reviewer's approval, a revision its requesters answer (approvals.human_tasks.revisions),
    # or a form to fill in and complete (approvals.human_tasks.entries).
    kind = models.CharField(max_length=20, choices=TaskKind.choices, default=TaskKind.APPROVAL)
    workflow_type = models.CharField(max_length=100)
    title = models.CharField(max_length=200)
    # The run's searchable input values when the task opened (approvals.run_data_filters),
    # copied to its inbox rows so the inbox filters by run data without a join.
    search_data = models.JSONField(default=dict, blank=True)
    state = fsm.FSMField(
        choices=TaskState.choices, default=TaskState.OPEN, protected=True, max_length=20
    )
    outcome = models.CharField(max_length=20, choices=Outcome.choices, blank=True)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    assignee = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.PROTECT, related_name="assigned_tasks"
    )
    # Who delegated the task and gets it back when the delegate is done.
    owner = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.PROTECT, related_name="delegated_tasks"
    )
    # Set when the task went to a substitute: "for carol, while away".
    substitute_for = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    candidate_users = models.ManyToManyField(User, blank=True, related_name="candidate_tasks")
    candidate_groups = models.ManyToManyField(Group, blank=True, related_name="candidate_tasks")
    due_at = models.DateTimeField(null=True, blank=True)
    escalation_level = models.PositiveSmallIntegerField(default=0)
    escalate_at = models.DateTimeField(null=True, blank=True)
    # When to remind its holders that it is due soon (Approval.remind_before).
    remind_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    channel = models.CharField(max_length=20, choices=Channel.choices, blank=True)
    comment = models.TextField(blank=True)
    # What the decider entered in the approval's form (Approval.form), as validated.
    form_values = models.JSONField(default=dict, blank=True)
    # What a resubmission changed in the run's input: {field: [old, new]} (revisions only).
    changes = models.JSONField(default=dict, blank=True)
    # A data-entry task's form as last typed, not yet valid (approvals.human_tasks.entries):
    # the field values so far, kept so a reload or another device finds them. Emptied
    # when the task is completed (the values then live in `form_values`).
    draft = models.JSONField(default=dict, blank=True)
    draft_saved_at = models.DateTimeField(null=True, blank=True)
    draft_saved_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["due_at", "id"]
        indexes = [
            models.Index(
                fields=["escalate_at"],
                condition=Q(state__in=LIVE_TASK_STATES, escalate_at__isnull=False),
                name="task_escalation_due_idx",
            ),
            models.Index(
                fields=["due_at"],
                condition=Q(state__in=LIVE_TASK_STATES, due_at__isnull=False),
                name="task_deadline_due_idx",
            ),
            models.Index(
                fields=["remind_at"],
                condition=Q(state__in=LIVE_TASK_STATES, remind_at__isnull=False),
                name="task_reminder_due_idx",
            ),
            models.Index(fields=["assignee", "state", "due_at"], name="task_assignee_idx"),
            # A person's decisions in a run (separation of duties, see approvals.duties).
            models.Index(
                fields=["run", "decided_by", "decided_at"],
                condition=Q(state=TaskState.COMPLETED),
                name="task_decided_idx",
            ),
            models.Index(fields=["state", "due_at", "id"], name="task_state_due_idx"),
            # A person's decisions, newest first: the inbox's "Decided by me" tab, by
            # keyset (approvals.inbox.decided), read backwards.
            models.Index(
                fields=["decided_by", "decided_at", "id"],
                condition=Q(state=TaskState.COMPLETED),
                name="task_decided_by_idx",
            ),
            # Recent decisions, for the SLA dashboard's decision times.
            models.Index(
                fields=["decided_at"],
                condition=Q(state=TaskState.COMPLETED),
                name="task_decided_at_idx",
            ),
            # Every task newest first, and the live ones alone: the console's task list,
            # by keyset, whose live lists cost what the live tasks do, whatever the history.
            models.Index(fields=["created_at", "id"], name="task_created_idx"),
            models.Index(
                fields=["created_at", "id"],
                condition=Q(state__in=LIVE_TASK_STATES),
                name="task_live_created_idx",
            ),
        ]
        permissions = [("operate_humantask", "Can act on any human task as an operator")]

    def __str__(self) -> str:
        return f"{self.title} (#{self.pk}, {self.state})"

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_TASK_STATES

    # -- transitions -------------------------------------------------------

    def _bump(self) -> None:
        self.version += 1

    @fsm.transition(
        field=state, source=TaskState.OPEN, target=TaskState.CLAIMED, custom=_NOT_IN_ADMIN
    )
    def claim(self, *, user, now: datetime) -> None:
        self.assignee = user
        self.claimed_at = now
        self._bump()

    @fsm.transition(
        field=state,
        source=TaskState.CLAIMED,
        target=TaskState.OPEN,
        custom={"label": "Release to the candidates"},
    )
    def release(self) -> None:
        self.assignee = None
        self.claimed_at = None
        self._bump()

    @fsm.transition(
        field=state,
        source=[TaskState.OPEN, TaskState.CLAIMED],
        target=TaskState.DELEGATED,
        custom=_NOT_IN_ADMIN,
    )
    def delegate(self, *, owner, delegate) -> None:
        self.owner = owner
        self.assignee = delegate
        self._bump()

    @fsm.transition(
        field=state,
        source=list(LIVE_TASK_STATES),
        target=TaskState.CLAIMED,
        custom={"label": "Reassign…"},
    )
    def reassign(self, *, to, now: datetime) -> None:
        """Hand the task to someone else for good (not a delegation: no owner remains)."""
        self.assignee = to
        self.owner = None
        self.substitute_for = None
        self.claimed_at = now
        self._bump()

    @fsm.transition(
        field=state,
        source=list(LIVE_TASK_STATES),
        target=TaskState.COMPLETED,
        custom={"label": "Decide…"},
    )
    def complete(
        self,
        *,
        outcome: Outcome,
        by,
        channel: Channel,
        comment: str,
        now: datetime,
        form_values: dict | None = None,
    ):
        self.outcome = outcome
        self.decided_by = by
        self.decided_at = now
        self.channel = channel
        self.comment = comment
        self.form_values = form_values or {}
        self.completed_at = now
        self.escalate_at = None
        self.remind_at = None
        self._bump()

    @fsm.transition(
        field=state, source=list(LIVE_TASK_STATES), target=TaskState.OPEN, custom=_NOT_IN_ADMIN
    )
    def escalate(self, *, next_escalation_at: datetime | None) -> None:
        """Reopen the task to its widened candidates (earlier holders stay among them)."""
        self.assignee = None
        self.owner = None
        self.claimed_at = None
        self.escalation_level += 1
        self.escalate_at = next_escalation_at
        self._bump()

    @fsm.transition(
        field=state, source=list(LIVE_TASK_STATES), target=TaskState.EXPIRED, custom=_NOT_IN_ADMIN
    )
    def expire(self, *, now: datetime) -> None:
        self.completed_at = now
        self.escalate_at = None
        self.remind_at = None
        self._bump()

    @fsm.transition(
        field=state,
        source=list(LIVE_TASK_STATES),
        target=TaskState.CANCELLED,
        custom=_NOT_IN_ADMIN,
    )
    def cancel(self, *, now: datetime) -> None:
        self.completed_at = now
        self.escalate_at = None
        self.remind_at = None
        self._bump()


class InboxEntry(models.Model):
    """One line of someone's inbox: a live task, the tab it shows in, and whose tab.

    A read model with one writer, `approvals.human_tasks.inbox_entries.refresh`, which the
    services call whenever a task's state, holders, candidates, priority or due
    time change. A user's row is theirs alone; a group's row (queue only) shows
    to each of its members. It carries the task's sort keys and title, so each tab is read
    as one range of an index in the order it is shown, whatever the number of
    tasks in the system, and what the task's row shows, so a page reads no other
    table for its rows; finished tasks have no rows.
    """

    task = models.ForeignKey(HumanTask, on_delete=models.CASCADE, related_name="inbox_entries")
    tab = models.CharField(max_length=20, choices=InboxTab.choices)
    # The indexes below lead with these columns, so they need none of their own.
    user = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # The task's due time, or the far future when it has none: NULLs last, in an index.
    sort_due = models.DateTimeField()
    # The task's priority negated: ascending order puts the most urgent first.
    sort_priority = models.SmallIntegerField()
    workflow_type = models.CharField(max_length=100)
    # The task's title, so that a search filters the tab's own range of an index as it
    # is read, never a join the planner might start from the other side.
    title = models.CharField(max_length=200, default="")
    # The task's run data a filter may name (HumanTask.search_data), read with the row.
    data = models.JSONField(default=dict)
    # What the task's row shows and separation of duties reads beside the keys above
    # (approvals.inbox.selectors.PageTask), so that a page reads its rows without joining
    # the task, its run and four users: those joins were most of the page's rows query.
    # The due time and priority are the sort keys'; the run's workflow type is the task's.
    run_id = models.UUIDField(null=True)
    node = models.CharField(max_length=100, default="")
    kind = models.CharField(max_length=20, default="")
    state = models.CharField(max_length=20, default="")
    outcome = models.CharField(max_length=20, default="")
    # Copies of the task's and run's versions: plain integers, as a CHECK added to a big
    # table is a scan of it under an exclusive lock (their sources hold the rule).
    version = models.IntegerField(default=0)
    workflow_version = models.IntegerField(default=0)
    # The usernames of the people the task and its run name ("" when nobody).
    assignee = models.CharField(max_length=150, default="")
    owner = models.CharField(max_length=150, default="")
    substitute_for = models.CharField(max_length=150, default="")
    started_by = models.CharField(max_length=150, default="")

    class Meta:
        indexes = [
            models.Index(
                fields=["user", "tab", "sort_due", "task"],
                condition=Q(user__isnull=False),
                name="inbox_user_due_idx",
            ),
            models.Index(
                fields=["user", "tab", "sort_priority", "sort_due", "task"],
                condition=Q(user__isnull=False),
                name="inbox_user_priority_idx",
            ),
            models.Index(
                fields=["group", "sort_due", "task"],
                condition=Q(group__isnull=False),
                name="inbox_group_due_idx",
            ),
            models.Index(
                fields=["group", "sort_priority", "sort_due", "task"],
                condition=Q(group__isnull=False),
                name="inbox_group_priority_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False, tab=InboxTab.QUEUE),
                name="inbox_entry_one_user_or_a_queue_group",
            ),
            models.UniqueConstraint(
                fields=["task", "tab", "user"],
                condition=Q(user__isnull=False),
                name="inbox_entry_unique_user",
            ),
            models.UniqueConstraint(
                fields=["task", "group"],
                condition=Q(group__isnull=False),
                name="inbox_entry_unique_group",
            ),
        ]

    def __str__(self) -> str:
        whose = f"user {self.user_id}" if self.user_id else f"group {self.group_id}"
        return f"#{self.task_id} in {self.tab} of {whose}"


class Comment(models.Model):
    task = models.ForeignKey(HumanTask, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.author} on #{self.task_id}"


class SubstitutionQuerySet(models.QuerySet):
    def in_force(self, now: datetime) -> SubstitutionQuerySet:
        """The substitutions whose user is away at `now`."""
        return self.filter(starts_at__lte=now, ends_at__gt=now)


class Substitution(models.Model):
    """While `starts_at <= now < ends_at`, new tasks for `user` go to `substitute`."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="substitutions")
    substitute = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()

    objects = SubstitutionQuerySet.as_manager()

    class Meta:
        ordering = ["starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="substitution_ends_after_start"
            ),
            models.CheckConstraint(
                condition=~Q(user=models.F("substitute")), name="substitution_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.substitute} for {self.user}"


class ReportingLine(models.Model):
    """Who a user reports to: the manager who approves their expenses."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="reporting_line")
    manager = models.ForeignKey(User, on_delete=models.PROTECT, related_name="reports")

    def __str__(self) -> str:
        return f"{self.user} reports to {self.manager}"


class GroupManager(models.Model):
    """The manager of a group, who may reassign its tasks."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="manager_link")
    manager = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")

    def __str__(self) -> str:
        return f"{self.manager} manages {self.group}"


class EmailLink(models.Model):
    """A single-use decision link sent to one recipient for one version of a task."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task = models.ForeignKey(HumanTask, on_delete=models.CASCADE, related_name="email_links")
    recipient = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    task_version = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"link for {self.recipient} to #{self.task_id} v{self.task_version}"


class SavedFilter(models.Model):
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="saved_filters")
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=500)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="saved_filter_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Snooze(models.Model):
    """A reviewer hides a task from their lists until `until`."""

    task = models.ForeignKey(HumanTask, on_delete=models.CASCADE, related_name="snoozes")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    until = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "user"], name="snooze_unique_per_user"),
        ]

    def __str__(self) -> str:
        return f"#{self.task_id} snoozed by {self.user} until {self.until}"


class AuditCheckpoint(models.Model):
    """A signed note of the audit chain's head at a moment (see approvals.audit).

    It proves later that the chain then held `entries` entries ending in entry
    `entry_id` with hash `head`: deleting or rewriting any of them, even with the
    hashes recomputed, no longer matches it. Also exported, one signed JSON line
    each, to a file outside the database.
    """

    created_at = models.DateTimeField()
    entry_id = models.BigIntegerField(help_text=_("The newest audit entry it covers."))
    entries = models.PositiveBigIntegerField(help_text=_("How many chained entries up to it."))
    head = models.CharField(max_length=64, help_text=_("The chain's hash at that entry."))
    signature = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"checkpoint #{self.pk} ({self.created_at:%Y-%m-%d %H:%M:%S} UTC)"


class Notification(models.Model):
    """One thing a person should know: a task for them, a decision on their request.

    Shown in the app until read; emailed at once, in a daily digest, or not at all,
    as the person's `NotificationSettings` say (`emailed_at` records when).
    """

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=30, choices=NoticeKind.choices)
    text = models.CharField(max_length=300)
    # Where the reader goes to see it: a task's or a request's page (a path).
    url = models.CharField(max_length=300)
    task = models.ForeignKey(
        HumanTask, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField()
    read_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The list, newest first, and the unread count (capped), per reader.
            models.Index(fields=["user", "-created_at", "-id"], name="notification_list_idx"),
            models.Index(
                fields=["user", "-created_at"],
                condition=Q(read_at__isnull=True),
                name="notification_unread_idx",
            ),
            # The daily digest: what is still to be emailed.
            models.Index(
                fields=["user", "created_at"],
                condition=Q(emailed_at__isnull=True),
                name="notification_unsent_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.text}"


class Preferences(models.Model):
    """The language and time zone one person reads Baton in (no row, or a blank field:
    the browser's language and the site's time zone). approvals.preferences reads and
    saves them; config.locale applies them to each of the person's requests."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="preferences")
    language = models.CharField(_("language"), max_length=16, blank=True)
    time_zone = models.CharField(_("time zone"), max_length=64, blank=True)

    class Meta:
        verbose_name = _("preferences")
        verbose_name_plural = _("preferences")

    def __str__(self) -> str:
        return f"{self.user}: {self.language or '-'}, {self.time_zone or '-'}"


class NotificationSettings(models.Model):
    """How one person wants notifications emailed (no row: one email each)."""

    user = models.OneToOneField(
        User, on_delete=models.CASCADE, related_name="notification_settings"
    )
    email = models.CharField(max_length=20, choices=EmailMode.choices, default=EmailMode.IMMEDIATE)

    class Meta:
        verbose_name_plural = _("notification settings")

    def __str__(self) -> str:
        return f"{self.user}: {self.get_email_display()}"


def new_webhook_secret() -> str:
    """Return a fresh Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookEndpoint(models.Model):
    """An outside system's URL that hears about runs and tasks, signed with its secret."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    # Standard Webhooks' `whsec_<base64>`; shown to the operator who registers it.
    secret = models.CharField(max_length=100, default=new_webhook_secret)
    # The secret a rotation replaced, still signing beside the new one until
    # `previous_secret_until`, so the receiver can switch without losing a message.
    previous_secret = models.CharField(max_length=100, blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    # WebhookEvent values this endpoint subscribes to.
    event_types = models.JSONField(default=list)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.url

    def signing_secrets(self, now: datetime) -> list[str]:
        """The secrets a message sent at `now` is signed with: the current one, and the
        one a rotation replaced while its overlap lasts."""
        if self.previous_secret and self.previous_secret_until and now < self.previous_secret_until:
            return [self.secret, self.previous_secret]
        return [self.secret]


# A delivery run in one of these has stopped trying (until an operator retries it).
_GIVEN_UP_RUN_STATES = (RunState.FAILED, RunState.DEAD_LETTERED, RunState.CANCELLED)


class WebhookDelivery(models.Model):
    """One event for one endpoint: its signed message and how sending it went.

    The id is the message id (`webhook-id`), the same on every attempt and on a
    redelivery, so a receiver drops what it has seen. The attempts themselves are the
    steps of `run`, a `baton.webhook_delivery` run: retried and swept like any step.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_type = models.CharField(max_length=30, choices=WebhookEvent.choices)
    payload = models.JSONField()
    run = models.ForeignKey(
        WorkflowRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    attempts = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_response = models.CharField(max_length=500, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # An endpoint's delivery log, newest first.
            models.Index(
                fields=["endpoint", "-created_at", "-id"], name="webhook_delivery_log_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} to {self.endpoint_id}"

    @property
    def message_id(self) -> str:
        return f"msg_{self.id.hex}"

    @property
    def status(self) -> str:
        """Return delivered, failed (the delivery run gave up) or pending."""
        if self.delivered_at is not None:
            return "delivered"
        if self.run is not None and self.run.state in _GIVEN_UP_RUN_STATES:
            return "failed"
        return "pending"


def _attachment_path(attachment: Attachment, _name: str) -> str:
    """Where a file is stored: by request and its own id, never by the name it came with."""
    return f"attachments/{attachment.run_id}/{attachment.pk}"


class Attachment(models.Model):
    """A file attached to a request (its run) or to one of its tasks, kept through Django's
    storage. Its SHA-256 is written to the audit chain when it is attached, so a file
    swapped in storage afterwards is found (approvals.human_tasks.attachments)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="attachments")
    task = models.ForeignKey(
        HumanTask, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )
    uploaded_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    file = models.FileField(upload_to=_attachment_path, max_length=300)
    # As uploaded (cleaned), offered back as the download's name; never a storage path.
    name = models.CharField(max_length=200)
    # What its content is (not what its name says): see attachments.ACCEPTED.
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["run", "created_at"], name="attachment_run_time")]

    def __str__(self) -> str:
        return self.name


class SlaSnapshot(models.Model):
    """The SLA dashboard's numbers for operators, or for one set of groups a manager
    manages, as beat last computed them (approvals.console.sla_snapshot): the page
    reads one row, whatever the open work."""

    scope = models.CharField(max_length=40, primary_key=True)
    computed_at = models.DateTimeField()
    data = models.JSONField()

    def __str__(self) -> str:
        return f"SLA snapshot {self.scope} at {self.computed_at:%Y-%m-%d %H:%M:%S}"
