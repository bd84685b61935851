"""Baton on a phone: Chromium at 390 x 844, where nothing may scroll sideways and a
reviewer still reaches the decision panel and decides."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from approvals.states import TaskState
from tests.e2e import test_inbox_browser as inbox

browser = inbox.browser
watched = inbox.watched
sign_in = inbox.sign_in
shoot = inbox.shoot

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}


def on_phone(page: Page) -> Page:
    page.set_viewport_size(PHONE)
    return page


def sideways_overflow(page: Page) -> int:
    """How many pixels the page is wider than the phone's screen (0: none)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def on_first_screen(element) -> bool:
    """Whether the element lies wholly on the first screen, without scrolling."""
    box = element.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]


class TestOnAPhone:
    def test_no_page_scrolls_sideways(self, sign_in, start_expense, employees):
        run = start_expense()
        task = run.human_tasks.get(node="manager_approval")
        reviewer = on_phone(sign_in("carol"))
        requester = on_phone(sign_in("alice"))
        pages = [
            (reviewer, "/", "inbox"),
            (reviewer, f"/tasks/{task.pk}/", "task"),
            (reviewer, "/notifications/", "notifications"),
            (requester, "/requests/new/", "new-request"),
            (requester, "/requests/new/expense/", "expense-form"),
            (requester, "/requests/new/order/", "order-form"),
            (requester, "/requests/", "my-requests"),
            (requester, f"/requests/{run.pk}/", "request"),
        ]

        wide = {}
        for page, path, name in pages:
            page.goto(path)
            shoot(page, f"phone-{name}")
            if overflow := sideways_overflow(page):
                wide[path] = overflow

        assert wide == {}

    def test_the_operators_console_does_not_scroll_sideways_either(
        self, sign_in, start_expense, operator
    ):
        operator.is_staff = True
        operator.save()
        run = start_expense()
        page = on_phone(sign_in("olga"))

        wide = {}
        for path, name in [
            ("/console/", "console-runs"),
            (f"/console/runs/{run.pk}/", "console-run"),
            ("/console/sla/", "console-sla"),
            ("/console/versions/", "console-versions"),
        ]:
            page.goto(path)
            shoot(page, f"phone-{name}")
            if overflow := sideways_overflow(page):
                wide[path] = overflow

        assert wide == {}

    def test_the_inbox_shows_the_first_task_on_the_first_screen(self, sign_in, start_expense):
        task = start_expense().human_tasks.get(node="manager_approval")
        page = on_phone(sign_in("carol"))

        page.goto("/")

        first = page.get_by_role("link", name=task.title)
        expect(first).to_be_visible()
        assert on_first_screen(first)
        expect(page.get_by_role("search")).to_be_hidden()
        page.get_by_text("Filters", exact=True).click()
        expect(page.get_by_role("search")).to_be_visible()

    def test_a_task_page_puts_the_decision_first(self, sign_in, start_expense):
        task = start_expense().human_tasks.get(node="manager_approval")
        page = on_phone(sign_in("carol"))

        page.goto(f"/tasks/{task.pk}/")

        approve = page.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_visible()
        assert on_first_screen(approve)
        shoot(page, "phone-task-decision-first")

    def test_a_reviewer_reaches_the_decision_panel_and_approves(self, sign_in, start_expense):
        task = start_expense().human_tasks.get(node="manager_approval")
        page = on_phone(sign_in("carol"))

        page.get_by_role("link", name=task.title).click()
        approve = page.get_by_role("button", name="Approve", exact=True)
        approve.scroll_into_view_if_needed()
        expect(approve).to_be_in_viewport()
        approve.click()

        expect(page.get_by_role("status").first).to_contain_text("Approved")
        task.refresh_from_db()
        assert task.state == TaskState.COMPLETED
        assert sideways_overflow(page) == 0

    def test_finance_fills_in_the_cost_centre_on_a_phone(self, sign_in, finance_task):
        page = on_phone(sign_in("bob"))
        page.goto(f"/tasks/{finance_task.pk}/")
        approve = page.get_by_role("button", name="Approve", exact=True)
        approve.scroll_into_view_if_needed()

        approve.click()

        expect(page.locator("#field-form-cost_centre-error")).to_have_text("This is required.")
        assert sideways_overflow(page) == 0
        shoot(page, "phone-task-form-error")
        page.get_by_label("Cost centre").fill("FIN-1200")
        page.get_by_role("button", name="Approve", exact=True).click()
        expect(page.get_by_role("status").first).to_contain_text("Approved")
        finance_task.refresh_from_db()
        assert finance_task.form_values == {"cost_centre": "FIN-1200"}
        assert sideways_overflow(page) == 0

    def test_a_reviewer_sends_a_request_back_and_later_approves_it_on_a_phone(
        self, sign_in, start_expense, drive
    ):
        from approvals.human_tasks import revisions

        run = start_expense()
        task = run.human_tasks.get(node="manager_approval")
        page = on_phone(sign_in("carol"))
        page.goto(f"/tasks/{task.pk}/")

        reason = page.get_by_label("What should change")
        reason.scroll_into_view_if_needed()
        reason.fill("Add the ticket number to the description.")
        send_back = page.get_by_role("button", name="Request changes")
        send_back.scroll_into_view_if_needed()
        expect(send_back).to_be_in_viewport()
        assert sideways_overflow(page) == 0
        send_back.click()

        expect(page.get_by_role("status").first).to_contain_text("Sent back for changes")
        assert sideways_overflow(page) == 0
        shoot(page, "phone-changes-requested")
        requester = on_phone(sign_in("alice"))
        requester.goto(f"/requests/{run.pk}/revise/")
        assert sideways_overflow(requester) == 0
        requester.get_by_label("Description").fill("Ticket 4711")
        requester.get_by_role("button", name="Resubmit request").click()
        expect(requester.get_by_role("status")).to_contain_text("Resubmitted")
        expect(requester.get_by_role("table", name="What the resubmission changed")).to_be_visible()
        assert sideways_overflow(requester) == 0
        shoot(requester, "phone-request-resubmitted")
        assert revisions.open_revision(run) is None

        again = drive(run).human_tasks.get(node="manager_approval", state=TaskState.CLAIMED)
        page.goto(f"/tasks/{again.pk}/")
        approve = page.get_by_role("button", name="Approve", exact=True)
        approve.scroll_into_view_if_needed()
        expect(approve).to_be_in_viewport()
        approve.click()
        expect(page.get_by_role("status").first).to_contain_text("Approved")
        assert sideways_overflow(page) == 0
        assert drive(run).state == "succeeded"
