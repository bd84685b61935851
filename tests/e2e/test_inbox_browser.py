"""Reviewers working the inbox in a real headless Chromium (Debian's), driven by Playwright.

Each test checks what the reviewer sees and that the run moved on in the database.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    expect,
    sync_playwright,
)
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from approvals.models import Snooze
from approvals.states import TaskState
from tests.e2e.conftest import wait_until
from workflows import engine
from workflows.states import StepState

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("BATON_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(os.environ.get("BATON_SCREENSHOTS", "/tmp/baton-screenshots"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)"
        )
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM
    # calls are still plain synchronous code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# Chromium shows a refused script or style only in the console: the page reports each
# Content-Security-Policy violation there too, with what was refused and where.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.effectiveDirective} refused ${event.blockedURI}`
    + ` at ${event.sourceFile}:${event.lineNumber} (${event.sample})`);
});
"""
# A refusal the page shows in words (403, 404, 409, 422) is expected; Chromium logs
# its answer as a failed resource all the same.
EXPECTED = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")


class Watched:
    """Browser contexts on the live server that record every CSP violation, console
    error and uncaught error of their pages in `problems`."""

    def __init__(self, browser: Browser, base_url: str) -> None:
        self.browser = browser
        self.base_url = base_url
        self.contexts: list[BrowserContext] = []
        self.problems: list[str] = []

    def open(self) -> BrowserContext:
        context = self.browser.new_context(base_url=self.base_url)
        context.add_init_script(script=REPORT_VIOLATIONS)
        context.on("console", self._console)
        context.on("weberror", lambda error: self._record(f"uncaught: {error.error}"))
        self.contexts.append(context)
        return context

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self._record(f"console {message.type} on {message.location['url']}: {message.text}")

    def _record(self, problem: str) -> None:
        if not EXPECTED.search(problem):
            self.problems.append(problem)

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def watched(browser, live_server) -> Iterator[Watched]:
    """Every browser test's pages, watched: a test fails if any had a problem."""
    contexts = Watched(browser, live_server.url)
    yield contexts
    contexts.close()
    assert not contexts.problems, "the browser reported:\n" + "\n".join(contexts.problems)


@pytest.fixture
def sign_in(watched) -> Callable[[str], Page]:
    def open_as(username: str) -> Page:
        page = watched.open().new_page()
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill("baton-demo")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
        return page

    return open_as


def shoot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def step_state(run, node: str) -> str:
    return run.steps.get(node=node, kind="forward").state


class TestInbox:
    def test_carol_filters_then_approves_from_the_list(self, sign_in, start_expense):
        start_expense(title="Hotel in Paris")
        run = start_expense(title="Train to Lyon")
        page = sign_in("carol")
        expect(page.get_by_role("row")).to_have_count(3)  # header + two tasks

        page.get_by_label("Search titles").fill("lyon")
        page.get_by_role("button", name="Filter").click()
        expect(page.get_by_role("row")).to_have_count(2)
        shoot(page, "inbox-filtered")
        page.get_by_role("button", name=re.compile("Approve Expense: Train to Lyon")).click()

        row = page.locator("tr", has_text="Train to Lyon")
        expect(row.get_by_role("status")).to_have_text("Approved.")
        expect(row).to_contain_text("Completed: approved")
        assert step_state(run, "manager_approval") == StepState.SUCCEEDED
        assert run.steps.filter(node="pay").exists()  # the run moved on to paying

    def test_approving_with_the_keyboard(self, sign_in, start_expense):
        run = start_expense()
        page = sign_in("carol")

        approve = page.get_by_role("button", name=re.compile("Approve Expense"))
        approve.focus()
        page.keyboard.press("Enter")

        expect(page.get_by_role("status")).to_have_text("Approved.")
        assert step_state(run, "manager_approval") == StepState.SUCCEEDED

    def test_carol_snoozes_a_row_for_the_time_chosen_once_for_the_table(
        self, sign_in, start_expense, carol
    ):
        start_expense(title="Hotel in Paris")
        run = start_expense(title="Train to Lyon")
        page = sign_in("carol")

        page.get_by_label("Snooze for").select_option("Next week")
        page.get_by_role("button", name=re.compile("Snooze Expense: Train to Lyon")).click()

        expect(page.locator("tr", has_text="Train to Lyon")).to_have_count(0)
        expect(page.locator("tr", has_text="Hotel in Paris")).to_be_visible()
        snoozed = Snooze.objects.get(task=run.human_tasks.get(), user=carol)
        assert snoozed.until > timezone.now() + timedelta(days=6)

    def test_bob_claims_from_his_groups_queue_and_only_that_row_changes(
        self, sign_in, finance_task
    ):
        page = sign_in("bob")
        page.goto("/?tab=queue")

        page.get_by_role(
            "button", name=re.compile(f"Claim {re.escape(finance_task.title)}")
        ).click()

        row = page.locator(f"#row-{finance_task.pk}")
        expect(row.get_by_role("status")).to_have_text("Claimed: it is yours now.")
        expect(row.get_by_role("button", name=re.compile("Claim"))).to_have_count(0)
        expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
        finance_task.refresh_from_db()
        assert finance_task.state == TaskState.CLAIMED


