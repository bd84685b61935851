"""The shipped workflow types that stop for people: `expense` and `vendor_onboarding`."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth import get_user_model
from pydantic import BaseModel, ConfigDict, Field, field_validator

from approvals.models import ReportingLine
from workflows import registry
from workflows.activity import ActivityContext, NonRetryableError
from workflows.calendars import BusinessTime
from workflows.dsl import (
    Activity,
    Approval,
    Branch,
    Escalation,
    GoBack,
    Join,
    NoCompensation,
    Parallel,
    RetryPolicy,
    Revise,
    RunData,
    Workflow,
)
from workflows.examples import services
from workflows.examples.fields import Amount, Currency, Email

RETRY = RetryPolicy(max_attempts=4, initial_interval=timedelta(seconds=1))

# ---------------------------------------------------------------------------
# expense
# ---------------------------------------------------------------------------


class ExpenseInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requester: str = Field(
        min_length=1, max_length=150, description="the username of whom it is for, e.g. alice"
    )
    title: str = Field(min_length=1, max_length=120, description="what it was for")
    amount: Amount
    currency: Currency
    description: str = Field(
        default="", max_length=2000, description="anything your approvers should know"
    )

    @field_validator("requester")
    @classmethod
    def requester_has_a_manager(cls, value: str) -> str:
        user = get_user_model().objects.filter(username=value, is_active=True).first()
        if user is None:
            raise ValueError(f"no active user called {value!r}")
        if not ReportingLine.objects.filter(user=user).exists():
            raise ValueError(f"{value} has no manager to approve it (set a reporting line)")
        return value


class NoManager(NonRetryableError):
    pass


def submit_expense(context: ActivityContext) -> dict[str, Any]:
    line = (
        ReportingLine.objects.select_related("manager")
        .filter(user__username=context.input["requester"])
        .first()
    )
    if line is None:
        raise NoManager(f"{context.input['requester']} has no manager")
    return {"manager": line.manager.get_username()}


def pay_expense(context: ActivityContext) -> dict[str, Any]:
    finance = RunData(input=context.input, results=context.results).form_values("finance_approval")
    return services.call(
        service="payments",
        action="pay",
        context=context,
        behaviour=None,
        data={
            "to": context.input["requester"],
            "amount": context.input["amount"],
            "currency": context.input["currency"],
            # Charged where finance said; below the threshold, the default cost centre.
            "cost_centre": finance.get("cost_centre"),
        },
    )


def reverse_payment(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="payments", action="reverse", undoes="pay", context=context, behaviour=None
    )


def notify_requester(context: ActivityContext) -> dict[str, Any]:
    approved = "pay" in context.results
    return services.call(
        service="notifications",
        action="notify",
        context=context,
        behaviour=None,
        data={"to": context.input["requester"], "outcome": "paid" if approved else "rejected"},
    )


class FinanceApprovalForm(BaseModel):
    """What finance records to approve an expense: where it is charged."""

    model_config = ConfigDict(extra="forbid")

    cost_centre: str = Field(
        min_length=1,
        max_length=20,
        pattern=r"^[A-Z]{2,4}-[0-9]{3,6}$",
        description="the cost centre to charge, e.g. FIN-1200",
    )


def _manager_of(data: RunData) -> list[str]:
    return [data.results["submit"]["manager"]]


def _expense_title(data: RunData) -> str:
    return (
        f"Expense: {data.input['title']} — {data.input['amount']} {data.input['currency']} "
        f"({data.input['requester']})"
    )


def _needs_finance(data: RunData) -> bool:
    return Decimal(data.input["amount"]) > Decimal(settings.BATON_EXPENSE_FINANCE_THRESHOLD)


def _escalate_after() -> BusinessTime:
    # Business days: a Friday afternoon's expense escalates on Tuesday, not on Sunday.
    return BusinessTime(days=settings.BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS)


# Rounds of each approval: the first, and up to two more after requests for changes.
EXPENSE_ROUNDS = 3

EXPENSE = Workflow(
    name="expense",
    version=1,
    description=(
        "A manager approves, finance too above a threshold, then it is paid once; "
        "either may send it back to the requester for changes, twice at most."
    ),
    input_schema=ExpenseInput,
    # The requester never decides their own expense, and the manager who approved
    # it cannot approve it again as finance.
    requester_field="requester",
    distinct_approvers=True,
    starters=("employees",),
    start="submit",
    nodes=(
        Activity("submit", run=submit_expense, next="manager_approval", mutating=False),
        Approval(
            "manager_approval",
            title=_expense_title,
            assignees=_manager_of,
            escalations=(Escalation(after=_escalate_after, to_groups=("finance",)),),
            deadline=timedelta(days=7),
            remind_before=timedelta(days=1),
            on_deadline="reject",
            on_approve="needs_finance",
            on_reject="notify",
            on_changes_requested="revise_for_manager",
        ),
        Revise("revise_for_manager", next="back_to_manager"),
        GoBack(
            "back_to_manager",
            to="manager_approval",
            max_rounds=EXPENSE_ROUNDS,
            otherwise="notify",
        ),
        Branch(
            "needs_finance", condition=_needs_finance, if_true="finance_approval", if_false="pay"
        ),
        Approval(
            "finance_approval",
            title=_expense_title,
            groups=("finance",),
            priority=3,
            deadline=timedelta(days=7),
            remind_before=timedelta(days=1),
            on_deadline="reject",
            on_approve="pay",
            on_reject="notify",
            on_changes_requested="revise_for_finance",
            form=FinanceApprovalForm,
        ),
        Revise("revise_for_finance", next="back_to_finance"),
        GoBack(
            "back_to_finance",
            to="finance_approval",
            max_rounds=EXPENSE_ROUNDS,
            otherwise="notify",
        ),
        Activity("pay", run=pay_expense, compensate=reverse_payment, next="notify", retry=RETRY),
        Activity(
            "notify",
            run=notify_requester,
            compensate=NoCompensation("a sent message cannot be unsent; it is the last step"),
            retry=RETRY,
            local=True,
        ),
    ),
)

# ---------------------------------------------------------------------------
# vendor_onboarding
# ---------------------------------------------------------------------------


class VendorInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vendor_name: str = Field(min_length=1, max_length=120)
    contact_email: Email
    country: str = Field(
        default="",
        max_length=2,
        pattern=r"^([A-Z]{2})?$",
        description="a two-letter ISO 3166 country code, e.g. DE",
    )


class LegalReviewForm(BaseModel):
    """What legal records to approve a vendor: the contract, and how risky it is."""

    model_config = ConfigDict(extra="forbid")

    contract_id: str = Field(
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9/_.-]*$",
        description="the signed contract's reference, e.g. LEG-2026-014",
    )
    risk_level: Literal["low", "medium", "high"] = Field(
        description="legal's view of the vendor's risk; high adds a security sign-off"
    )


def _both_approved(data: RunData) -> bool:
    return all(
        data.results[review]["signal"] == f"{review}.approved"
        for review in ("legal_review", "security_review")
    )


def _high_legal_risk(data: RunData) -> bool:
    return data.form_values("legal_review").get("risk_level") == "high"


def create_vendor_account(context: ActivityContext) -> dict[str, Any]:
    return services.call(
        service="vendors",
        action="create_account",
        context=context,
        behaviour=None,
        data={"vendor": context.input["vendor_name"]},
    )


def close_vendor_account(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="vendors",
        action="close_account",
        undoes="create_account",
        context=context,
        behaviour=None,
    )


def notify_vendor_rejected(context: ActivityContext) -> dict[str, Any]:
    services.call(
        service="notifications",
        action="notify",
        context=context,
        behaviour=None,
        data={"to": context.input["contact_email"], "outcome": "rejected"},
    )
    return {"outcome": "rejected"}


def _vendor_title(review: str):
    def title(data: RunData) -> str:
        return f"{review} review: vendor {data.input['vendor_name']}"

    return title


def _sign_off_title(data: RunData) -> str:
    contract = data.form_values("legal_review").get("contract_id", "")
    return (
        f"Security sign-off: vendor {data.input['vendor_name']} "
        f"(legal rated the risk high, contract {contract})"
    )


VENDOR_ONBOARDING = Workflow(
    name="vendor_onboarding",
    version=1,
    description=(
        "Legal and security review in parallel; both must approve the new vendor, and "
        "security signs off once more when legal rates the risk high."
    ),
    input_schema=VendorInput,
    starters=("procurement",),
    searchable=("vendor_name", "contact_email"),
    start="reviews",
    nodes=(
        Parallel("reviews", branches=("legal_review", "security_review"), join="reviews_done"),
        Approval(
            "legal_review",
            title=_vendor_title("Legal"),
            groups=("legal",),
            on_approve="reviews_done",
            on_reject="reviews_done",
            form=LegalReviewForm,
        ),
        Approval(
            "security_review",
            title=_vendor_title("Security"),
            groups=("security",),
            on_approve="reviews_done",
            on_reject="reviews_done",
        ),
        Join("reviews_done", wait_for="all", next="both_approved"),
        Branch(
            "both_approved",
            condition=_both_approved,
            if_true="high_risk",
            if_false="notify_rejected",
        ),
        Branch(
            "high_risk",
            condition=_high_legal_risk,
            if_true="security_sign_off",
            if_false="create_account",
        ),
        Approval(
            "security_sign_off",
            title=_sign_off_title,
            groups=("security",),
            priority=3,
            on_approve="create_account",
            on_reject="notify_rejected",
        ),
        Activity(
            "create_account",
            run=create_vendor_account,
            compensate=close_vendor_account,
            retry=RETRY,
        ),
        Activity(
            "notify_rejected",
            run=notify_vendor_rejected,
            compensate=NoCompensation("a sent message cannot be unsent; it is the last step"),
            retry=RETRY,
        ),
    ),
)

registry.register(EXPENSE)
registry.register(VENDOR_ONBOARDING)
