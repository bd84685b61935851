"""The shipped workflow types that stop for people: `expense` and `vendor_onboarding`, and
`background_check`, the child workflow vendor onboarding runs once per director.

Vendor onboarding also shows a data-entry task (`UserTask`): once the vendor is
approved, finance types its bank details, which the new vendor account is opened with."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _
from pydantic import BaseModel, ConfigDict, Field, field_validator

from approvals import money
from approvals.models import ReportingLine
from approvals.start_forms import choice_labels
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
    Map,
    NoCompensation,
    Parallel,
    RetryPolicy,
    Revise,
    RunData,
    UserTask,
    Workflow,
)
from workflows.examples import services
from workflows.examples.fields import Amount, Currency, Email
from workflows.personal import PERSONAL

RETRY = RetryPolicy(max_attempts=4, initial_interval=timedelta(seconds=1))

# ---------------------------------------------------------------------------
# expense
# ---------------------------------------------------------------------------


class ExpenseInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requester: str = Field(
        min_length=1,
        max_length=150,
        title=_("Requester"),
        description=_("the username of whom it is for, e.g. alice"),
    )
    title: str = Field(
        min_length=1, max_length=120, title=_("Title"), description=_("what it was for")
    )
    amount: Amount = Field(title=_("Amount"))
    currency: Currency = Field(title=_("Currency"))
    description: str = Field(
        default="",
        max_length=2000,
        title=_("Description"),
        description=_("anything your approvers should know"),
    )
    # Personal: sealed at rest, shown only to who may see the request, and erased with
    # `manage.py erase_personal_data` (SECURITY.md, "Personal data").
    bank_account: str = Field(
        default="",
        max_length=34,
        pattern=r"^([A-Z]{2}[0-9]{2}[A-Z0-9]{10,30})?$",
        title=_("Bank account (IBAN)"),
        description=_("the IBAN to pay it to if not the one on file, e.g. DE89370400440532013000"),
        json_schema_extra=PERSONAL,
    )

    @field_validator("requester")
    @classmethod
    def requester_has_a_manager(cls, value: str) -> str:
        user = get_user_model().objects.filter(username=value, is_active=True).first()
        if user is None:
            raise ValueError(_("no active user called %(name)s") % {"name": repr(value)})
        if not ReportingLine.objects.filter(user=user).exists():
            raise ValueError(
                _("%(name)s has no manager to approve it (set a reporting line)") % {"name": value}
            )
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
        title=_("Cost centre"),
        description=_("the cost centre to charge, e.g. FIN-1200"),
    )


def _manager_of(data: RunData) -> list[str]:
    return [data.results["submit"]["manager"]]


# Task titles are stored with the task, written in the site's language
# (approvals.human_tasks.lifecycle makes them under settings.LANGUAGE_CODE).


def _expense_title(data: RunData) -> str:
    amount, currency = data.input["amount"], data.input["currency"]
    return gettext("Expense: %(title)s — %(amount)s (%(requester)s)") % {
        "title": data.input["title"],
        "amount": money.money(amount, currency) or f"{amount} {currency}",
        "requester": data.input["requester"],
    }


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
    title=_("expense"),
    description=_(
        "A manager approves, finance too above a threshold, then it is paid once; "
        "either may send it back to the requester for changes, twice at most."
    ),
    input_schema=ExpenseInput,
    # Operators find runs by these, and reviewers filter their inbox by them (`amount>1000`);
    # the console heads a run with them, the title first.
    searchable=("title", "amount", "currency"),
    # The requester never decides their own expense, and the manager who approved
    # it cannot approve it again as finance.
    requester_field="requester",
    distinct_approvers=True,
    starters=("employees",),
    start="submit",
    nodes=(
        Activity(
            "submit",
            label=pgettext_lazy("workflow step", "Submit"),
            run=submit_expense,
            next="manager_approval",
            mutating=False,
        ),
        Approval(
            "manager_approval",
            label=pgettext_lazy("workflow step", "Manager approval"),
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
        Revise(
            "revise_for_manager",
            label=pgettext_lazy("workflow step", "Changes for the manager"),
            next="back_to_manager",
        ),
        GoBack(
            "back_to_manager",
            label=pgettext_lazy("workflow step", "Back to the manager"),
            to="manager_approval",
            max_rounds=EXPENSE_ROUNDS,
            otherwise="notify",
        ),
        Branch(
            "needs_finance",
            label=pgettext_lazy("workflow step", "Finance needed?"),
            condition=_needs_finance,
            if_true="finance_approval",
            if_false="pay",
        ),
        Approval(
            "finance_approval",
            label=pgettext_lazy("workflow step", "Finance approval"),
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
        Revise(
            "revise_for_finance",
            label=pgettext_lazy("workflow step", "Changes for finance"),
            next="back_to_finance",
        ),
        GoBack(
            "back_to_finance",
            label=pgettext_lazy("workflow step", "Back to finance"),
            to="finance_approval",
            max_rounds=EXPENSE_ROUNDS,
            otherwise="notify",
        ),
        Activity(
            "pay",
            label=pgettext_lazy("workflow step", "Payment"),
            run=pay_expense,
            compensate=reverse_payment,
            next="notify",
            retry=RETRY,
        ),
        Activity(
            "notify",
            label=pgettext_lazy("workflow step", "Notify the requester"),
            run=notify_requester,
            compensate=NoCompensation("a sent message cannot be unsent; it is the last step"),
            retry=RETRY,
            local=True,
        ),
    ),
)

# ---------------------------------------------------------------------------
# background_check (a child workflow of vendor_onboarding)
# ---------------------------------------------------------------------------

# How many directors' checks run at once: the screening provider's rate limit.
BACKGROUND_CHECKS_AT_ONCE = 3
MAX_DIRECTORS = 50

_COUNTRY = Field(
    default="",
    max_length=2,
    pattern=r"^([A-Z]{2})?$",
    title=_("Country"),
    description=_("a two-letter ISO 3166 country code, e.g. DE"),
)


class Director(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=120, title=_("Name"), description=_("the director's full name")
    )
    country: str = _COUNTRY


class BackgroundCheckInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vendor_name: str = Field(min_length=1, max_length=120, title=_("Vendor name"))
    director: Director = Field(title=_("Director"))


def open_screening_case(context: ActivityContext) -> dict[str, Any]:
    return services.call(
        service="screening",
        action="open_case",
        context=context,
        behaviour=None,
        data={"vendor": context.input["vendor_name"], "director": context.input["director"]},
    )


def close_screening_case(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="screening",
        action="close_case",
        undoes="open_case",
        context=context,
        behaviour=None,
    )


def screen_director(context: ActivityContext) -> dict[str, Any]:
    """Return the screening's outcome for the director: clear, or flagged for a person."""
    director = context.input["director"]
    case = context.results["open_case"]
    # The demo provider clears everyone; a real one answers "flagged" for a match.
    return {"director": director["name"], "case": case["effect_id"], "outcome": "clear"}