class TestDecidedByMe:
    def test_carol_finds_what_she_decided_and_what_became_of_the_request(
        self, sign_in, start_expense
    ):
        start_expense(title="Hotel in Paris")
        run = start_expense(title="Train to Lyon")
        task = run.human_tasks.get()
        page = sign_in("carol")
        page.get_by_role("button", name=re.compile("Approve Expense: Train to Lyon")).click()
        expect(page.locator("tr", has_text="Train to Lyon").get_by_role("status")).to_have_text(
            "Approved."
        )
        run.refresh_from_db()

        page.get_by_role("link", name="Decided by me").click()

        expect(page.get_by_role("link", name="Decided by me")).to_have_attribute(
            "aria-current", "page"
        )
        rows = page.locator("#decided-list tbody tr")
        expect(rows).to_have_count(1)  # not the hotel, still hers to decide
        expect(rows.first).to_contain_text("Train to Lyon")
        expect(rows.first).to_contain_text("Approved")
        expect(rows.first).to_contain_text(run.get_state_display().capitalize())
        expect(page.get_by_role("button", name=re.compile("Approve"))).to_have_count(0)
        shoot(page, "inbox-decided")
        rows.first.get_by_role("link", name=re.compile("Train to Lyon")).click()
        expect(page).to_have_url(re.compile(f"/tasks/{task.pk}/"))


class TestRefusals:
    def test_delegated_rows_offer_no_decision(self, sign_in, start_expense):
        run = start_expense()
        page = sign_in("carol")
        page.get_by_role("link", name=re.compile("Expense: Train to Lyon")).click()
        page.get_by_label("Delegate to (you stay the owner)").fill("bob")
        page.get_by_role("button", name="Delegate").click()
        expect(page.get_by_role("status")).to_contain_text("Delegated to bob")

        page.goto("/?tab=delegated")

        row = page.locator(f"#row-{run.human_tasks.get().pk}")
        expect(row).to_contain_text("bob decides it now")
        expect(row.get_by_role("button", name=re.compile("Approve"))).to_have_count(0)

    def test_a_refused_row_action_says_why_in_the_row_and_keeps_the_page(
        self, sign_in, start_expense, settings
    ):
        # DEBUG on, as in the demo where django-htmx's debug handler swapped a 404
        # answer over the whole page, leaving one bare row.
        settings.DEBUG = True
        run = start_expense(title="Hotel in Paris")
        start_expense(title="Train to Lyon")
        page = sign_in("carol")
        task = run.human_tasks.get()
        run.delete()  # gone while the page was open (an operator purged the run)

        page.get_by_role("button", name=re.compile("Approve Expense: Hotel in Paris")).click()

        expect(page.locator(f"#row-{task.pk}").get_by_role("alert")).to_have_text(
            "No such task (or it is not yours to see)."
        )
        expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
        expect(page.locator("tr", has_text="Train to Lyon")).to_be_visible()


