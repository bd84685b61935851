"""A data-entry task in a real headless Chromium (Debian's), driven by Playwright: bob types
the payee's bank details, the draft is kept as he types and survives a reload, then he
completes it, first with a value the form refuses, then with a good one."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from approvals.models import HumanTask
from approvals.states import TaskState
from tests.e2e import test_inbox_browser as inbox
from tests.e2e.conftest import wait_until
from workflows.states import RunState

pytestmark = pytest.mark.e2e

# The inbox's browser tests' Chromium and sign-in, shared: every page is watched, and
# any Content-Security-Policy violation or console error fails the test (the refused
# completion's 422 is one they expect).
browser = inbox.browser
watched = inbox.watched
sign_in = inbox.sign_in
shoot = inbox.shoot

IBAN = "DE89370400440532013000"


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
