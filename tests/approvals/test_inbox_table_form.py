"""The inbox's table: one form, one CSRF token and no <select> in its rows, whatever their
number; each row's buttons post that form to their own action; and a page reads the same
few queries with the row cache off (cold) or on (warm)."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals.inbox import rows as inbox_rows
from approvals.inbox import selectors
from approvals.models import HumanTask, Snooze
from approvals.states import TaskState

pytestmark = pytest.mark.django_db

CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]*)"')
# The session and the user: what every signed-in page reads (bench/inbox.py counts them apart).
LOGIN_QUERIES = 2
# The page's tasks with their rows, and the tab counts with the saved filters, sent as
# one query on PostgreSQL; elsewhere (the demo's SQLite) two, and separation of duties
# reads the viewer's decisions apart.
INBOX_QUERIES = 1 if connection.vendor == "postgresql" else 3


@pytest.fixture
def claimed_by_carol(carol, make_task):
    """Make `count` tasks claimed by carol, each titled after its number (beside
    manager_task, hers too, which make_task builds on)."""

    def make(count: int) -> list[HumanTask]:
        return [
            make_task(state=TaskState.CLAIMED, assignee=carol, title=f"Expense: Hotel {number}")
            for number in range(count)
        ]

    return make


@pytest.fixture
def browser(carol) -> Client:
    """carol's browser, which sends the CSRF token as a browser does (or is refused)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    return client


def task_list(page: str) -> str:
    found = re.search(r'<section id="task-list".*?</section>', page, re.DOTALL)
    assert found is not None
    return found.group()


def rows_of(page: str) -> list[str]:
    return re.findall(r'<tr id="row-.*?</tr>', page, re.DOTALL)


def button(row: str, label: str) -> dict[str, str]:
    """The attributes of the row's button whose accessible name starts with `label`."""
    found = re.search(rf'<button [^>]*aria-label="{label}[^"]*"[^>]*>', row)
    assert found is not None, label
    return {name: unescape(value) for name, value in re.findall(r'([\w-]+)="([^"]*)"', found[0])}


def form_values(page: str) -> dict[str, Any]:
    """What the table's form posts besides the pressed button: its token, its `next`, the
    shared snooze choice (the first), no row selected."""
    listed = task_list(page)
    (token,) = CSRF_INPUT.findall(listed)
    next_url = re.search(r'name="next" value="([^"]*)"', listed)
    until = re.search(r'<select name="until"><option>([^<]*)</option>', listed)
    assert next_url is not None
    assert until is not None
    return {"csrfmiddlewaretoken": token, "next": unescape(next_url[1]), "until": until[1]}


class TestOneFormPerTable:
    @pytest.mark.parametrize("count", [1, 30])
    def test_the_list_holds_one_csrf_token_however_many_rows(
        self, browser, claimed_by_carol, count
    ):
        claimed_by_carol(count)

        page = browser.get(reverse("approvals:inbox")).text

        assert len(rows_of(page)) == min(1 + count, selectors.PAGE_SIZE)
        assert len(CSRF_INPUT.findall(task_list(page))) == 1
        assert task_list(page).count("<form") == 1

    def test_the_page_holds_as_many_tokens_with_one_row_as_with_a_full_page(
        self, browser, claimed_by_carol
    ):
        claimed_by_carol(1)
        with_one = browser.get(reverse("approvals:inbox")).text
        claimed_by_carol(29)

        with_many = browser.get(reverse("approvals:inbox")).text

        assert len(rows_of(with_many)) == selectors.PAGE_SIZE
        assert len(CSRF_INPUT.findall(with_many)) == len(CSRF_INPUT.findall(with_one))

    def test_no_row_holds_a_select_the_table_shares_one(self, browser, claimed_by_carol, make_task):
        claimed_by_carol(3)

        page = browser.get(reverse("approvals:inbox")).text

        assert all("<select" not in row for row in rows_of(page))
        assert task_list(page).count('<select name="until">') == 1


