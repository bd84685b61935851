"""Outbound webhooks: register endpoints, turn run and task events into deliveries.

An event becomes one `WebhookDelivery` and one `baton.webhook_delivery` run per
subscribed endpoint, inside the transaction that made the event (an outbox): if
that transaction rolls back, nothing is sent; once it commits, the engine owns the
delivery and retries it like any step (see webhook_delivery). The engine's run
hooks and the human-task use cases call the `runs_*` and `task_*` functions here.

Each process remembers which event types any active endpoint subscribes to, read again
every BATON_WEBHOOKS_REFRESH_SECONDS (and at once after a change made in the same
process): an event nobody subscribes to costs no statement, so a step that starts or
ends a run is as cheap as before while no endpoint listens. A new endpoint hears the
events other processes make from their next read on.

Order is not kept per endpoint: each delivery is its own run, so a message that is
being retried does not hold back the ones after it. Receivers order by the
payload's `timestamp` and drop repeats by the `webhook-id` header.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from time import monotonic
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from approvals.models import HumanTask, WebhookDelivery, WebhookEndpoint, new_webhook_secret
from approvals.notify.webhook_delivery import DELIVERY_TYPE
from approvals.states import WebhookEvent
from workflows import engine
from workflows.models import WorkflowRun
from workflows.states import LIVE_RUN_STATES, EventKind

# How a run's last event maps to the webhook that tells of it.
_RUN_ENDINGS = {
    EventKind.COMPLETED: WebhookEvent.RUN_ENDED,
    EventKind.CANCELLED: WebhookEvent.RUN_ENDED,
    EventKind.FAILED: WebhookEvent.RUN_FAILED,
    EventKind.COMPENSATED: WebhookEvent.RUN_FAILED,
    EventKind.DEAD_LETTERED: WebhookEvent.RUN_FAILED,
}


# What this process last read: the event types any active endpoint subscribes to, and
# when (time.monotonic(); None: read them at the next event).
_subscriptions: dict[str, Any] = {"events": frozenset(), "read_at": None}


class InvalidEndpoint(ValueError):
    """What an operator asked to register cannot be an endpoint."""


# ---------------------------------------------------------------------------
# Endpoints
# ---------------------------------------------------------------------------


def register_endpoint(
    *, url: str, event_types: Iterable[str], description: str = "", by: Any, now: datetime
) -> WebhookEndpoint:
    """Register an endpoint for `event_types`, with a fresh signing secret."""
    endpoint = WebhookEndpoint(
        url=url.strip(),
        description=description.strip(),
        event_types=_checked_event_types(event_types),
        created_by=by,
        created_at=now,
    )
    _check_url(endpoint.url)
    endpoint.save()
    forget_subscriptions()
    return endpoint


def update_endpoint(
    *, endpoint_id: uuid.UUID, event_types: Iterable[str] | None = None, is_active: bool | None
) -> WebhookEndpoint:
    """Change what an endpoint subscribes to, or switch it off or on."""
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)
        if event_types is not None:
            endpoint.event_types = _checked_event_types(event_types)
        if is_active is not None:
            endpoint.is_active = is_active
        endpoint.save()
    forget_subscriptions()
    return endpoint


def rotate_secret(*, endpoint_id: uuid.UUID, now: datetime) -> WebhookEndpoint:
    """Give an endpoint a fresh secret. The old one goes on signing beside it for
    BATON_WEBHOOKS_SECRET_OVERLAP_HOURS (Standard Webhooks' several signatures), so the
    receiver can take the new one without refusing a message on the way."""
    overlap = timedelta(hours=settings.BATON_WEBHOOKS_SECRET_OVERLAP_HOURS)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)
        endpoint.previous_secret = endpoint.secret if overlap else ""
        endpoint.previous_secret_until = now + overlap if overlap else None
        endpoint.secret = new_webhook_secret()
        endpoint.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return endpoint


class Deleted(NamedTuple):
    url: str
    cancelled_deliveries: int


def delete_endpoint(*, endpoint_id: uuid.UUID, now: datetime) -> Deleted:
    """Delete an endpoint and its delivery log; cancel the deliveries still trying.

    A delivery whose attempt is under way when this
    commits finds its row gone and gives up (webhook_delivery.EndpointDisabled).
    """
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)
        trying = WorkflowRun.objects.filter(
            pk__in=endpoint.deliveries.values("run_id"), state__in=LIVE_RUN_STATES
        ).values_list("pk", flat=True)
        cancelled = 0
        for run_id in trying:
            try:
                engine.cancel_run(run_id=run_id, now=now)
            except engine.RunAlreadyEnded:
                continue  # it ended, or is undoing, since the query read it
            cancelled += 1
        endpoint.delete()
    forget_subscriptions()
    return Deleted(url=endpoint.url, cancelled_deliveries=cancelled)


def _checked_event_types(event_types: Iterable[str]) -> list[str]:
    chosen = sorted(set(event_types))
    unknown = [name for name in chosen if name not in WebhookEvent.values]
    if unknown:
        raise InvalidEndpoint(
            ngettext(
                "Unknown event type %(unknown)s; choose from %(known)s.",
                "Unknown event types %(unknown)s; choose from %(known)s.",
                len(unknown),
            )
            % {"unknown": ", ".join(unknown), "known": ", ".join(WebhookEvent.values)}
        )
    if not chosen:
        raise InvalidEndpoint(gettext("Choose at least one event type."))
    return chosen


def _check_url(url: str) -> None:
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError as error:
        raise InvalidEndpoint(
            gettext("%(url)s is not an http(s) URL.") % {"url": repr(url)}
        ) from error


# ---------------------------------------------------------------------------
# Events into deliveries
# ---------------------------------------------------------------------------


def forget_subscriptions() -> None:
    """Read the subscriptions again at the next event (an endpoint changed)."""
    _subscriptions["read_at"] = None


def remember_subscriptions(events: frozenset[str]) -> None:
    """Take `events` as what endpoints subscribe to, as if just read (for tests)."""
    _subscriptions.update(events=frozenset(events), read_at=monotonic())


def _may_be_subscribed(event_type: WebhookEvent) -> bool:
    refresh = settings.BATON_WEBHOOKS_REFRESH_SECONDS
    if refresh <= 0:
        return True
    read_at = _subscriptions["read_at"]
    if read_at is None or monotonic() - read_at >= refresh:
        active = WebhookEndpoint.objects.filter(is_active=True)
        remember_subscriptions(
            frozenset(
                name for types in active.values_list("event_types", flat=True) for name in types
            )
        )
    return event_type.value in _subscriptions["events"]


def emit(*, event_type: WebhookEvent, data: dict[str, Any], now: datetime) -> list[WebhookDelivery]:
    """Start one delivery per active endpoint subscribed to `event_type`, in the
    caller's transaction; return them (none, and no statement, while nobody subscribes)."""
    if not _may_be_subscribed(event_type):
        return []
    endpoints = list(
        WebhookEndpoint.objects.filter(is_active=True, event_types__contains=[event_type.value])
    )
    return [_deliver(endpoint, event_type, data, now) for endpoint in endpoints]


def _deliver(
    endpoint: WebhookEndpoint, event_type: WebhookEvent, data: dict[str, Any], now: datetime
) -> WebhookDelivery:
    delivery = WebhookDelivery(
        endpoint=endpoint,
        event_type=event_type,
        payload={"type": event_type.value, "timestamp": now.isoformat(), "data": data},
        created_at=now,
    )
    delivery.run = _start_delivery_run(delivery, now)
    delivery.save(force_insert=True)
    return delivery


def _start_delivery_run(delivery: WebhookDelivery, now: datetime) -> WorkflowRun:
    run, _ = engine.start_workflow(
        workflow_type=DELIVERY_TYPE,
        input={"delivery_id": str(delivery.id)},
        correlation_id=delivery.message_id,
        now=now,
    )
    return run


def delivery_log(*, endpoint: WebhookEndpoint, limit: int) -> list[WebhookDelivery]:
    """Return an endpoint's newest deliveries with their runs (webhook_delivery_log_idx)."""
    return list(endpoint.deliveries.select_related("run").order_by("-created_at", "-id")[:limit])


def redeliver(*, delivery_id: uuid.UUID, now: datetime | None = None) -> WebhookDelivery:
    """Send a delivery again, with the same message id, as a new delivery run."""
    now = now or timezone.now()
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().get(pk=delivery_id)
        delivery.delivered_at = None
        delivery.run = _start_delivery_run(delivery, now)
        delivery.save(update_fields=["delivered_at", "run"])
    return delivery


def runs_started(*, started: Sequence[WorkflowRun], now: datetime) -> None:
    """Tell of runs started (the engine's run-start hook); deliveries tell of nothing."""
    for run in started:
        if run.workflow_type != DELIVERY_TYPE:
            emit(event_type=WebhookEvent.RUN_STARTED, data=run_data(run), now=now)


def runs_ended(*, ended: Sequence[tuple[WorkflowRun, str]], now: datetime) -> None:
    """Tell of runs ended or failed (the engine's run-end hook)."""
    for run, kind in ended:
        if run.workflow_type != DELIVERY_TYPE and kind in _RUN_ENDINGS:
            emit(event_type=_RUN_ENDINGS[EventKind(kind)], data=run_data(run), now=now)


def task_opened(*, task: HumanTask, now: datetime) -> None:
    emit(event_type=WebhookEvent.TASK_OPENED, data=task_data(task), now=now)


def task_decided(*, task: HumanTask, now: datetime) -> None:
    emit(event_type=WebhookEvent.TASK_DECIDED, data=task_data(task), now=now)


def task_escalated(*, task: HumanTask, now: datetime) -> None:
    emit(event_type=WebhookEvent.TASK_ESCALATED, data=task_data(task), now=now)


def run_data(run: WorkflowRun) -> dict[str, Any]:
    return {
        "run_id": str(run.pk),
        "workflow_type": run.workflow_type,
        "workflow_version": run.workflow_version,
        "state": run.state,
        "correlation_id": run.correlation_id,
    }


def task_data(task: HumanTask) -> dict[str, Any]:
    return {
        "task_id": str(task.pk),
        "run_id": str(task.run_id),
        "workflow_type": task.workflow_type,
        "node": task.node,
        "title": task.title,
        "state": task.state,
        "outcome": task.outcome or None,
        "decided_by": task.decided_by.get_username() if task.decided_by_id else None,
        "escalation_level": task.escalation_level,
    }