class TestTaskPage:
    def test_rejecting_needs_a_reason_then_ends_the_expense_unpaid(self, sign_in, start_expense):
        run = start_expense()
        page = sign_in("carol")
        page.get_by_role("link", name=re.compile("Expense: Train to Lyon")).click()

        page.get_by_role("button", name="Reject").click()
        expect(page.get_by_role("alert")).to_have_text(
            "Say why you reject it: a reason is required."
        )
        assert step_state(run, "manager_approval") == StepState.WAITING

        page.get_by_label("Reason for rejecting (required)").fill("Not in this year's budget")
        page.get_by_role("button", name="Reject").click()

        expect(page.get_by_role("status")).to_have_text("Rejected.")
        expect(page.locator("#decision-panel")).to_contain_text("Rejected by Carol")
        expect(page.locator("#task-details")).to_contain_text("rejected by carol via inbox")
        shoot(page, "task-rejected")
        assert step_state(run, "manager_approval") == StepState.SUCCEEDED
        assert run.human_tasks.get().outcome == "rejected"

    def test_carol_delegates_to_bob_who_approves(self, sign_in, start_expense):
        run = start_expense()
        carol = sign_in("carol")
        carol.get_by_role("link", name=re.compile("Expense: Train to Lyon")).click()

        carol.get_by_label("Delegate to (you stay the owner)").fill("bob")
        carol.get_by_role("button", name="Delegate").click()
        expect(carol.get_by_role("status")).to_contain_text("Delegated to bob")

        bob = sign_in("bob")
        row = bob.locator("tr", has_text="Train to Lyon")
        expect(row).to_contain_text("delegated by carol")
        row.get_by_role("button", name=re.compile("Approve")).click()
        expect(row.get_by_role("status")).to_have_text("Approved.")

        task = run.human_tasks.get()
        assert (task.decided_by.username, task.owner.username) == ("bob", "carol")
        assert step_state(run, "manager_approval") == StepState.SUCCEEDED

    def test_carol_reassigns_to_bob_for_good(self, sign_in, start_expense):
        run = start_expense()
        page = sign_in("carol")
        page.get_by_role("link", name=re.compile("Expense: Train to Lyon")).click()

        page.get_by_label("Reassign to (for good)").fill("bob")
        page.get_by_role("button", name="Reassign").click()

        expect(page.get_by_role("status")).to_have_text("Reassigned to bob.")
        expect(page.locator("#decision-panel")).to_contain_text("with Bob")
        task = run.human_tasks.get()
        assert (task.state, task.assignee.username) == (TaskState.CLAIMED, "bob")


