"""REST API v1 for what a person arranges for themselves (`/me`): notifications and how
they are emailed, saved inbox filters, and out of office.

Each endpoint calls the same function as the inbox's pages, so the rules and the
refusals are the same; the inbox's task actions are in approvals.inbox.api.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Router, Schema, Status
from pydantic import StrictInt

from approvals import human_tasks
from approvals.inbox.api import refusals_as_problems
from approvals.models import Notification, SavedFilter, Substitution
from approvals.notify import notifications
from approvals.states import Channel, EmailMode
from workflows.api import ERRORS, ApiIn, IsoDateTime, not_found

router = Router(tags=["me"])


# ---------------------------------------------------------------------------
# Notifications
# ---------------------------------------------------------------------------


class NotificationOut(Schema):
    id: int
    kind: str
    text: str
    url: str = Field(description="the page it tells of: a task's or a request's")
    task_id: UUID | None
    run_id: UUID | None
    created_at: datetime
    read_at: datetime | None


class NotificationsOut(Schema):
    unread: int = Field(
        description=f"unread notifications, counted up to {notifications.UNREAD_CAP}"
    )
    items: list[NotificationOut] = Field(
        description=f"the newest {notifications.LIST_SIZE}, newest first"
    )


class MarkReadIn(ApiIn):
    id: StrictInt | None = Field(None, ge=1, description="one notification; all when left out")


class MarkedOut(Schema):
    marked: int = Field(description="how many were unread and are now read")


class NotificationSettingsIn(ApiIn):
    email: EmailMode


class NotificationSettingsOut(Schema):
    email: str


def _notification_out(notice: Notification) -> dict[str, Any]:
    return {
        "id": notice.pk,
        "kind": notice.kind,
        "text": notice.text,
        "url": notice.url,
        "task_id": notice.task_id,
        "run_id": notice.run_id,
        "created_at": notice.created_at,
        "read_at": notice.read_at,
    }


@router.get(
    "/notifications", response={200: NotificationsOut, **ERRORS}, summary="My notifications"
)
def list_notifications(request: HttpRequest) -> dict[str, Any]:
    return {
        "unread": notifications.unread_count(user=request.user),
        "items": [_notification_out(n) for n in notifications.recent(user=request.user)],
    }


@router.post(
    "/notifications/read", response={200: MarkedOut, **ERRORS}, summary="Mark notifications read"
)
def mark_notifications_read(request: HttpRequest, body: MarkReadIn | None = None) -> dict:
    marked = notifications.mark_read(
        user=request.user, now=timezone.now(), notification_id=body.id if body else None
    )
    return {"marked": marked}


@router.get(
    "/notification-settings",
    response={200: NotificationSettingsOut, **ERRORS},
    summary="How my notifications are emailed",
)
def get_notification_settings(request: HttpRequest) -> dict[str, Any]:
    return {"email": notifications.email_mode(user=request.user)}


@router.put(
    "/notification-settings",
    response={200: NotificationSettingsOut, **ERRORS},
    summary="Choose how my notifications are emailed",
)
def set_notification_settings(request: HttpRequest, body: NotificationSettingsIn) -> dict:
    """`immediate`: one email each; `daily`: one digest a day; `off`: in the app only."""
    notifications.set_email_mode(user=request.user, mode=body.email)
    return {"email": body.email}


# ---------------------------------------------------------------------------
# Saved filters
# ---------------------------------------------------------------------------


class SavedFilterIn(ApiIn):
    name: str = Field(min_length=1, max_length=80)
    query: str = Field(
        "",
        max_length=500,
        description="the inbox's query string, as GET /tasks takes it: `tab=queue&sla=overdue`",
    )


class SavedFilterOut(Schema):
    id: int
    name: str
    query: str


def _filter_out(saved: SavedFilter) -> dict[str, Any]:
    return {"id": saved.pk, "name": saved.name, "query": saved.query}


@router.get(
    "/saved-filters", response={200: list[SavedFilterOut], **ERRORS}, summary="My saved filters"
)
def list_saved_filters(request: HttpRequest) -> list[dict[str, Any]]:
    return [_filter_out(saved) for saved in request.user.saved_filters.all()]


@router.post(
    "/saved-filters",
    response={201: SavedFilterOut, **ERRORS},
    summary="Save a filter (replacing one of that name)",
)
def save_filter(request: HttpRequest, body: SavedFilterIn) -> Status:
    with refusals_as_problems():
        saved = human_tasks.save_filter(user=request.user, name=body.name, query=body.query)
    return Status(201, _filter_out(saved))


@router.delete(
    "/saved-filters/{filter_id}", response={204: None, **ERRORS}, summary="Delete a saved filter"
)
def delete_saved_filter(request: HttpRequest, filter_id: int) -> Status:
    if not human_tasks.delete_filter(user=request.user, filter_id=filter_id):
        raise not_found("such saved filter")
    return Status(204, None)


# ---------------------------------------------------------------------------
# Out of office
# ---------------------------------------------------------------------------


class AwayIn(ApiIn):
    substitute: str = Field(min_length=1, max_length=150, description="a username")
    starts_at: IsoDateTime = Field(description="ISO 8601; UTC if no offset")
    ends_at: IsoDateTime = Field(description="ISO 8601; UTC if no offset")
    hand_over: bool = Field(
        False,
        description="also delegate every task I hold to the substitute now (I stay its "
        "owner); those they may not decide stay with me, and `kept` says why",
    )


class SubstitutionOut(Schema):
    id: int
    substitute: str
    starts_at: datetime
    ends_at: datetime


class KeptOut(Schema):
    task_id: UUID
    reason: str


class AwayOut(Schema):
    substitution: SubstitutionOut
    delegated: list[UUID] = Field(description="the tasks handed over")
    kept: list[KeptOut] = Field(description="the tasks that stayed with me, and why")


class AwayListOut(Schema):
    substitutions: list[SubstitutionOut]
    held: int = Field(description="how many tasks I hold, that `hand_over` would delegate")


def _substitution_out(line: Substitution) -> dict[str, Any]:
    return {
        "id": line.pk,
        "substitute": line.substitute.get_username(),
        "starts_at": line.starts_at,
        "ends_at": line.ends_at,
    }


@router.get("/away", response={200: AwayListOut, **ERRORS}, summary="My substitutions")
def list_away(request: HttpRequest) -> dict[str, Any]:
    lines = request.user.substitutions.select_related("substitute")
    return {
        "substitutions": [_substitution_out(line) for line in lines],
        "held": human_tasks.held_tasks(request.user).count(),
    }


@router.post("/away", response={201: AwayOut, **ERRORS}, summary="Set a substitute while I am away")
def set_away(request: HttpRequest, body: AwayIn) -> Status:
    """While away, new tasks assigned to me go to the substitute, and my groups' new tasks
    are announced to the members who are in; `hand_over` also delegates what I hold."""
    with refusals_as_problems():
        line = human_tasks.set_substitution(
            user=request.user,
            substitute_username=body.substitute,
            starts_at=body.starts_at,
            ends_at=body.ends_at,
        )
    handover = human_tasks.Handover()
    if body.hand_over:
        handover = human_tasks.hand_over_held_tasks(
            user=request.user, to_username=body.substitute, channel=Channel.API
        )
    return Status(
        201,
        {
            "substitution": _substitution_out(line),
            "delegated": [task.pk for task in handover.delegated],
            "kept": [{"task_id": task.pk, "reason": why} for task, why in handover.kept],
        },
    )
