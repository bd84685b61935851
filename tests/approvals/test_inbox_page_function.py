"""The inbox's page as a PostgreSQL function (approvals.inbox.selectors.page_function):
installed as compiled, and answering what the statement answers.

The migration freezes the function's text; the code compiles it again from the
models and the inbox's queries and calls it by a name that hashes that text. A
change to the page's SQL without a migration that installs the new function fails
here, not in production. tests/approvals/test_selectors.py's TestPageTasks holds
a page's rows equal to what the ORM loads.
"""

from __future__ import annotations

import importlib
import itertools
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import duties
from approvals.inbox import selectors
from approvals.models import Snooze

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="functions are PostgreSQL's"),
]

MIGRATION = "approvals.migrations.0030_inbox_page_function"
# More than a page in bob's tabs, so that each tab has a next page and a last one.
TASKS = selectors.PAGE_SIZE + 5


@pytest.fixture
def crowded(finance_task, make_task, people, groups):
    """bob's three tabs with more than a page each, of both types, every priority, with and
    without due times (some equal, so that ids break the ties), one of his tasks snoozed;
    and finance_task, whose run carol decided the first stage of (an expense, whose type
    separates its approvers and names a requester in its input)."""
    bob, alice = people["bob"], people["alice"]
    now = timezone.now()
    for n in range(TASKS):
        fields = {
            "workflow_type": ("expense", "vendor_onboarding")[n % 2],
            "priority": 1 + n % 4,
            "due_at": None if n % 5 == 0 else now + timedelta(hours=n % 3),
            "title": f"Task {n}",
        }
        make_task(state="claimed", assignee=bob, **fields)
        make_task(state="delegated", assignee=alice, owner=bob, **fields)
        make_task(state="open", groups=[groups["finance"]], users=[bob], **fields)
    snoozed = make_task(state="claimed", assignee=bob, title="Snoozed")
    Snooze.objects.create(task=snoozed, user=bob, until=now + timedelta(hours=1))
    return bob


def walk(user, *, tab: str, sort: str, now) -> list[selectors.Page]:
    """Every page of a tab, following each page's cursor."""
    pages, cursor = [], ""
    while True:
        filters = selectors.InboxFilters(tab=tab, sort=sort, cursor=cursor)
        pages.append(selectors.inbox(user=user, filters=filters, now=now))
        cursor = pages[-1].next_cursor
        if not cursor:
            return pages


class TestTheMigrationInstallsWhatTheCodeCompiles:
    def test_the_migration_holds_the_text_the_code_compiles(self):
        migration = importlib.import_module(MIGRATION)

        assert selectors.page_function().create_sql() == migration.INBOX_PAGE


class TestPagesThroughTheFunction:
    def test_are_what_the_statement_answers_in_every_tab_sort_and_page(
        self, settings, crowded, carol, finance_task
    ):
        now = timezone.now()
        for user, tab, sort in itertools.product((crowded, carol), selectors.TABS, selectors.SORTS):
            settings.BATON_DB_FUNCTIONS = False
            by_statement = walk(user, tab=tab, sort=sort, now=now)

            settings.BATON_DB_FUNCTIONS = True
            by_function = walk(user, tab=tab, sort=sort, now=now)

            assert [page.tasks for page in by_function] == [page.tasks for page in by_statement]
            assert [p.next_cursor for p in by_function] == [p.next_cursor for p in by_statement]
        pages = walk(crowded, tab="mine", sort="due", now=now)
        assert [len(page.tasks) for page in pages] == [
            selectors.PAGE_SIZE,
            TASKS - selectors.PAGE_SIZE,
        ]
        shown = [task for page in pages for task in page.tasks]
        assert "Snoozed" not in {task.title for task in shown}
        (finance,) = [
            task
            for page in walk(carol, tab="queue", sort="due", now=now)
            for task in page.tasks
            if task.pk == finance_task.pk
        ]
        assert [decision["decided_by_id"] for decision in finance.viewer_decisions] == [carol.pk]
        assert finance.run_input["amount"] == "1500.00"

    def test_come_in_the_order_of_their_places_on_the_page(self, crowded):
        # A first page of bob's by priority: its places are 1, 2, ... in the tab's order.
        arguments = (crowded.pk, "mine", "priority", timezone.now())
        arguments += (-32767, datetime(1, 1, 1, tzinfo=UTC), UUID(int=0), [], [])

        with connection.cursor() as cursor:
            cursor.execute(f"{selectors.page_function().call_sql} ORDER BY o_n", arguments)
            rows = cursor.fetchall()

        places = [row[0] for row in rows]
        keys = [(row[9], row[10], row[1]) for row in rows]  # sort_priority, sort_due, task_id
        assert places == list(range(1, selectors.PAGE_SIZE + 2))
        assert keys == sorted(keys)

    def test_a_type_left_out_of_both_lists_carries_neither_decisions_nor_input(
        self, settings, carol, finance_task, monkeypatch
    ):
        settings.BATON_DB_FUNCTIONS = True
        monkeypatch.setattr(duties, "separating_types", lambda: ())
        monkeypatch.setattr(duties, "requester_types", lambda: ())

        page = selectors.inbox(
            user=carol, filters=selectors.InboxFilters(tab="queue"), now=timezone.now()
        )

        (finance,) = [task for task in page.tasks if task.pk == finance_task.pk]
        assert finance.viewer_decisions is None
        assert finance.run_input == {}

    def test_a_page_is_one_call_of_the_function(self, settings, crowded):
        settings.BATON_DB_FUNCTIONS = True
        filters = selectors.InboxFilters(tab="queue", sort="priority")
        cursor = selectors.inbox(user=crowded, filters=filters, now=timezone.now()).next_cursor

        for page_filters in (
            filters,
            selectors.InboxFilters(**{**vars(filters), "cursor": cursor}),
        ):
            with CaptureQueriesContext(connection) as queries:
                selectors.inbox(user=crowded, filters=page_filters, now=timezone.now())

            assert len(queries) == 1
            assert selectors.page_function().name in queries.captured_queries[0]["sql"]

    @pytest.mark.parametrize(
        "extra",
        [{"workflow_type": "expense"}, {"priority": 2}, {"sla": "overdue"}, {"search": "Task"}],
    )
    def test_a_filtered_page_is_one_statement(self, settings, crowded, extra):
        settings.BATON_DB_FUNCTIONS = True

        with CaptureQueriesContext(connection) as queries:
            page = selectors.inbox(
                user=crowded, filters=selectors.InboxFilters(**extra), now=timezone.now()
            )

        assert len(queries) == 1
        assert "baton_inbox" not in queries.captured_queries[0]["sql"]
        assert page.tasks or extra == {"sla": "overdue"}

    def test_with_functions_turned_off_the_statement_is_sent(self, settings, crowded):
        settings.BATON_DB_FUNCTIONS = False

        with CaptureQueriesContext(connection) as queries:
            page = selectors.inbox(
                user=crowded, filters=selectors.InboxFilters(), now=timezone.now()
            )

        assert len(queries) == 1
        assert "baton_inbox" not in queries.captured_queries[0]["sql"]
        assert len(page.tasks) == selectors.PAGE_SIZE
