"""The inbox's function calls read as prepared statements, in one pipeline, rows in binary
(approvals.inbox.selectors._pipelined): the same pages and headers as the calls sent as
text, and the text still sent wherever a prepared statement would be wrong.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.inbox import selectors
from approvals.models import SavedFilter, Snooze

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="functions are PostgreSQL's"),
]


@pytest.fixture
def pipelined(monkeypatch):
    """The reads `_pipelined` made, each as the number of statements it sent."""
    made: list[int] = []
    pipeline = selectors._pipelined

    def counting(connection, queries):
        made.append(len(queries))
        return pipeline(connection, queries)

    monkeypatch.setattr(selectors, "_pipelined", counting)
    return made


@pytest.fixture
def busy_bob(make_task, people, groups, finance_task):
    """bob with more than a page of his own tasks, some without a due time, one snoozed, a
    queue, saved filters; carol with finance_task's run, whose first stage she decided (an
    expense: its rows carry her decisions and the run's input)."""
    bob, now = people["bob"], timezone.now()
    for n in range(selectors.PAGE_SIZE + 3):
        due_at = None if n % 4 == 0 else now + timedelta(hours=n)
        make_task(state="claimed", assignee=bob, due_at=due_at, title=f"Task {n}")
        make_task(state="open", groups=[groups["finance"]], priority=1 + n % 4, title=f"Q {n}")
    snoozed = make_task(state="claimed", assignee=bob, title="Snoozed")
    Snooze.objects.create(task=snoozed, user=bob, until=now + timedelta(hours=1))
    SavedFilter.objects.create(user=bob, name="Hotels", query="q=hotel")
    SavedFilter.objects.create(user=bob, name="Overdue", query="sla=overdue")
    return bob


def read_every_tab(user, *, now):
    """The page and header of each tab and sort, first pages and next ones."""
    read = []
    for tab, sort in itertools.product(selectors.TABS, selectors.SORTS):
        cursor = ""
        while True:
            filters = selectors.InboxFilters(tab=tab, sort=sort, cursor=cursor)
            page, header = selectors.inbox_with_header(user=user, filters=filters, now=now)
            read.append((page, header))
            cursor = page.next_cursor
            if not cursor:
                break
    return read


class TestPreparedReads:
    def test_read_what_the_calls_sent_as_text_read(
        self, settings, busy_bob, carol, finance_task, pipelined, monkeypatch
    ):
        settings.BATON_DB_FUNCTIONS = True
        now = timezone.now()
        for user in (busy_bob, carol):
            prepared = read_every_tab(user, now=now)
            with monkeypatch.context() as text_only:
                text_only.setattr(selectors, "_may_prepare", lambda connection: False)
                as_text = read_every_tab(user, now=now)

            assert prepared == as_text
        assert pipelined
        assert set(pipelined) == {2}
        finance = next(
            task
            for page, _ in read_every_tab(carol, now=now)
            for task in page.tasks
            if task.pk == finance_task.pk
        )
        assert finance.viewer_decisions
        assert finance.run_input
        assert finance.due_at is None or finance.due_at.tzinfo is not None

    def test_a_page_alone_and_a_header_alone_are_read_prepared_too(
        self, settings, busy_bob, pipelined
    ):
        settings.BATON_DB_FUNCTIONS = True

        page = selectors.inbox(user=busy_bob, filters=selectors.InboxFilters(), now=timezone.now())
        header = selectors.inbox_header(user=busy_bob, now=timezone.now())

        assert len(page.tasks) == selectors.PAGE_SIZE
        assert header.counts["mine"] == selectors.PAGE_SIZE + 3
        assert [saved.name for saved in header.saved_filters] == ["Hotels", "Overdue"]
        assert pipelined == [1, 1]

    def test_a_filtered_page_is_sent_as_text(self, settings, busy_bob, pipelined):
        # Its plan depends on its values: a prepared statement could keep a generic one.
        settings.BATON_DB_FUNCTIONS = True

        page, _ = selectors.inbox_with_header(
            user=busy_bob, filters=selectors.InboxFilters(search="Task"), now=timezone.now()
        )

        assert page.tasks
        assert pipelined == []

    def test_behind_pgbouncer_the_calls_are_sent_as_text(
        self, settings, busy_bob, pipelined, monkeypatch
    ):
        settings.BATON_DB_FUNCTIONS = True
        connection.ensure_connection()
        monkeypatch.setattr(connection.connection, "prepare_threshold", None)

        page, header = selectors.inbox_with_header(
            user=busy_bob, filters=selectors.InboxFilters(), now=timezone.now()
        )

        assert len(page.tasks) == selectors.PAGE_SIZE
        assert header.counts["mine"] == selectors.PAGE_SIZE + 3
        assert pipelined == []

    def test_while_queries_are_logged_the_calls_are_sent_as_text_and_logged(
        self, settings, busy_bob, pipelined
    ):
        settings.BATON_DB_FUNCTIONS = True

        with CaptureQueriesContext(connection) as logged:
            selectors.inbox_with_header(
                user=busy_bob, filters=selectors.InboxFilters(), now=timezone.now()
            )

        assert len(logged.captured_queries) == 1
        assert selectors.page_function().name in logged.captured_queries[0]["sql"]
        assert pipelined == []
