"""An operator in the run console, in a real headless Chromium (Debian's), driven by
Playwright: olga finds a dead-lettered order by its id and retries it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from approvals import human_tasks
from approvals.human_tasks import inbox_entries
from tests.e2e import test_inbox_browser as inbox
from tests.workflows.test_engine import sweep_until_quiet
from workflows.models import WorkflowRun
from workflows.states import RunState

# The inbox's browser tests' Chromium and sign-in, shared: every page is watched, and
# any Content-Security-Policy violation or console error fails the test.
browser = inbox.browser
watched = inbox.watched
sign_in = inbox.sign_in
shoot = inbox.shoot

pytestmark = pytest.mark.e2e


@pytest.fixture
def console_operator(operator) -> User:
    operator.is_staff = True
    operator.save()
    return operator


class TestRetryingADeadLetter:
    def test_olga_finds_the_dead_lettered_order_by_its_id_and_retries_it(
        self, sign_in, console_operator, start, drive, order_input
    ):
        start("order", order_input(order_id="A-1001"))
        failing = order_input(order_id="B-2002", simulate={"shipping": "fail", "refund": "outage"})
        run = sweep_until_quiet(drive(start("order", failing)), drive)
        assert run.state == RunState.DEAD_LETTERED

        page = sign_in("olga")
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        page.get_by_role("link", name="Dead letters").click()
        runs = page.locator("#run-list tbody tr")
        expect(runs).to_have_count(1)
        expect(runs.first).to_contain_text("dead lettered", ignore_case=True)
        page.get_by_role("link", name="Runs", exact=True).click()
        page.get_by_label("Search business keys or run id").fill("B-2002")
        page.get_by_role("button", name="Filter").click()
        expect(runs).to_have_count(1)
        expect(runs.first).to_contain_text("Order id B-2002")
        shoot(page, "console-runs")

        runs.first.get_by_role("link").click()
        expect(page.get_by_role("heading", name="Order v1: B-2002")).to_be_visible()
        expect(page.get_by_role("img", name="Workflow diagram")).to_contain_text("Ship")
        expect(
            page.locator(
                "#step-" + str(run.steps.get(node="charge_payment", kind="compensation").pk)
            )
        ).to_contain_text("failed", ignore_case=True)
        shoot(page, "console-run-dead-letter")

        page.get_by_role("link", name="Retry the failed undo…").click()
        expect(page.get_by_text("Retry the failed undo?")).to_be_visible()
        page.get_by_label("Why (kept in the audit trail, with your name)").fill(
            "The refund service is back"
        )
        shoot(page, "console-confirm-retry")
        page.get_by_role("button", name="Yes, retry the failed undo").click()

        expect(page.get_by_role("status")).to_have_text("Retrying its failed compensation.")
        expect(page.locator(".state").first).to_have_text("compensating", ignore_case=True)
        expect(page.locator("#action-panel")).to_contain_text("Nothing to do")
        run.refresh_from_db()
        assert run.state == RunState.COMPENSATING
        entry = LogEntry.objects.get_for_object(run).get()
        assert (entry.actor.username, entry.additional_data["comment"]) == (
            "olga",
            "The refund service is back",
        )

        drive(run)  # what a worker does: the refund goes through this time
        page.reload()
        expect(page.locator(".state").first).to_have_text("compensated", ignore_case=True)
        expect(page.locator("#timeline")).to_be_visible()
        expect(page.get_by_text("run_retried by olga via console")).to_be_visible()
        shoot(page, "console-after-retry")


class TestSlaDashboard:
    def test_olga_sees_an_overdue_expense_and_opens_its_run(
        self, sign_in, console_operator, start_expense
    ):
        late = start_expense(title="Hotel in Lyon").human_tasks.get()
        late.due_at = timezone.now() - timedelta(hours=5)
        late.save()
        inbox_entries.refresh(late)  # as the services do whenever a due time changes
        train = start_expense(title="Train to Lyon")
        # Ended a day ago, in failure (written as the engine leaves a failed run).
        WorkflowRun.objects.filter(pk=train.pk).update(
            state=RunState.FAILED,
            created_at=timezone.now() - timedelta(days=1, hours=3),
            finished_at=timezone.now() - timedelta(days=1),
        )

        page = sign_in("olga")
        page.goto("/console/")
        page.get_by_role("link", name="SLA dashboard").click()

        expect(page.get_by_role("heading", name="SLA dashboard")).to_be_visible()
        expect(page.locator("#by-type ~ table tbody tr").first).to_contain_text("Expense")
        overdue = page.locator("section", has=page.locator("#overdue"))
        expect(overdue).to_contain_text("Expense: Hotel in Lyon")
        held = page.locator("section", has=page.locator("#by-assignee")).locator("tbody tr")
        expect(held.get_by_role("cell")).to_have_text(["carol", "1", "0", "1", "2"])
        chart = page.get_by_role(
            "img", name="expense: 1 runs finished, 1 of them failed (100.0%)", exact=False
        )
        expect(chart).to_be_visible()
        expect(chart.locator("rect.chart-bad")).to_have_count(14)
        expect(page.get_by_role("img", name="Decisions per day", exact=False)).to_be_visible()
        shoot(page, "console-sla")
        overdue.get_by_role("link", name="its run").click()
        expect(page.get_by_role("heading", name="Expense v1: Hotel in Lyon")).to_be_visible()

        page.go_back()
        throughput = page.locator("section", has=page.locator("#throughput"))
        expense = throughput.locator("table").first.locator("tbody tr", has_text="expense")
        expense.get_by_role("cell").nth(2).get_by_role("link").click()

        expect(page).to_have_url(re.compile(r"state=failed&finished_from=.*&finished_to="))
        expect(page.get_by_label("Finished from")).not_to_have_value("")
        rows = page.locator("#run-list tbody tr")
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("Train to Lyon")


class TestFollowingAGroupsCount:
    def test_olga_clicks_finances_open_count_and_sees_that_many_tasks(
        self, sign_in, console_operator, start_expense, carol, drive
    ):
        start_expense()  # carol's manager task: held by her, in no group's queue
        for title in ("Taxi to Lyon", "Hotel in Lyon"):  # over 1,000 EUR: finance decides
            run = start_expense(amount="1500.00", title=title)
            human_tasks.approve_human_task(
                task_id=run.human_tasks.get().pk, user=carol, channel="inbox"
            )
            drive(run)

        page = sign_in("olga")
        page.goto("/console/")
        page.get_by_role("link", name="SLA dashboard").click()
        finance = page.locator("section", has=page.locator("#by-group")).locator(
            "tbody tr", has_text="finance"
        )
        count = finance.get_by_role("cell").nth(4)
        expect(count).to_have_text("2")
        count.get_by_role("link").click()

        expect(page.get_by_role("heading", name="Tasks")).to_be_visible()
        expect(page).to_have_url(re.compile(r"/console/tasks/\?state=open&group=finance$"))
        expect(page.get_by_label("Offered to group")).to_have_value("finance")
        rows = page.locator("#task-list tbody tr")
        expect(rows).to_have_count(2)
        expect(rows).to_contain_text(["Hotel in Lyon", "Taxi to Lyon"])
        shoot(page, "console-tasks")

        page.set_viewport_size({"width": 390, "height": 844})  # stacked, each cell labelled
        state = rows.first.get_by_role("cell").nth(3)
        label = state.evaluate("cell => getComputedStyle(cell, '::before').content")
        assert label == '"State: "'
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") == 0
        shoot(page, "phone-console-tasks")


class TestSkippingAStuckStep:
    def test_olga_fixes_her_json_then_skips_the_retrying_step(
        self, sign_in, console_operator, start, drive
    ):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}, correlation_id="c-77"))

        page = sign_in("olga")
        page.goto("/console/")
        page.get_by_label("Correlation id").fill("c-77")
        page.get_by_role("button", name="Filter").click()
        page.locator("#run-list tbody tr").first.get_by_role("link").click()
        expect(page.locator("#steps ~ table")).to_contain_text("ServiceUnavailable")
        page.get_by_role("link", name="Skip second with a result…").click()
        page.get_by_label("Its result, as JSON").fill("{'done': true}")
        page.get_by_role("button", name="Yes, skip second").click()

        expect(page.get_by_role("alert")).to_contain_text("The result is not JSON")
        expect(page.get_by_label("Its result, as JSON")).to_have_value("{'done': true}")
        shoot(page, "console-skip-refused")
        page.get_by_label("Its result, as JSON").fill('{"done": true}')
        page.get_by_role("button", name="Yes, skip second").click()

        expect(page.get_by_role("status")).to_contain_text("Skipped second")
        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert run.results["second"] == {"done": True}
        page.reload()
        expect(page.locator(".state").first).to_have_text("succeeded")
        shoot(page, "console-after-skip")


class TestMovingARun:
    def test_olga_moves_a_waiting_expense_back_to_submit(
        self, sign_in, console_operator, start_expense, drive
    ):
        run = start_expense()
        [first] = run.human_tasks.all()

        page = sign_in("olga")
        page.goto(f"/console/runs/{run.pk}/")
        page.get_by_role("link", name="Move to another node…").click()
        page.get_by_label("Move to").select_option("submit")
        page.get_by_label("Why (required").fill("The amount was keyed in wrong.")
        page.get_by_role("button", name="Yes, move it").click()

        expect(page.get_by_role("status")).to_contain_text("Moved to submit")
        expect(page.locator("ol.timeline")).to_contain_text("moved to Submit from Manager approval")
        shoot(page, "console-after-move")
        run = drive(run)
        first.refresh_from_db()
        assert first.state == "cancelled"
        assert run.human_tasks.filter(state="claimed").count() == 1
