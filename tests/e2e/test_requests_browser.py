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
        expect(page.get_by_role("img", name="Workflow diagram")).to_contain_text("Manager approval")
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
        row = page.locator("tr", has_text="€1,500.00")
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


class TestSentBackForChanges:
    def test_alice_changes_the_amount_carol_and_finance_approve_and_alice_sees_it_paid(
        self, sign_in, employees, drive
    ):
        alice = sign_in("alice")
        alice.get_by_role("navigation", name="Main").get_by_role("link", name="New request").click()
        alice.get_by_role("link", name="Expense").click()
        alice.get_by_label("Title").fill("Conference in Berlin")
        alice.get_by_label("Amount").fill("1500.001")
        alice.get_by_label("Currency").fill("EUR")
        alice.get_by_role("button", name="Send request").click()
        expect(alice.locator("#field-amount-error")).to_have_text(
            "Enter an amount with up to two decimals, e.g. 42.50."
        )
        alice.get_by_label("Amount").fill("1500.00")
        alice.get_by_role("button", name="Send request").click()
        expect(alice.get_by_role("status")).to_have_text("Your request was sent.")
        run = drive(WorkflowRun.objects.get())
        alice.get_by_role("navigation", name="Main").get_by_role("link", name="My requests").click()
        row = alice.locator("tr", has_text="Conference in Berlin")
        expect(row).to_contain_text("Manager approval: waiting for a decision by Carol")

        # carol sends it back, saying why
        carol = sign_in("carol")
        carol.get_by_role("link", name=re.compile("Conference in Berlin — €1,500.00")).click()
        carol.get_by_role("button", name="Request changes").click()
        panel = carol.locator("#decision-panel")
        expect(panel.get_by_role("alert")).to_contain_text("a reason is required")
        carol.get_by_label("What should change").fill("Only the conference fee, not the dinner.")
        carol.get_by_role("button", name="Request changes").click()
        expect(panel.get_by_role("status")).to_contain_text("Sent back for changes")
        shoot(carol, "request-changes-sent")
        run = drive(run)

        # alice reads why, changes the amount and resubmits
        alice.reload()
        expect(row).to_contain_text("Changes for the manager: waiting for changes by Alice")
        row.get_by_role("link", name="Expense: Conference in Berlin").click()
        revision = alice.locator("#revision-panel")
        expect(revision).to_contain_text("Only the conference fee, not the dinner.")
        revision.get_by_role("link", name="Change and resubmit…").click()
        expect(alice.get_by_label("Amount")).to_have_value("1500.00")
        expect(alice.get_by_label("Title")).to_have_value("Conference in Berlin")
        alice.get_by_label("Amount").fill("-1")
        alice.get_by_role("button", name="Resubmit request").click()
        expect(alice.get_by_role("alert")).to_contain_text("Your request was not resubmitted")
        run.refresh_from_db()
        assert run.input["amount"] == "1500.00"
        alice.get_by_label("Amount").fill("1350.00")
        alice.get_by_label(re.compile("A note for")).fill("Dinner removed.")
        shoot(alice, "request-revise-form")
        alice.get_by_role("button", name="Resubmit request").click()
        expect(alice.get_by_role("status")).to_contain_text("Resubmitted")
        run = drive(run)
        assert run.input["amount"] == "1350.00"

        # carol approves it this time; finance (bob) approves with a cost centre
        carol.goto("/")
        carol.get_by_role("link", name=re.compile("Conference in Berlin — €1,350.00")).click()
        carol.get_by_role("button", name="Approve", exact=True).click()
        expect(carol.locator("#decision-panel").get_by_role("status")).to_have_text("Approved.")
        run = drive(run)
        bob = sign_in("bob")
        bob.goto("/?tab=queue")
        bob.locator("tr", has_text="€1,350.00").get_by_role(
            "link", name=re.compile("fill in its form")
        ).click()
        bob.get_by_label("Cost centre").fill("FIN-1200")
        bob.get_by_role("button", name="Approve", exact=True).click()
        expect(bob.locator("#decision-panel").get_by_role("status")).to_have_text("Approved.")
        run = drive(run)
        assert run.state == "succeeded"

        # alice sees it paid, with what she changed and the cost centre
        alice.goto(f"/requests/{run.pk}/")
        expect(alice.locator(".state").first).to_have_text("succeeded")
        changed = alice.get_by_role("table", name="What the resubmission changed")
        expect(changed.get_by_role("row", name=re.compile("Amount"))).to_contain_text("€1,500.00")
        expect(changed.get_by_role("row", name=re.compile("Amount"))).to_contain_text("€1,350.00")
        finance = alice.locator("article.decision-entry", has_text="Approved by Bob")
        expect(finance.locator(".form-values")).to_contain_text("FIN-1200")
        asked = alice.get_by_role("region", name="What was asked")
        expect(asked).to_contain_text("€1,350.00")
        shoot(alice, "request-paid-with-changes")
