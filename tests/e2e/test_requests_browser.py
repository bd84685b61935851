"""A requester in a real headless Chromium (Debian's), driven by Playwright: alice sends an
expense from its form and follows it to her manager."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e import test_inbox_browser as inbox
from workflows.models import WorkflowRun

# The inbox's browser tests' Chromium and sign-in, shared.
browser = inbox.browser
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
