"""Sending one webhook: sign it (Standard Webhooks), refuse private targets (SSRF), POST it.

Each delivery is a run of the built-in `baton.webhook_delivery` type, whose one
activity is `deliver`: the engine retries it with backoff, the sweep takes it back
from a worker that died, and a delivery whose last attempt failed ends as a failed
run that an operator can retry from the console (or redeliver from the endpoint's
log). The message id (`webhook-id`) is the delivery's, the same on every attempt, so
a receiver can drop a message it has already seen: a worker killed after the POST
and before recording it sends the message again.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_lazy
from pydantic import BaseModel, ConfigDict
from standardwebhooks import Webhook

from approvals.models import WebhookDelivery
from workflows.activity import ActivityContext, NonRetryableError
from workflows.dsl import Activity, NoCompensation, RetryPolicy, Timeouts, Workflow

DELIVERY_TYPE = "baton.webhook_delivery"
# How long one POST may take, connecting and answering.
REQUEST_TIMEOUT_SECONDS = 10
# How much of a receiver's answer the delivery log keeps.
RESPONSE_EXCERPT_CHARS = 500


class RefusedAddress(NonRetryableError):
    """The target resolves to a private, loopback or otherwise internal address."""


class EndpointDisabled(NonRetryableError):
    """The endpoint was switched off or removed after the event."""


class DeliveryFailed(Exception):
    """The receiver did not answer 2xx, or could not be reached: tried again later."""


class DeliveryInput(BaseModel):
    """A delivery run's input: the delivery it sends (started by approvals.notify.webhooks)."""

    model_config = ConfigDict(extra="forbid")

    delivery_id: uuid.UUID


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


def signed_headers(
    *, secrets: list[str], message_id: str, at: datetime, body: str
) -> dict[str, str]:
    """Return the Standard Webhooks headers for `body`, signed with each of the endpoint's
    secrets (two while a rotation overlaps: the spec's space-separated signatures)."""
    signature = " ".join(Webhook(secret).sign(message_id, at, body) for secret in secrets)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": "Baton-Webhooks/1",
    }


def is_public_address(address: str) -> bool:
    """Return whether `address` (an IP) is one a webhook may reach in production."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def resolve_target(url: str, *, allow_private: bool) -> str:
    """Resolve `url`'s host now and return the address to connect to.

    Every address the name resolves to is checked, not only the first, and the
    connection is made to the checked address, so a name that answers differently
    the second time (DNS rebinding) cannot slip past. Raise RefusedAddress for a
    private, loopback, link-local or reserved one unless `allow_private`.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedAddress(f"{url!r} is not an http(s) URL.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise DeliveryFailed(f"{parts.hostname} does not resolve: {error}") from error
    addresses = [str(info[4][0]) for info in infos]
    if not allow_private:
        internal = sorted({address for address in addresses if not is_public_address(address)})
        if internal:
            raise RefusedAddress(
                f"{parts.hostname} resolves to {', '.join(internal)}, a private or internal "
                "address; set BATON_WEBHOOKS_ALLOW_PRIVATE=true to allow it."
            )
    return addresses[0]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, address: str, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, address: str, **kwargs: Any) -> None:
        super().__init__(host, context=ssl.create_default_context(), **kwargs)
        self.address = address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def post(url: str, *, body: str, headers: dict[str, str], allow_private: bool) -> Answer:
    """POST `body` to `url`, connecting only to the address `resolve_target` checked."""
    address = resolve_target(url, allow_private=allow_private)
    parts = urlsplit(url)
    connection_type = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    connection = connection_type(
        parts.hostname or "", port=parts.port, address=address, timeout=REQUEST_TIMEOUT_SECONDS
    )
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    try:
        connection.request("POST", path, body=body.encode(), headers=headers)
        response = connection.getresponse()
        text = response.read(RESPONSE_EXCERPT_CHARS * 4).decode("utf-8", "replace")
        return Answer(status=response.status, body=text[:RESPONSE_EXCERPT_CHARS])
    except OSError as error:
        raise DeliveryFailed(f"{parts.hostname}: {error}") from error
    finally:
        connection.close()


def message_body(delivery: WebhookDelivery) -> str:
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True)


def deliver(context: ActivityContext) -> dict[str, Any]:
    """Send one delivery (the activity): sign it now, POST it, record how it went."""
    try:
        delivery = WebhookDelivery.objects.select_related("endpoint").get(
            pk=context.input["delivery_id"]
        )
    except WebhookDelivery.DoesNotExist:
        raise EndpointDisabled("The delivery's endpoint was deleted.") from None
    if delivery.delivered_at is not None:
        # An attempt whose success was recorded but whose step was not (a worker died).
        return {"status": delivery.last_status_code, "delivered_at": str(delivery.delivered_at)}
    endpoint = delivery.endpoint
    if not endpoint.is_active:
        raise EndpointDisabled(f"The endpoint {endpoint.url} is switched off.")
    now = timezone.now()
    body = message_body(delivery)
    headers = signed_headers(
        secrets=endpoint.signing_secrets(now), message_id=delivery.message_id, at=now, body=body
    )
    try:
        answer = post(
            endpoint.url,
            body=body,
            headers=headers,
            allow_private=settings.BATON_WEBHOOKS_ALLOW_PRIVATE,
        )
    except (RefusedAddress, DeliveryFailed) as error:
        _record_attempt(delivery, now=now, status=None, text=str(error))
        raise
    delivered = 200 <= answer.status < 300
    _record_attempt(delivery, now=now, status=answer.status, text=answer.body, delivered=delivered)
    if not delivered:
        raise DeliveryFailed(f"{endpoint.url} answered {answer.status}.")
    return {"status": answer.status}


def _record_attempt(
    delivery: WebhookDelivery,
    *,
    now: datetime,
    status: int | None,
    text: str,
    delivered: bool = False,
) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        attempts=F("attempts") + 1,
        last_attempt_at=now,
        last_status_code=status,
        last_response=text[:RESPONSE_EXCERPT_CHARS],
        delivered_at=now if delivered else None,
    )


def delivery_workflow() -> Workflow:
    """Return the built-in delivery type, its retries as the settings say (read at start-up)."""
    return Workflow(
        name=DELIVERY_TYPE,
        version=1,
        start="deliver",
        title=gettext_lazy("webhook delivery"),
        description=gettext_lazy("Send one outbound webhook, retried with backoff."),
        input_schema=DeliveryInput,
        nodes=(
            Activity(
                "deliver",
                run=deliver,
                compensate=NoCompensation("a message sent cannot be unsent"),
                retry=RetryPolicy(
                    max_attempts=settings.BATON_WEBHOOKS_MAX_ATTEMPTS,
                    initial_interval=timedelta(seconds=settings.BATON_WEBHOOKS_RETRY_SECONDS),
                    backoff_coefficient=4.0,
                    max_interval=timedelta(hours=2),
                    non_retryable=("RefusedAddress", "EndpointDisabled"),
                ),
                # A POST's connect and answer each time out: a worker that died
                # mid-POST gives its delivery back soon after.
                timeouts=Timeouts(start_to_close=timedelta(seconds=REQUEST_TIMEOUT_SECONDS * 2)),
            ),
        ),
    )