class TestActionsFromTheList:
    def test_approve_posts_the_table_form_to_its_formaction_and_swaps_its_row(
        self, browser, manager_task
    ):
        page = browser.get(reverse("approvals:inbox")).text
        (row,) = rows_of(page)
        approve = button(row, "Approve")

        response = browser.post(
            approve["hx-post"],
            {**form_values(page), approve["name"]: approve["value"]},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET=f"row-{manager_task.pk}",
        )

        assert approve["formaction"] == approve["hx-post"]
        assert response.status_code == 200
        assert "Approved." in response.text
        assert "<form" not in response.text
        assert "<select" not in response.text
        manager_task.refresh_from_db()
        assert manager_task.outcome == "approved"

    def test_claim_from_the_queue_without_htmx_decides_nothing_else_and_redirects(
        self, browser, make_task, groups
    ):
        task = make_task(groups=[groups["finance"]], title="Expense: Hotel in Paris")
        page = browser.get(reverse("approvals:inbox"), {"tab": "queue"}).text
        (row,) = rows_of(page)
        claim = button(row, "Claim")

        response = browser.post(
            claim["formaction"], {**form_values(page), claim["name"]: claim["value"]}
        )

        assert response.status_code == 302
        task.refresh_from_db()
        assert task.state == TaskState.CLAIMED
        assert task.assignee.username == "carol"

    def test_a_stale_rows_button_is_refused_by_its_version(self, browser, manager_task):
        page = browser.get(reverse("approvals:inbox")).text
        (row,) = rows_of(page)
        approve = button(row, "Approve")
        HumanTask.objects.filter(pk=manager_task.pk).update(version=manager_task.version + 1)

        response = browser.post(
            approve["hx-post"],
            {**form_values(page), approve["name"]: approve["value"]},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET=f"row-{manager_task.pk}",
        )

        assert response.status_code == 409
        assert 'role="alert"' in response.text
        manager_task.refresh_from_db()
        assert manager_task.is_live

    def test_snooze_takes_the_tables_shared_choice(self, browser, manager_task, carol):
        before = timezone.now()
        page = browser.get(reverse("approvals:inbox")).text
        (row,) = rows_of(page)
        snooze = button(row, "Snooze")

        response = browser.post(
            snooze["hx-post"],
            {**form_values(page), "until": "Next week", snooze["name"]: snooze["value"]},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET=f"row-{manager_task.pk}",
        )

        assert response.status_code == 200
        assert snooze["hx-swap"] == "delete"
        snoozed = Snooze.objects.get(task=manager_task, user=carol)
        assert snoozed.until >= before + timedelta(days=7)


class TestQueriesPerPage:
    @pytest.mark.parametrize("row_cache", [False, True], ids=["cold", "warm"])
    def test_a_full_page_reads_one_query_beyond_login_with_the_row_cache_off_or_on(
        self, settings, browser, claimed_by_carol, row_cache
    ):
        settings.BATON_INBOX_ROW_CACHE = row_cache
        claimed_by_carol(30)
        browser.get(reverse("approvals:inbox"))  # keeps its rows, when the cache is on

        with CaptureQueriesContext(connection) as captured:
            page = browser.get(reverse("approvals:inbox")).text

        assert len(rows_of(page)) == selectors.PAGE_SIZE
        assert len(captured.captured_queries) == LOGIN_QUERIES + INBOX_QUERIES

    def test_a_cold_page_reads_as_many_queries_for_two_rows_as_for_a_full_page(
        self, settings, browser, claimed_by_carol
    ):
        settings.BATON_INBOX_ROW_CACHE = False
        claimed_by_carol(1)
        inbox_rows._drawn_shape.cache_clear()
        with CaptureQueriesContext(connection) as with_two:
            browser.get(reverse("approvals:inbox"))
        claimed_by_carol(29)
        inbox_rows._drawn_shape.cache_clear()

        with CaptureQueriesContext(connection) as with_many:
            browser.get(reverse("approvals:inbox"))

        assert len(with_many.captured_queries) == len(with_two.captured_queries)
