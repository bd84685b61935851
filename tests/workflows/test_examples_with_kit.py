"""The shipped workflow types, tested with the kit workflow authors use (workflows.testing)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from approvals.human_tasks import ConflictOfDuty
from approvals.states import Outcome, TaskState
from workflows import registry
from workflows.activity import NonRetryableError
from workflows.examples.models import ServiceEffect
from workflows.models import BusinessCalendar, Holiday, WorkflowRun
from workflows.states import LIVE_RUN_STATES, RunState, StepKind

pytestmark = pytest.mark.django_db

# The standard calendar works Monday to Friday, 09:00-17:00 (UTC in the tests).
FRIDAY_4PM = datetime(2026, 1, 9, 16, 0, tzinfo=UTC)


def expense(amount: str = "120.00", requester: str = "alice") -> dict[str, str]:
    return {"requester": requester, "title": "Train to Lyon", "amount": amount, "currency": "EUR"}


class PaymentDeclined(NonRetryableError):
    pass


class TestExpense:
    def test_it_escalates_after_the_weekend_and_pays_once(
        self, workflow_env, carol, bob, mailoutbox, effects
    ):
        env = workflow_env.travel_to(FRIDAY_4PM)
        pay = env.spy("expense", "pay")
        run = env.start("expense", expense())

        env.advance(days=3)  # Monday 16:00: one business day gone, not two
        assert env.task(run, "manager_approval").escalation_level == 0
        env.advance(days=1)  # Tuesday 16:00: two business days

        task = env.task(run, "manager_approval")
        assert task.escalation_level == 1
        escalated = [mail.to[0] for mail in mailoutbox if "Escalated to you" in mail.subject]
        assert sorted(escalated) == ["bob@example.com", "carol@example.com"]
        run = env.approve(run, "manager_approval", as_user=bob)
        env.assert_state(run, RunState.SUCCEEDED)
        env.assert_path(run, "submit", "manager_approval", "needs_finance", "pay", "notify")
        assert pay.count == 1
        assert effects(run) == {"payments.pay": 1, "notifications.notify": 1}

    def test_a_monday_holiday_keeps_it_with_the_manager_until_wednesday(self, workflow_env, carol):
        standard = BusinessCalendar.objects.get(name="standard")
        Holiday.objects.create(calendar=standard, date=date(2026, 1, 12), name="A holiday")
        env = workflow_env.travel_to(FRIDAY_4PM)
        run = env.start("expense", expense())

        env.advance(days=4)  # Tuesday 16:00
        assert env.task(run, "manager_approval").escalation_level == 0
        env.advance(days=1)  # Wednesday 16:00

        assert env.task(run, "manager_approval").escalation_level == 1

    def test_the_manager_approves_and_it_is_paid_without_finance(self, workflow_env, carol):
        run = workflow_env.start("expense", expense())

        run = workflow_env.approve(run, "manager_approval", as_user=carol, comment="ok")

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert "finance_approval" not in workflow_env.path(run)

    def test_a_rejection_notifies_the_requester_and_pays_nothing(
        self, workflow_env, carol, effects
    ):
        pay = workflow_env.spy("expense", "pay")
        run = workflow_env.start("expense", expense())

        run = workflow_env.reject(run, "manager_approval", as_user=carol, reason="no receipt")

        workflow_env.assert_path(run, "submit", "manager_approval", "notify")
        assert pay.count == 0
        assert effects(run) == {"notifications.notify": 1}

    def test_above_the_threshold_finance_approves_too_but_never_the_same_person(
        self, workflow_env, carol, bob
    ):
        run = workflow_env.start("expense", expense(amount="5000.00"))
        run = workflow_env.approve(run, "manager_approval", as_user=carol)

        with pytest.raises(ConflictOfDuty, match="one person decides at most one"):
            workflow_env.approve(run, "finance_approval", as_user=carol)
        run = workflow_env.approve(
            run, "finance_approval", as_user=bob, values={"cost_centre": "CC-1042"}
        )

        workflow_env.assert_path(
            run, "submit", "manager_approval", "needs_finance", "finance_approval", "pay", "notify"
        )
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_after_seven_days_without_a_decision_it_is_rejected_by_the_system(
        self, workflow_env, carol
    ):
        run = workflow_env.start("expense", expense())

        workflow_env.advance(days=7)

        task = run.human_tasks.get(node="manager_approval")
        assert (task.state, task.outcome) == (TaskState.COMPLETED, Outcome.REJECTED)
        workflow_env.assert_path(run, "submit", "manager_approval", "notify")
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_a_declined_payment_notifies_nobody_and_fails_the_run(self, workflow_env, carol):
        def decline(context):
            raise PaymentDeclined("the bank refused")

        pay = workflow_env.replace_activity("expense", "pay", decline)
        notify = workflow_env.spy("expense", "notify")
        run = workflow_env.start("expense", expense())

        run = workflow_env.approve(run, "manager_approval", as_user=carol)

        workflow_env.assert_state(run, RunState.FAILED)  # nothing before pay had to be undone
        assert (pay.count, pay.undos, notify.count) == (1, [], 0)


class TestOrder:
    def test_an_order_is_charged_shipped_and_notified_once(self, workflow_env, order_input):
        charge = workflow_env.spy("order", "charge_payment")

        run = workflow_env.start("order", order_input())

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(
            run, "validate", "reserve_inventory", "charge_payment", "ship", "notify_customer"
        )
        assert charge.count == 1

    def test_a_flaky_payment_is_retried_as_time_passes_and_charged_once(
        self, workflow_env, order_input, effects
    ):
        run = workflow_env.start("order", order_input(simulate={"payment": "flaky"}))
        assert workflow_env.refresh(run).state == RunState.RUNNING

        while workflow_env.skip_ahead():
            pass

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert effects(run)["payments.charge"] == 1

    def test_a_failed_shipment_refunds_and_releases_in_reverse_order(
        self, workflow_env, order_input, effects
    ):
        run = workflow_env.start("order", order_input(simulate={"shipping": "fail"}))

        while workflow_env.skip_ahead():
            pass

        workflow_env.assert_state(run, RunState.COMPENSATED)
        assert workflow_env.undone(run) == ["charge_payment", "reserve_inventory"]
        assert effects(run)["payments.refund"] == 1


class TestVendorOnboarding:
    VENDOR = {"vendor_name": "Acme", "contact_email": "legal@acme.example"}
    LOW_RISK = {"contract_id": "LEG-2026-014", "risk_level": "low"}
    BANK = {"account_holder": "Acme GmbH", "iban": "DE89370400440532013000"}

    def test_both_reviews_approve_finance_types_the_bank_details_and_the_account_opens(
        self, workflow_env, alice, bob, carol
    ):
        run = workflow_env.start("vendor_onboarding", self.VENDOR)

        workflow_env.approve(run, "legal_review", as_user=alice, values=self.LOW_RISK)
        run = workflow_env.approve(run, "security_review", as_user=bob)
        workflow_env.assert_state(run, RunState.WAITING)
        workflow_env.save_draft(
            run, "collect_bank_details", as_user=carol, values={"account_holder": "Acme"}
        )
        run = workflow_env.complete(run, "collect_bank_details", as_user=carol, values=self.BANK)

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        path = workflow_env.path(run)
        assert path.index("collect_bank_details") < path.index("create_account")
        assert "security_sign_off" not in path
        assert run.results["create_account"]["iban"] == self.BANK["iban"]

    def test_a_high_legal_risk_adds_a_security_sign_off_before_the_account(
        self, workflow_env, alice, bob, carol
    ):
        run = workflow_env.start("vendor_onboarding", self.VENDOR)

        workflow_env.approve(
            run, "legal_review", as_user=alice, values={**self.LOW_RISK, "risk_level": "high"}
        )
        run = workflow_env.approve(run, "security_review", as_user=bob)
        assert "create_account" not in workflow_env.path(run)
        workflow_env.approve(run, "security_sign_off", as_user=bob)
        run = workflow_env.complete(run, "collect_bank_details", as_user=carol, values=self.BANK)

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        path = workflow_env.path(run)
        assert path.index("security_sign_off") < path.index("create_account")

    def test_one_rejection_is_enough_to_refuse_the_vendor(self, workflow_env, alice, bob):
        create = workflow_env.spy("vendor_onboarding", "create_account")
        run = workflow_env.start("vendor_onboarding", self.VENDOR)

        workflow_env.reject(run, "legal_review", as_user=alice, reason="no contract")
        run = workflow_env.approve(run, "security_review", as_user=bob)

        assert workflow_env.path(run)[-1] == "notify_rejected"
        assert create.count == 0


class TestExpenseSentBackForChanges:
    def test_the_manager_sends_it_back_alice_lowers_it_and_it_is_paid_the_new_amount(
        self, workflow_env, carol, alice, effects
    ):
        pay = workflow_env.spy("expense", "pay")
        run = workflow_env.start("expense", expense(amount="1500.00"))

        run = workflow_env.request_changes(
            run, "manager_approval", as_user=carol, reason="Only the fee, please."
        )
        assert workflow_env.task(run, "revise_for_manager").assignee == alice
        run = workflow_env.resubmit(
            run,
            "revise_for_manager",
            as_user=alice,
            input={"title": "Train to Lyon", "amount": "900.00", "currency": "EUR"},
        )
        run = workflow_env.approve(run, "manager_approval", as_user=carol)

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(
            run,
            "submit",
            "manager_approval",
            "revise_for_manager",
            "back_to_manager",
            "manager_approval",
            "needs_finance",
            "pay",
            "notify",
        )
        assert pay.count == 1
        assert pay.runs[0].input["amount"] == "900.00"
        assert pay.runs[0].idempotency_key == f"{run.pk}:pay@1"
        assert effects(run) == {"payments.pay": 1, "notifications.notify": 1}

    def test_finance_may_send_it_back_too_and_it_returns_to_finance_not_the_manager(
        self, workflow_env, carol, bob, alice
    ):
        run = workflow_env.start("expense", expense(amount="1500.00"))
        run = workflow_env.approve(run, "manager_approval", as_user=carol)

        run = workflow_env.request_changes(
            run, "finance_approval", as_user=bob, reason="Which budget line?"
        )
        run = workflow_env.resubmit(
            run,
            "revise_for_finance",
            as_user=alice,
            input={**expense(amount="1500.00"), "description": "Budget line 7"},
        )
        again = workflow_env.task(run, "finance_approval")
        run = workflow_env.approve(
            run, "finance_approval", as_user=bob, values={"cost_centre": "FIN-1200"}
        )

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert again.assignee == bob
        assert workflow_env.path(run).count("manager_approval") == 1
        assert workflow_env.path(run).count("finance_approval") == 2


class TestVendorBackgroundChecks:
    DIRECTORS = [{"name": name, "country": "DE"} for name in ("Ann", "Ben", "Cy", "Dee", "Eve")]
    VENDOR = {**TestVendorOnboarding.VENDOR, "directors": DIRECTORS}
    LOW_RISK = TestVendorOnboarding.LOW_RISK

    def children(self, run):
        return WorkflowRun.objects.filter(parent_run=run, workflow_type="background_check")

    def test_each_director_gets_a_check_at_most_three_at_a_time_before_the_reviews(
        self, workflow_env
    ):
        live_at_each_open: list[int] = []
        original = registry.get("background_check").activity("open_case").run

        def open_case(context):
            parent = WorkflowRun.objects.get(pk=context.run_id).parent_run
            live_at_each_open.append(
                self.children(parent).filter(state__in=LIVE_RUN_STATES).count()
            )
            return original(context)

        workflow_env.replace_activity("background_check", "open_case", open_case)

        run = workflow_env.start("vendor_onboarding", self.VENDOR)

        assert len(live_at_each_open) == 5
        assert max(live_at_each_open) == 3
        checks = run.steps.get(node="background_checks", item__isnull=True).result
        assert [check["director"] for check in checks] == ["Ann", "Ben", "Cy", "Dee", "Eve"]
        assert {check["outcome"] for check in checks} == {"clear"}
        assert set(self.children(run).values_list("state", flat=True)) == {RunState.SUCCEEDED}
        assert workflow_env.path(run)[:2] == ["background_checks", "reviews"]
        assert workflow_env.task(run, "legal_review")

    def test_a_flagged_director_adds_a_security_sign_off(self, workflow_env, alice, bob):
        def screen(context):
            name = context.input["director"]["name"]
            return {"director": name, "case": 0, "outcome": "flagged" if name == "Cy" else "clear"}

        workflow_env.replace_activity("background_check", "screen", screen)
        run = workflow_env.start("vendor_onboarding", self.VENDOR)

        workflow_env.approve(run, "legal_review", as_user=alice, values=self.LOW_RISK)
        run = workflow_env.approve(run, "security_review", as_user=bob)

        sign_off = workflow_env.task(run, "security_sign_off")
        assert sign_off.title == (
            "Security sign-off: vendor Acme (background check flagged Cy, contract LEG-2026-014)"
        )

    def test_a_failed_account_closes_every_directors_case_in_reverse(
        self, workflow_env, alice, bob, carol
    ):
        def refuse(context):
            raise NonRetryableError("the vendor system refuses the account")

        workflow_env.replace_activity("vendor_onboarding", "create_account", refuse)
        run = workflow_env.start("vendor_onboarding", self.VENDOR)
        workflow_env.approve(run, "legal_review", as_user=alice, values=self.LOW_RISK)
        workflow_env.approve(run, "security_review", as_user=bob)
        run = workflow_env.complete(
            run,
            "collect_bank_details",
            as_user=carol,
            values={"account_holder": "Acme GmbH", "iban": "DE89370400440532013000"},
        )

        run = workflow_env.assert_state(run, RunState.COMPENSATED)
        assert set(self.children(run).values_list("state", flat=True)) == {RunState.COMPENSATED}
        undone = run.steps.filter(node="background_checks", kind=StepKind.COMPENSATION)
        assert list(undone.order_by("finished_at", "id").values_list("item", flat=True)) == [
            4,
            3,
            2,
            1,
            0,
        ]
        closed = ServiceEffect.objects.filter(
            service="screening", action="close_case", applied_at__isnull=False
        )
        assert closed.count() == 5

    def test_a_vendor_without_directors_goes_straight_to_the_reviews(self, workflow_env):
        run = workflow_env.start("vendor_onboarding", TestVendorOnboarding.VENDOR)

        assert self.children(run).count() == 0
        assert workflow_env.path(run)[:2] == ["background_checks", "reviews"]

    def test_a_run_started_before_the_checks_existed_still_routes_on_legal_risk(
        self, workflow_env, alice, bob
    ):
        run = workflow_env.start("vendor_onboarding", TestVendorOnboarding.VENDOR)
        # As if it had started on the definition without background checks.
        run.steps.filter(node="background_checks").delete()

        workflow_env.approve(
            run, "legal_review", as_user=alice, values={**self.LOW_RISK, "risk_level": "high"}
        )
        run = workflow_env.approve(run, "security_review", as_user=bob)

        assert workflow_env.task(run, "security_sign_off").title == (
            "Security sign-off: vendor Acme (legal rated the risk high, contract LEG-2026-014)"
        )
