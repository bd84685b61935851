"""Demo inventory, payment, shipping and notification services.

Each applies its effect once per idempotency key, however often it is asked, and
counts every request: the ledger is how tests and operators see that a retried or
redelivered step did not act twice. A run's input can ask a service to misbehave
(`"simulate": {"payment": "flaky"}`) for demos and tests.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows.activity import ActivityContext, NonRetryableError
from workflows.examples.models import ServiceEffect

# How a simulated slow service behaves: total time, and the heartbeat between naps.
SLOW_SECONDS = 6.0
SLOW_HEARTBEAT_EVERY = 0.5


class ServiceUnavailable(Exception):
    """A passing fault: the call may succeed if tried again."""


class PaymentDeclined(NonRetryableError):
    """The card was declined: no retry can change that."""


def call(
    *,
    service: str,
    action: str,
    context: ActivityContext,
    behaviour: str | None,
    data: dict[str, Any],
) -> dict[str, Any]:
    """Ask `service` to do `action` once for the step's idempotency key; return the effect.

    `behaviour` is what the run asked of this service: None (behave), "flaky" (fail
    the first two requests), "outage" (fail the first three), "fail" (always fail),
    "decline" (refuse for good), "slow" (apply, then take SLOW_SECONDS to answer,
    with heartbeats).
    """
    _misbehave(service, action, behaviour, _count_request(service, action, context))
    effect = _apply_once(service, action, context, data)
    if behaviour == "slow":
        deadline = time.monotonic() + SLOW_SECONDS
        while time.monotonic() < deadline:
            time.sleep(SLOW_HEARTBEAT_EVERY)
            context.heartbeat()
    return effect


def undo(
    *,
    service: str,
    action: str,
    undoes: str,
    context: ActivityContext,
    behaviour: str | None,
) -> dict[str, Any]:
    """Undo the `undoes` effect applied under the compensated step's key, once.

    A step may be compensated without a result (it timed out or was cancelled
    mid-flight): the service looks up what it applied itself, and if it applied
    nothing there is nothing to undo.
    """
    _misbehave(service, action, behaviour, _count_request(service, action, context))
    original = ServiceEffect.objects.filter(
        service=service,
        action=undoes,
        idempotency_key=context.undoes_key,
        applied_at__isnull=False,
    ).first()
    if original is None:
        return {"nothing_to_undo": True}
    return _apply_once(service, action, context, {"undoes": original.pk})


def _misbehave(service: str, action: str, behaviour: str | None, requests: int) -> None:
    if behaviour == "decline":
        raise PaymentDeclined(f"{service} declined the {action}")
    if (
        behaviour == "fail"
        or (behaviour == "flaky" and requests <= 2)
        or (behaviour == "outage" and requests <= 3)
    ):
        raise ServiceUnavailable(f"{service} is unavailable (request {requests})")


def _count_request(service: str, action: str, context: ActivityContext) -> int:
    with transaction.atomic():
        entry, _ = ServiceEffect.objects.select_for_update().get_or_create(
            service=service,
            action=action,
            idempotency_key=context.idempotency_key,
            defaults={"run_id": context.run_id},
        )
        entry.requests_seen += 1
        entry.save(update_fields=["requests_seen"])
    return entry.requests_seen


def _apply_once(
    service: str, action: str, context: ActivityContext, data: dict[str, Any]
) -> dict[str, Any]:
    with transaction.atomic():
        entry = ServiceEffect.objects.select_for_update().get(
            service=service, action=action, idempotency_key=context.idempotency_key
        )
        if entry.applied_at is None:
            entry.applied_at = timezone.now()
            entry.data = data
            entry.save(update_fields=["applied_at", "data"])
    return {"effect_id": entry.pk, **entry.data}