class TestContentSecurityPolicy:
    """Every flow of the inbox, the task page, the admin and the API's docs, with the
    policy on, and not one violation or console error (the `watched` fixture)."""

    def test_the_watcher_sees_a_violation_when_there_is_one(self, sign_in, watched, people):
        page = sign_in("carol")

        page.evaluate(
            "() => { const style = document.createElement('style');"
            " style.textContent = 'main { color: red }'; document.head.append(style); }"
        )

        page.wait_for_timeout(300)  # the violation event is queued as a task
        assert any("CSP violation: style-src-elem refused inline" in p for p in watched.problems)
        watched.problems.clear()

    def test_the_inbox_flows_run_without_a_violation(
        self, sign_in, watched, start_expense, settings, django_user_model
    ):
        settings.BATON_INBOX_POLL_SECONDS = 1  # so the list refreshes itself meanwhile
        start_expense(title="Hotel in Paris")
        start_expense(title="Taxi to the station")
        run = start_expense(title="Train to Lyon")
        carol = sign_in("carol")

        answer = carol.goto("/")
        policy = answer.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "'unsafe-inline'" not in policy
        assert "'unsafe-eval'" not in policy
        carol.get_by_label("Search titles").fill("lyon")
        carol.get_by_role("button", name="Filter").click()
        expect(carol.get_by_role("row")).to_have_count(2)
        carol.get_by_role("button", name=re.compile("Approve Expense: Train to Lyon")).click()
        # The row says "Approved." until the list's next refresh drops the decided task,
        # and here the list refreshes every second: on a loaded machine the refresh can
        # come before the check (TestInbox holds the message, at the usual 20 s poll).
        wait_until(
            lambda: run.human_tasks.get().outcome == "approved",
            timeout=10,
            what="carol's approval from the row",
        )
        carol.wait_for_timeout(2500)  # two polls of the list
        carol.goto("/")
        carol.get_by_role("link", name=re.compile("Hotel in Paris")).click()
        carol.get_by_role("button", name="Reject").click()
        expect(carol.get_by_role("alert")).to_contain_text("a reason is required")
        picker = carol.get_by_label("Delegate to (you stay the owner)")
        for _ in range(3):
            # The panel may be swapped again under the typing (the list polls every
            # second here), so type once more if no suggestion came back.
            picker.fill("")
            picker.press_sequentially("bo")
            suggestion = carol.locator("#user-options option[value=bob]")
            try:
                suggestion.wait_for(state="attached", timeout=3000)
                break
            except PlaywrightTimeoutError:
                continue
        expect(carol.locator("#user-options option[value=bob]")).to_have_count(1)
        picker.fill("bob")
        carol.get_by_role("button", name="Delegate").click()
        expect(carol.get_by_role("status")).to_contain_text("Delegated to bob")
        carol.goto("/?tab=delegated")
        carol.goto("/away/")
        assert run.human_tasks.get().outcome == "approved"

        django_user_model.objects.create_superuser("root", "root@example.com", "baton-demo")
        root = sign_in("root")
        for path in (
            "/admin/",
            "/admin/approvals/humantask/",
            f"/admin/approvals/humantask/{run.human_tasks.get().pk}/change/",
            "/admin/auth/user/add/",
            "/admin/workflows/workflowrun/",
            "/api/v1/docs",
        ):
            assert root.goto(path).ok, path
        # Swagger UI draws once it has fetched the spec, which the server builds on its first
        # request (some 600 schemas): seconds on a loaded machine, past expect's 5 s.
        expect(root.locator("#swagger-ui")).to_contain_text("Baton API", timeout=60_000)

        assert watched.problems == []


class TestPolling:
    def test_the_list_refreshes_itself_but_not_while_a_row_is_selected(
        self, sign_in, start_expense, settings
    ):
        settings.BATON_INBOX_POLL_SECONDS = 1
        start_expense(title="Hotel in Paris")
        page = sign_in("carol")
        page.get_by_role("checkbox", name=re.compile("Select Expense: Hotel")).check()

        start_expense(title="Train to Lyon")
        page.wait_for_timeout(2500)
        held = page.get_by_role("row").count()
        page.get_by_role("checkbox", name=re.compile("Select Expense: Hotel")).uncheck()
        page.locator("h1").click()  # focus leaves the list

        expect(page.get_by_role("row")).to_have_count(3, timeout=5000)
        assert held == 2  # header + the first task: not refreshed while selected


class TestEmailLink:
    def test_following_an_escalation_link_through_login_to_a_decision(
        self, watched, start_expense, mailoutbox, django_capture_on_commit_callbacks
    ):
        run = start_expense()
        task = run.human_tasks.get()
        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=task.escalate_at + timedelta(minutes=1))
        message = next(m for m in mailoutbox if m.to == ["bob@example.com"])
        path = re.search(r"http://[^/]+(/email/\S+/)", message.body).group(1)
        page = watched.open().new_page()

        page.goto(path)
        expect(page.get_by_role("heading", name=task.title)).to_be_visible()
        assert step_state(run, "manager_approval") == StepState.WAITING
        page.get_by_role("link", name="Sign in to decide").click()
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill("baton-demo")
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("button", name="Confirm: approve").click()

        expect(page.get_by_role("status")).to_contain_text("You approved")
        shoot(page, "email-link-decided")
        task.refresh_from_db()
        assert (task.decided_by.username, task.channel) == ("bob", "email")
        assert step_state(run, "manager_approval") == StepState.SUCCEEDED