BACKGROUND_CHECK = Workflow(
    name="background_check",
    version=1,
    title=_("background check"),
    description=_(
        "Screen one director of a vendor: open a case with the screening provider, then "
        "screen them. Vendor onboarding runs one per director; undoing it closes the case."
    ),
    input_schema=BackgroundCheckInput,
    start="open_case",
    nodes=(
        Activity(
            "open_case",
            label=pgettext_lazy("workflow step", "Open a screening case"),
            run=open_screening_case,
            compensate=close_screening_case,
            next="screen",
            retry=RETRY,
        ),
        Activity(
            "screen",
            label=pgettext_lazy("workflow step", "Screen the director"),
            run=screen_director,
            mutating=False,
            retry=RETRY,
        ),
    ),
)

# ---------------------------------------------------------------------------
# vendor_onboarding
# ---------------------------------------------------------------------------


class VendorInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vendor_name: str = Field(min_length=1, max_length=120, title=_("Vendor name"))
    contact_email: Email = Field(title=_("Contact email"))
    country: str = _COUNTRY
    directors: list[Director] = Field(
        default_factory=list,
        max_length=MAX_DIRECTORS,
        title=_("Directors"),
        description=_("the vendor's directors: each gets a background check before the reviews"),
    )


class LegalReviewForm(BaseModel):
    """What legal records to approve a vendor: the contract, and how risky it is."""

    model_config = ConfigDict(extra="forbid")

    contract_id: str = Field(
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9/_.-]*$",
        title=_("Contract id"),
        description=_("the signed contract's reference, e.g. LEG-2026-014"),
    )
    risk_level: Literal["low", "medium", "high"] = Field(
        title=_("Risk level"),
        description=_("legal's view of the vendor's risk; high adds a security sign-off"),
        json_schema_extra=choice_labels(low=_("low"), medium=_("medium"), high=_("high")),
    )


def _both_approved(data: RunData) -> bool:
    return all(
        data.results[review]["signal"] == f"{review}.approved"
        for review in ("legal_review", "security_review")
    )


def _high_risk(data: RunData) -> bool:
    """Legal rated the risk high, or a director's background check was flagged."""
    flagged = any(
        check["outcome"] != "clear" for check in data.results.get("background_checks") or []
    )
    return flagged or data.form_values("legal_review").get("risk_level") == "high"


def _directors(data: RunData) -> list[dict[str, Any]]:
    return list(data.input.get("directors", []))


def _check_input(data: RunData, director: dict[str, Any]) -> dict[str, Any]:
    return {"vendor_name": data.input["vendor_name"], "director": director}


class VendorBankDetails(BaseModel):
    """What finance types in before the vendor's account is opened: where it is paid."""

    model_config = ConfigDict(extra="forbid")

    account_holder: str = Field(
        min_length=1,
        max_length=120,
        title=_("Account holder"),
        description=_("the name on the vendor's bank account"),
    )
    iban: str = Field(
        min_length=15,
        max_length=34,
        pattern=r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$",
        title=_("IBAN"),
        description=_("capitals and digits without spaces, e.g. DE89370400440532013000"),
    )
    bic: str = Field(
        default="",
        max_length=11,
        pattern=r"^([A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?)?$",
        title=_("BIC"),
        description=_("the bank's BIC, if the IBAN's country needs one"),
    )


