"""A requester in a real headless Chromium (Debian's), driven by Playwright: alice sends an
expense from its form and follows it to her manager; finance records a cost centre she
then sees on her request's page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e import test_inbox_browser as inbox
from workflows.models import WorkflowRun

# The inbox's browser tests' Chromium and sign-in, shared: every page is watched, and
# any Content-Security-Policy violation or console error fails the test.
browser = inbox.browser
watched = inbox.watched
sign_in = inbox.sign_in
shoot = inbox.shoot

pytestmark = pytest.mark.e2e


class TestRequestingAnExpense:
    def test_alice_fixes_a_field_error_then_follows_her_expense_to_her_manager(
        self, sign_in, employees, drive
    ):
        page = sign_in("alice")
        nav = page.get_by_role("navigation", name="Main")
        nav.get_by_role("link", name="New request").click()
        page.get_by_role("link", name="Expense").click()

        page.get_by_label("Title").fill("Train to Lyon")
        page.get_by_label("Amount").fill("12.345")
        page.get_by_label("Currency").fill("EUR")
        page.get_by_role("button", name="Send request").click()

        expect(page.get_by_role("alert")).to_contain_text("Your request was not sent")
        expect(page.locator("#field-amount-error")).to_have_text(
            "Enter an amount with up to two decimals, e.g. 42.50."
        )
        expect(page.get_by_label("Amount")).to_have_attribute("aria-invalid", "true")
        expect(page.get_by_label("Title")).to_have_value("Train to Lyon")
        expect(page.get_by_label("Amount")).to_have_value("12.345")
        expect(page.get_by_label("Currency")).to_have_value("EUR")
        shoot(page, "request-form-error")
        assert WorkflowRun.objects.count() == 0

        page.get_by_label("Amount").fill("120.00")
        page.get_by_role("button", name="Send request").click()

        expect(page.get_by_role("heading", name="Expense: Train to Lyon")).to_be_visible()
        expect(page.get_by_role("status")).to_have_text("Your request was sent.")
        run = WorkflowRun.objects.get()
        assert (run.started_by.username, run.input["requester"]) == ("alice", "alice")

        drive(run)  # what a worker does: the submit step asks alice's manager
        nav.get_by_role("link", name="My requests").click()

        row = page.locator("tr", has_text="Expense: Train to Lyon")
        expect(row.get_by_role("cell").nth(1)).to_have_text("waiting")
        expect(row).to_contain_text("Manager approval: waiting for a decision by Carol")
        shoot(page, "my-requests")
        row.get_by_role("link", name="Expense: Train to Lyon").click()
        expect(page.locator("#where")).to_be_visible()
        expect(page.get_by_role("img", name="Workflow diagram")).to_contain_text("manager_approval")
        shoot(page, "request-page")


class TestOrderItems:
    def test_adding_a_row_keeps_what_was_typed_and_the_order_starts_with_both(
        self, sign_in, employees
    ):
        page = sign_in("alice")
        page.goto("/requests/new/order/")
        page.get_by_label("Order id").fill("A-7")
        page.get_by_label("Customer email").fill("ada@example.com")
        page.get_by_label("SKU").fill("BOOK-1")
        page.get_by_label("Quantity").fill("2")

        page.get_by_role("button", name="Add a row to items").click()

        expect(page.get_by_label("SKU")).to_have_count(2)
        expect(page.get_by_label("SKU").first).to_have_value("BOOK-1")
        expect(page.get_by_label("SKU").nth(1)).to_be_focused()
        expect(page.get_by_label("Order id")).to_have_value("A-7")
        page.get_by_label("SKU").nth(1).fill("PEN-3")
        page.get_by_label("Quantity").nth(1).fill("1")
        page.get_by_label("Amount").fill("19.90")
        page.get_by_label("Currency").fill("EUR")
        shoot(page, "request-order-rows")
        page.get_by_role("button", name="Send request").click()

        expect(page.get_by_role("heading", name="Order: A-7")).to_be_visible()
        assert WorkflowRun.objects.get().input["items"] == [
            {"sku": "BOOK-1", "quantity": 2},
            {"sku": "PEN-3", "quantity": 1},
        ]


class TestFinanceRecordsACostCentre:
    def test_bob_fixes_an_empty_cost_centre_then_alice_sees_it_on_her_request(
        self, sign_in, finance_task, drive
    ):
        page = sign_in("bob")
        page.goto("/?tab=queue")
        row = page.locator("tr", has_text="1500.00 EUR")
        expect(row.get_by_role("checkbox")).to_have_count(0)  # no bulk approval without it
        row.get_by_role("link", name=re.compile("fill in its form")).click()
        expect(page.get_by_role("group", name="To approve, fill in")).to_be_visible()

        page.get_by_label("Cost centre").fill("")
        page.get_by_role("button", name="Approve", exact=True).click()

        panel = page.locator("#decision-panel")
        expect(panel.get_by_role("alert").first).to_contain_text(
            "Fill in the form to approve: Cost centre: This is required."
        )
        expect(page.locator("#field-form-cost_centre-error")).to_have_text("This is required.")
        expect(page.get_by_label("Cost centre")).to_have_attribute("aria-invalid", "true")
        shoot(page, "task-form-error")
        finance_task.refresh_from_db()
        assert (finance_task.state, finance_task.outcome) == ("open", "")

        page.get_by_label("Cost centre").fill("FIN-1200")
        page.get_by_label("Comment (optional)").fill("Within budget")
        page.get_by_role("button", name="Approve", exact=True).click()

        expect(panel.get_by_role("status")).to_have_text("Approved.")
        expect(panel.locator(".form-values")).to_contain_text("Cost centre")
        expect(panel.locator(".form-values")).to_contain_text("FIN-1200")
        shoot(page, "task-form-approved")
        run = drive(finance_task.run)
        assert run.state == "succeeded"
        assert run.results["finance_approval"]["payload"]["values"] == {"cost_centre": "FIN-1200"}

        alice = sign_in("alice")
        alice.goto(f"/requests/{run.pk}/")
        decision = alice.locator("article.decision-entry", has_text="Approved by Bob")
        expect(decision).to_contain_text("Cost centre")
        expect(decision.locator(".form-values")).to_contain_text("FIN-1200")
        shoot(alice, "request-cost-centre")
