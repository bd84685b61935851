"""The shipped types that stop for people, driven through the engine: their task forms."""

from __future__ import annotations

import pytest

from approvals import human_tasks
from approvals.states import Channel, TaskState
from workflows.examples.models import ServiceEffect
from workflows.states import RunState

pytestmark = pytest.mark.django_db

INBOX = Channel.INBOX
VENDOR = {"vendor_name": "Acme", "contact_email": "legal@acme.example", "country": "DE"}
BANK = {"account_holder": "Acme GmbH", "iban": "DE89370400440532013000"}


@pytest.fixture
def bank_details_entered(people, drive):
    """Finance (carol) types the vendor's bank details; return the run driven on."""

    def enter(run):
        task = run.human_tasks.get(node="collect_bank_details")
        human_tasks.complete_user_task(
            task_id=task.pk, user=people["carol"], channel=INBOX, values=BANK
        )
        return drive(run)

    return enter


@pytest.fixture
def reviewed_vendor(people, start, drive):
    """Start a vendor onboarding; legal (alice) approves it rating the risk as given, and
    security (bob) approves it; return the run driven as far as it goes."""

    def review(risk_level: str):
        run = drive(start("vendor_onboarding", VENDOR))
        legal = run.human_tasks.get(node="legal_review")
        security = run.human_tasks.get(node="security_review")
        human_tasks.approve_human_task(
            task_id=legal.pk,
            user=people["alice"],
            channel=INBOX,
            values={"contract_id": "LEG-2026-014", "risk_level": risk_level},
        )
        human_tasks.approve_human_task(task_id=security.pk, user=people["bob"], channel=INBOX)
        return drive(run)

    return review


class TestVendorOnboarding:
    def test_a_high_legal_risk_routes_to_a_security_sign_off(self, reviewed_vendor, people):
        run = reviewed_vendor("high")

        sign_off = run.human_tasks.get(node="security_sign_off")
        assert run.state == RunState.WAITING
        assert "create_account" not in run.results
        assert sign_off.state == TaskState.OPEN
        assert list(sign_off.candidate_groups.values_list("name", flat=True)) == ["security"]
        assert sign_off.title == (
            "Security sign-off: vendor Acme (legal rated the risk high, contract LEG-2026-014)"
        )

    def test_the_account_is_created_once_security_signs_off(
        self, reviewed_vendor, people, drive, bank_details_entered
    ):
        run = reviewed_vendor("high")
        sign_off = run.human_tasks.get(node="security_sign_off")

        human_tasks.approve_human_task(task_id=sign_off.pk, user=people["bob"], channel=INBOX)

        run = bank_details_entered(drive(run))
        assert run.state == RunState.SUCCEEDED
        assert run.results["create_account"]

    @pytest.mark.parametrize("risk_level", ["low", "medium"])
    def test_a_lower_risk_creates_the_account_without_a_sign_off(
        self, reviewed_vendor, risk_level, bank_details_entered
    ):
        run = bank_details_entered(reviewed_vendor(risk_level))

        assert run.state == RunState.SUCCEEDED
        assert run.results["create_account"]
        assert not run.human_tasks.filter(node="security_sign_off").exists()
        assert run.results["legal_review"]["payload"]["values"]["risk_level"] == risk_level

    def test_finance_types_the_bank_details_the_account_is_opened_with(
        self, reviewed_vendor, bank_details_entered
    ):
        run = reviewed_vendor("low")
        task = run.human_tasks.get(node="collect_bank_details")
        assert (run.state, task.kind, task.title) == (
            RunState.WAITING,
            "entry",
            "Bank details: vendor Acme",
        )
        assert list(task.candidate_groups.values_list("name", flat=True)) == ["finance"]

        run = bank_details_entered(run)

        assert run.results["create_account"]["iban"] == BANK["iban"]
        assert run.results["collect_bank_details"]["payload"]["values"]["bic"] == ""

    def test_a_rejected_sign_off_notifies_the_vendor(self, reviewed_vendor, people, drive):
        run = reviewed_vendor("high")
        sign_off = run.human_tasks.get(node="security_sign_off")

        human_tasks.reject_human_task(
            task_id=sign_off.pk, user=people["bob"], channel=INBOX, reason="Pen test failed"
        )

        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert run.results["notify_rejected"] == {"outcome": "rejected"}
        assert "create_account" not in run.results


class TestExpense:
    def test_finance_records_a_cost_centre_that_reaches_the_payment_step(
        self, start_expense, carol, bob, drive
    ):
        run = start_expense(amount="1500.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        finance = drive(run).human_tasks.get(node="finance_approval")

        human_tasks.approve_human_task(
            task_id=finance.pk, user=bob, channel=INBOX, values={"cost_centre": "FIN-1200"}
        )

        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert run.results["finance_approval"]["payload"]["values"] == {"cost_centre": "FIN-1200"}
        payment = ServiceEffect.objects.get(run_id=run.pk, action="pay")
        assert payment.data["cost_centre"] == "FIN-1200"
