"""The `order` saga: validate, reserve stock, charge, ship, notify; undo in reverse on failure."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from pydantic import BaseModel, ConfigDict, Field

from workflows import personal, registry
from workflows.activity import ActivityContext, NonRetryableError
from workflows.dsl import ANYONE, Activity, NoCompensation, RetryPolicy, Timeouts, Workflow
from workflows.examples import services
from workflows.examples.fields import Amount, Currency, Email
from workflows.personal import PERSONAL

Behaviour = Literal["flaky", "outage", "fail", "decline", "slow"]
SimulatedService = Literal[
    "inventory", "payment", "shipping", "notification", "release", "refund", "cancel_shipment"
]


class OrderItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: str = Field(
        min_length=1,
        max_length=64,
        title=_("SKU"),
        description=_("the stock-keeping unit, e.g. BOOK-1"),
    )
    quantity: int = Field(ge=1, le=10_000, title=_("Quantity"))


class OrderInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(
        min_length=1,
        max_length=100,
        title=_("Order id"),
        description=_("the shop's reference for it, e.g. A-1001"),
    )
    # Personal: sealed at rest, and erased with `manage.py erase_personal_data`.
    customer_email: Email = Field(title=_("Customer email"), json_schema_extra=PERSONAL)
    items: list[OrderItem] = Field(min_length=1, max_length=100, title=_("Items"))
    amount: Amount = Field(title=_("Amount"))
    currency: Currency = Field(title=_("Currency"))
    simulate: dict[SimulatedService, Behaviour] = Field(
        default_factory=dict,
        title=_("Simulate"),
        description=_("make the demo services misbehave (for the demo only)"),
    )


class InvalidOrder(NonRetryableError):
    pass


def _behaviour(context: ActivityContext, service: str) -> str | None:
    return context.input.get("simulate", {}).get(service)


def validate_order(context: ActivityContext) -> dict[str, Any]:
    items = context.input["items"]
    skus = [item["sku"] for item in items]
    if len(set(skus)) != len(skus):
        raise InvalidOrder("an order lists each SKU once")
    return {"item_count": sum(item["quantity"] for item in items)}


def reserve_inventory(context: ActivityContext) -> dict[str, Any]:
    return services.call(
        service="inventory",
        action="reserve",
        context=context,
        behaviour=_behaviour(context, "inventory"),
        data={"items": context.input["items"]},
    )


def release_inventory(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="inventory",
        action="release",
        undoes="reserve",
        context=context,
        behaviour=_behaviour(context, "release"),
    )


def charge_payment(context: ActivityContext) -> dict[str, Any]:
    return services.call(
        service="payments",
        action="charge",
        context=context,
        behaviour=_behaviour(context, "payment"),
        data={"amount": context.input["amount"], "currency": context.input["currency"]},
    )


def refund_payment(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="payments",
        action="refund",
        undoes="charge",
        context=context,
        behaviour=_behaviour(context, "refund"),
    )


def ship(context: ActivityContext) -> dict[str, Any]:
    return services.call(
        service="shipping",
        action="ship",
        context=context,
        behaviour=_behaviour(context, "shipping"),
        data={"order_id": context.input["order_id"]},
    )


def cancel_shipment(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="shipping",
        action="cancel",
        undoes="ship",
        context=context,
        behaviour=_behaviour(context, "cancel_shipment"),
    )


def notify_customer(context: ActivityContext) -> dict[str, Any]:
    effect = services.call(
        service="notifications",
        action="notify",
        context=context,
        behaviour=_behaviour(context, "notification"),
        data={"to": context.input["customer_email"], "template": "order_shipped"},
    )
    # The address is personal: the step's result keeps it sealed, as the input does.
    return {**effect, "to": personal.seal(effect["to"])}


SERVICE_RETRY = RetryPolicy(
    max_attempts=4,
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    max_interval=timedelta(seconds=30),
)
UNDO_RETRY = RetryPolicy(max_attempts=3, initial_interval=timedelta(seconds=1))
SERVICE_TIMEOUTS = Timeouts(start_to_close=timedelta(minutes=2), heartbeat=timedelta(seconds=3))

ORDER = Workflow(
    name="order",
    version=1,
    title=_("order"),
    description=_("Reserve stock, charge, ship and notify; on failure undo in reverse order."),
    input_schema=OrderInput,
    # Orders come from the shop's systems, and from anyone taking one by phone.
    starters=ANYONE,
    # Not the customer's email: it is personal, sealed at rest, so no index can match it.
    searchable=("order_id",),
    start="validate",
    nodes=(
        Activity(
            "validate",
            label=pgettext_lazy("workflow step", "Check the order"),
            run=validate_order,
            next="reserve_inventory",
            mutating=False,
        ),
        Activity(
            "reserve_inventory",
            label=pgettext_lazy("workflow step", "Reserve stock"),
            run=reserve_inventory,
            compensate=release_inventory,
            next="charge_payment",
            retry=SERVICE_RETRY,
            compensation_retry=UNDO_RETRY,
            timeouts=SERVICE_TIMEOUTS,
        ),
        Activity(
            "charge_payment",
            label=pgettext_lazy("workflow step", "Charge the payment"),
            run=charge_payment,
            compensate=refund_payment,
            next="ship",
            retry=SERVICE_RETRY,
            compensation_retry=UNDO_RETRY,
            timeouts=SERVICE_TIMEOUTS,
        ),
        Activity(
            "ship",
            label=pgettext_lazy("workflow step", "Ship"),
            run=ship,
            compensate=cancel_shipment,
            next="notify_customer",
            retry=SERVICE_RETRY,
            compensation_retry=UNDO_RETRY,
            timeouts=SERVICE_TIMEOUTS,
        ),
        Activity(
            "notify_customer",
            label=pgettext_lazy("workflow step", "Notify the customer"),
            run=notify_customer,
            compensate=NoCompensation("an email once sent cannot be unsent; it is the last step"),
            retry=SERVICE_RETRY,
            timeouts=SERVICE_TIMEOUTS,
            local=True,
        ),
    ),
)

registry.register(ORDER)
