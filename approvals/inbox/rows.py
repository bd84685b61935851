"""The inbox's rows: what each one shows, and its HTML, kept for when the same row comes back.

The `task-row` partial of approvals/inbox/inbox.html draws a row from an `InboxRow`
alone: the values the row shows, with nothing else in its context (no request,
no user, no task object, no CSRF token). A row holds no form of its own: its
actions are buttons of the one form around the table (`formaction`, and `hx-post`
for htmx), which carries the page's one CSRF token and the shared snooze choice.
A row's HTML therefore follows from its `InboxRow`, the active time zone and
language, and nothing else.

Each process keeps the HTML of the rows it drew lately, keyed on all of those, and
reuses it when the same key comes back, as it does on every poll of an open
inbox. A kept row is never stale nor someone else's: its key holds every value
its template can read, and equal keys draw equal HTML, whoever asks.
BATON_INBOX_ROW_CACHE turns the keeping off (every row drawn afresh).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.template.loader import get_template
from django.urls import reverse
from django.utils import dateformat, timezone, translation
from django.utils.safestring import SafeString, mark_safe

from approvals import task_forms
from approvals.escalation import sla
from approvals.models import HumanTask
from approvals.states import Priority, Sla, TaskKind, TaskState

TEMPLATE = "approvals/inbox/inbox.html#task-row"
# About a hundred pages of 25 rows: a few MB per process (1 kB of HTML and its key a row).
KEPT_ROWS = 2500

_LINKS = ("task", "claim", "approve", "snooze")
_ANY_TASK = UUID(int=0)
# What get_state_display and get_priority_display say, without flattening the
# field's choices again for every row.
_STATE_LABELS = dict(TaskState.choices)
_PRIORITY_LABELS = dict(Priority.choices)


@dataclass(frozen=True)
class InboxRow:
    """Everything a row of the inbox shows, and all its template may read."""

    task_id: str
    version: int
    title: str
    kind: str
    state: str
    state_label: str
    is_live: bool
    outcome: str
    workflow_type: str
    priority_label: str
    due_at: datetime | None
    sla: Sla
    assignee: str
    owner: str
    substitute_for: str
    # Whether the viewer is the one who decides it (approvals.inbox.selectors.decides_in_tab).
    decides: bool
    # Why separation of duties keeps the viewer from deciding it ("" if it does not).
    barred: str
    # Approving needs its form filled in on the task's page, not a one-click row.
    needs_form: bool
    task_url: str
    claim_url: str
    approve_url: str
    snooze_url: str

    # What the template decides from the values above, decided here once per row: a row
    # drawn afresh spent most of its time in the template's conditions and lookups.
    @functools.cached_property
    def actions(self) -> str:
        """Which actions the row offers: "decide", "revision" (the requester's), "barred",
        "watch" (someone else decides it), or "" once it is finished."""
        if not self.is_live:
            return ""
        if self.kind == TaskKind.REVISION:
            return "revision"
        if self.barred:
            return "barred"
        return "decide" if self.decides else "watch"

    @functools.cached_property
    def selectable(self) -> bool:
        """Whether bulk approval may take it: the viewer decides it in one click."""
        return self.actions == "decide" and not self.needs_form


def rows_for(
    tasks: list[HumanTask], *, now: datetime, barred: dict[UUID, str], decides: dict[UUID, bool]
) -> list[InboxRow]:
    """Return the row of each task. `barred` says why separation of duties keeps the
    viewer from deciding a task ("" if it does not), `decides` whether the viewer is
    the one who decides it at all. The tasks' assignee, owner, substitute_for and run
    should come with them (select_related), or each costs a query.

    URLs are reversed once and filled in per row: six {% url %} tags in each of 25
    rows took a fifth of the page."""
    links = {name: reverse(f"approvals:{name}", args=[_ANY_TASK]) for name in _LINKS}
    any_task = str(_ANY_TASK)
    rows = []
    for task in tasks:
        task_id = str(task.pk)
        urls = {name: url.replace(any_task, task_id) for name, url in links.items()}
        rows.append(
            InboxRow(
                task_id=task_id,
                version=task.version,
                title=task.title,
                kind=task.kind,
                state=task.state,
                state_label=_STATE_LABELS.get(task.state, task.state),
                is_live=task.is_live,
                outcome=task.outcome,
                workflow_type=task.workflow_type,
                priority_label=_PRIORITY_LABELS.get(task.priority, str(task.priority)),
                due_at=task.due_at,
                sla=sla(due_at=task.due_at, now=now),
                assignee=_username(task.assignee),
                owner=_username(task.owner),
                substitute_for=_username(task.substitute_for),
                decides=decides.get(task.pk, False),
                barred=barred.get(task.pk, ""),
                needs_form=_needs_form(task),
                task_url=urls["task"],
                claim_url=urls["claim"],
                approve_url=urls["approve"],
                snooze_url=urls["snooze"],
            )
        )
    return rows


def html(rows: list[InboxRow]) -> SafeString:
    """Return the rows' HTML, drawing only those this process has not drawn lately
    (all of them when BATON_INBOX_ROW_CACHE is off)."""
    time_zone, language = timezone.get_current_timezone_name(), translation.get_language()
    draw = _kept if settings.BATON_INBOX_ROW_CACHE else _afresh
    return mark_safe("".join(draw(row, time_zone, language) for row in rows))  # nosec B308 B703 # drawn escaped


def html_of_one(row: InboxRow, *, error: str, done: str) -> SafeString:
    """Return one row's HTML with a message in it (after an action), drawn afresh."""
    return _draw(row, error=error, done=done)


@functools.lru_cache(maxsize=KEPT_ROWS)
def _kept(row: InboxRow, time_zone: str, language: str) -> str:
    # The time zone and language are the active ones: they are in the key because
    # the due time's text follows them.
    return _draw(row, error="", done="")


def _afresh(row: InboxRow, time_zone: str, language: str) -> str:
    return _draw(row, error="", done="")


def _draw(row: InboxRow, *, error: str, done: str) -> SafeString:
    # No request: a plain context, without context processors, holding only these. The
    # due time is written here in the active time zone, as the `date` filter would.
    context: dict[str, Any] = {
        "row": row,
        "due": _due(row.due_at),
        "error": error,
        "done": done,
    }
    return get_template(TEMPLATE).render(context)


def _due(due_at: datetime | None) -> tuple[str, str] | None:
    """The due time as the row shows it: ISO 8601 for the machine, short for the reader."""
    if due_at is None:
        return None
    local = timezone.localtime(due_at)
    return local.isoformat(), dateformat.format(local, "M j, H:i")


@receiver(setting_changed)
def _forget_kept_rows(**kwargs: Any) -> None:
    """Settings change in tests only, and some (USE_THOUSAND_SEPARATOR, TEMPLATES) change
    how a row is drawn: drop what was kept."""
    _kept.cache_clear()


def _username(user: Any) -> str:
    return user.username if user is not None else ""


def _needs_form(task: HumanTask) -> bool:
    node = task_forms.approval_of(task)
    return bool(node and node.form_is_required)