def create_vendor_account(context: ActivityContext) -> dict[str, Any]:
    bank = RunData(input=context.input, results=context.results).form_values("collect_bank_details")
    return services.call(
        service="vendors",
        action="create_account",
        context=context,
        behaviour=None,
        data={"vendor": context.input["vendor_name"], "iban": bank.get("iban")},
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


def _legal_title(data: RunData) -> str:
    return gettext("Legal review: vendor %(vendor)s") % {"vendor": data.input["vendor_name"]}


def _security_title(data: RunData) -> str:
    return gettext("Security review: vendor %(vendor)s") % {"vendor": data.input["vendor_name"]}


def _bank_details_title(data: RunData) -> str:
    return gettext("Bank details: vendor %(vendor)s") % {"vendor": data.input["vendor_name"]}


def _sign_off_title(data: RunData) -> str:
    legal = data.form_values("legal_review")
    flagged = [
        check["director"]
        for check in data.results.get("background_checks") or []
        if check["outcome"] != "clear"
    ]
    reasons = (
        [gettext("background check flagged %(names)s") % {"names": ", ".join(flagged)}]
        if flagged
        else []
    )
    if legal.get("risk_level") == "high":
        reasons.append(gettext("legal rated the risk high"))
    reasons.append(gettext("contract %(contract)s") % {"contract": legal.get("contract_id", "")})
    return gettext("Security sign-off: vendor %(vendor)s (%(reasons)s)") % {
        "vendor": data.input["vendor_name"],
        "reasons": ", ".join(reasons),
    }


VENDOR_ONBOARDING = Workflow(
    name="vendor_onboarding",
    version=1,
    title=_("vendor onboarding"),
    description=_(
        "A background check per director (three at a time), then legal and security review "
        "in parallel; both must approve the new vendor, and security signs off once more "
        "when legal rates the risk high or a director's check was flagged. Finance then "
        "types the vendor's bank details, and its account is opened with them."
    ),
    input_schema=VendorInput,
    starters=("procurement",),
    searchable=("vendor_name", "contact_email"),
    start="background_checks",
    nodes=(
        Map(
            "background_checks",
            label=pgettext_lazy("workflow step", "Background checks"),
            items=_directors,
            workflow=BACKGROUND_CHECK.name,
            input=_check_input,
            max_concurrency=BACKGROUND_CHECKS_AT_ONCE,
            on_failure="fail_fast",
            next="reviews",
        ),
        Parallel(
            "reviews",
            label=pgettext_lazy("workflow step", "Reviews"),
            branches=("legal_review", "security_review"),
            join="reviews_done",
        ),
        Approval(
            "legal_review",
            label=pgettext_lazy("workflow step", "Legal review"),
            title=_legal_title,
            groups=("legal",),
            on_approve="reviews_done",
            on_reject="reviews_done",
            form=LegalReviewForm,
        ),
        Approval(
            "security_review",
            label=pgettext_lazy("workflow step", "Security review"),
            title=_security_title,
            groups=("security",),
            on_approve="reviews_done",
            on_reject="reviews_done",
        ),
        Join(
            "reviews_done",
            label=pgettext_lazy("workflow step", "Reviews done"),
            wait_for="all",
            next="both_approved",
        ),
        Branch(
            "both_approved",
            label=pgettext_lazy("workflow step", "Both approved?"),
            condition=_both_approved,
            if_true="high_risk",
            if_false="notify_rejected",
        ),
        Branch(
            "high_risk",
            label=pgettext_lazy("workflow step", "High risk?"),
            condition=_high_risk,
            if_true="security_sign_off",
            if_false="collect_bank_details",
        ),
        Approval(
            "security_sign_off",
            label=pgettext_lazy("workflow step", "Security sign-off"),
            title=_sign_off_title,
            groups=("security",),
            priority=3,
            on_approve="collect_bank_details",
            on_reject="notify_rejected",
        ),
        # Data entry, not a decision: finance fills in the vendor's bank details (a draft
        # kept as they type), and the account is opened with them.
        UserTask(
            "collect_bank_details",
            label=pgettext_lazy("workflow step", "Bank details"),
            title=_bank_details_title,
            groups=("finance",),
            form=VendorBankDetails,
            next="create_account",
        ),
        Activity(
            "create_account",
            label=pgettext_lazy("workflow step", "Open the vendor's account"),
            run=create_vendor_account,
            compensate=close_vendor_account,
            retry=RETRY,
        ),
        Activity(
            "notify_rejected",
            label=pgettext_lazy("workflow step", "Tell the vendor no"),
            run=notify_vendor_rejected,
            compensate=NoCompensation("a sent message cannot be unsent; it is the last step"),
            retry=RETRY,
        ),
    ),
)

registry.register(EXPENSE)
registry.register(BACKGROUND_CHECK)
registry.register(VENDOR_ONBOARDING)
