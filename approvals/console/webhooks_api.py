"""REST API v1 for outbound webhooks: operators register endpoints, read their delivery
log and redeliver; the same use cases as the console's webhook pages.

403 for a caller who may not operate runs, 404 for an unknown endpoint or delivery,
422 for an event type Baton does not send or a URL that is not http(s).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from ninja import Field, Router, Schema, Status

from approvals.console import services
from approvals.models import WebhookDelivery, WebhookEndpoint
from approvals.notify import webhooks
from approvals.states import WebhookEvent
from workflows.api import ERRORS, ApiIn, ApiProblem, not_found

router = Router(tags=["webhooks"])
# The delivery log's page: the newest this many.
LOG_SIZE = 100


class EndpointIn(ApiIn):
    url: str = Field(max_length=500, description="where Baton POSTs, http(s)")
    event_types: list[WebhookEvent] = Field(min_length=1, max_length=len(WebhookEvent.values))
    description: str = Field("", max_length=200)


class EndpointChangeIn(ApiIn):
    event_types: list[WebhookEvent] | None = Field(None, min_length=1)
    is_active: bool | None = None


class EndpointOut(Schema):
    id: UUID
    url: str
    description: str
    event_types: list[str]
    is_active: bool
    created_at: datetime


class NewEndpointOut(EndpointOut):
    secret: str = Field(description="verify signatures with it (Standard Webhooks, whsec_…)")
    previous_secret_until: datetime | None = Field(
        description="after a rotation, messages are also signed with the old secret until then"
    )


class DeletedOut(Schema):
    cancelled_deliveries: int = Field(description="deliveries still trying, now cancelled")


class DeliveryOut(Schema):
    id: UUID
    message_id: str = Field(description="the webhook-id header, the same on every attempt")
    event_type: str
    status: str = Field(description="pending, delivered or failed")
    attempts: int
    last_attempt_at: datetime | None
    last_status_code: int | None
    last_response: str
    delivery_run: UUID | None = Field(description="the baton.webhook_delivery run sending it")
    payload: dict[str, Any]
    created_at: datetime

    @staticmethod
    def resolve_delivery_run(delivery: WebhookDelivery) -> UUID | None:
        return delivery.run_id


def _operator(request: HttpRequest) -> None:
    if refusal := services.operate_refusal(request.user, _("manage webhooks")):
        raise ApiProblem(403, _("Forbidden"), refusal)


def _endpoint(endpoint_id: UUID) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id).first()
    if endpoint is None:
        raise not_found(_("such webhook endpoint"))
    return endpoint


def _invalid(error: webhooks.InvalidEndpoint) -> ApiProblem:
    return ApiProblem(422, _("Invalid endpoint"), str(error))


@router.get("/endpoints", response={200: list[EndpointOut], **ERRORS}, summary="List endpoints")
def list_endpoints(request: HttpRequest) -> list[WebhookEndpoint]:
    _operator(request)
    return list(WebhookEndpoint.objects.all())


@router.post("/endpoints", response={201: NewEndpointOut, **ERRORS}, summary="Register an endpoint")
def register_endpoint(request: HttpRequest, body: EndpointIn) -> Status:
    """Register a URL for some event types; the answer holds its signing secret."""
    _operator(request)
    try:
        endpoint = webhooks.register_endpoint(
            url=body.url,
            event_types=[event.value for event in body.event_types],
            description=body.description,
            by=request.user,
            now=timezone.now(),
        )
    except webhooks.InvalidEndpoint as error:
        raise _invalid(error) from None
    return Status(201, endpoint)


@router.get(
    "/endpoints/{endpoint_id}",
    response={200: NewEndpointOut, **ERRORS},
    summary="Show an endpoint and its secret",
)
def show_endpoint(request: HttpRequest, endpoint_id: UUID) -> WebhookEndpoint:
    _operator(request)
    return _endpoint(endpoint_id)


@router.patch(
    "/endpoints/{endpoint_id}",
    response={200: EndpointOut, **ERRORS},
    summary="Change an endpoint's event types, or switch it off or on",
)
def change_endpoint(request: HttpRequest, endpoint_id: UUID, body: EndpointChangeIn):
    _operator(request)
    _endpoint(endpoint_id)
    try:
        return webhooks.update_endpoint(
            endpoint_id=endpoint_id,
            event_types=None
            if body.event_types is None
            else [event.value for event in body.event_types],
            is_active=body.is_active,
        )
    except webhooks.InvalidEndpoint as error:
        raise _invalid(error) from None


@router.post(
    "/endpoints/{endpoint_id}/rotate-secret",
    response={200: NewEndpointOut, **ERRORS},
    summary="Give an endpoint a new signing secret",
)
def rotate_secret(request: HttpRequest, endpoint_id: UUID) -> WebhookEndpoint:
    """The answer holds the new secret. Messages carry a signature by the old one too
    until `previous_secret_until` (BATON_WEBHOOKS_SECRET_OVERLAP_HOURS), so the receiver
    can switch without refusing any."""
    _operator(request)
    try:
        return webhooks.rotate_secret(endpoint_id=endpoint_id, now=timezone.now())
    except WebhookEndpoint.DoesNotExist:
        raise not_found(_("such webhook endpoint")) from None


@router.delete(
    "/endpoints/{endpoint_id}",
    response={200: DeletedOut, **ERRORS},
    summary="Delete an endpoint and its delivery log",
)
def delete_endpoint(request: HttpRequest, endpoint_id: UUID) -> dict[str, int]:
    """Deliveries still trying are cancelled; delivered ones are forgotten with the log."""
    _operator(request)
    try:
        deleted = webhooks.delete_endpoint(endpoint_id=endpoint_id, now=timezone.now())
    except WebhookEndpoint.DoesNotExist:
        raise not_found(_("such webhook endpoint")) from None
    return {"cancelled_deliveries": deleted.cancelled_deliveries}


@router.get(
    "/endpoints/{endpoint_id}/deliveries",
    response={200: list[DeliveryOut], **ERRORS},
    summary="An endpoint's delivery log, newest first",
)
def deliveries(request: HttpRequest, endpoint_id: UUID) -> list[WebhookDelivery]:
    _operator(request)
    return webhooks.delivery_log(endpoint=_endpoint(endpoint_id), limit=LOG_SIZE)


@router.post(
    "/deliveries/{delivery_id}/redeliver",
    response={202: DeliveryOut, **ERRORS},
    summary="Send a delivery again, under the same message id",
)
def redeliver(request: HttpRequest, delivery_id: UUID) -> Status:
    _operator(request)
    if not WebhookDelivery.objects.filter(pk=delivery_id).exists():
        raise not_found(_("such webhook delivery"))
    return Status(202, webhooks.redeliver(delivery_id=delivery_id))
