"""A data-entry task in a real headless Chromium (Debian's), driven by Playwright: bob types
the payee's bank details, the draft is kept as he types and survives a reload, then he
completes it, first with a value the form refuses, then with a good one.

The browser fixtures are those of tests/e2e/test_inbox_browser.py, copied.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    expect,
    sync_playwright,
)

from approvals.models import HumanTask
from approvals.states import TaskState
from tests.e2e.conftest import wait_until
from workflows.states import RunState

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
IBAN = "DE89370400440532013000"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)"
        )
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.effectiveDirective} refused ${event.blockedURI}`
    + ` at ${event.sourceFile}:${event.lineNumber} (${event.sample})`);
});
"""
# The refused completion answers 422 on purpose; Chromium logs it as a failed resource.
EXPECTED = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")


class Watched:
    """Browser contexts that record every CSP violation, console error and uncaught error."""

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


@pytest.fixture
def entry_task(people, start) -> HumanTask:
    run = start("test_bank_details", {"requester": "alice", "amount": "120.00"})
    return run.human_tasks.get()


class TestBankDetails:
    def test_bob_drafts_reloads_then_completes_after_a_refused_iban(
        self, sign_in, entry_task, drive
    ):
        page = sign_in("bob")
        page.goto("/?tab=queue")
        page.get_by_role("link", name=re.compile("Complete Bank details")).click()
        holder = page.locator("#field-form-account_holder")
        iban = page.locator("#field-form-iban")

        holder.press_sequentially("Alice Archer")
        iban.press_sequentially("DE89 3704")
        expect(page.locator("#draft-status")).to_contain_text("Draft saved at")
        # The last keystroke's save goes half a second after it: wait for it to land.
        wait_until(
            lambda: (
                HumanTask.objects.get(pk=entry_task.pk).draft
                == {"account_holder": "Alice Archer", "iban": "DE89 3704"}
            ),
            timeout=10,
            what="the draft of everything typed",
        )

        page.reload()
        expect(holder).to_have_value("Alice Archer")
        expect(iban).to_have_value("DE89 3704")
        shoot(page, "user-task-draft-after-reload")

        page.get_by_role("button", name="Complete", exact=True).click()
        expect(page.get_by_role("alert").first).to_contain_text("Nothing was completed")
        expect(page.locator("#field-form-iban-error")).to_be_visible()
        expect(page.locator("#field-form-iban")).to_have_value("DE89 3704")
        expect(page.locator("#field-form-account_holder")).to_have_value("Alice Archer")
        entry_task.refresh_from_db()
        assert entry_task.state == TaskState.OPEN

        page.locator("#field-form-iban").fill(IBAN)
        page.get_by_role("button", name="Complete", exact=True).click()

        expect(page.locator("#decision-panel").get_by_role("status").first).to_have_text(
            "Completed."
        )
        shoot(page, "user-task-completed")
        entry_task.refresh_from_db()
        assert (entry_task.state, entry_task.outcome, entry_task.draft) == (
            TaskState.COMPLETED,
            "completed",
            {},
        )
        run = drive(entry_task.run)
        assert run.state == RunState.SUCCEEDED
        assert run.results["pay"]["iban"] == IBAN
