"""The inbox's tab counts as a PostgreSQL function (approvals.inbox.selectors.header_function):
installed as compiled, and answering what the statement answers.

The migration freezes the function's text; the code compiles it again from the
models and the inbox's queries and calls it by a name that hashes that text. A
change to the counts' SQL without a migration that installs the new function
fails here, not in production.
"""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.inbox import selectors
from approvals.models import SavedFilter, Snooze
from approvals.states import TaskState

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="functions are PostgreSQL's"),
]

MIGRATION = "approvals.migrations.0027_inbox_header_function"


@pytest.fixture
def carols_inbox(carol, bob, make_task):
    """carol's tabs: three more tasks of hers (one snoozed) and one she delegated to bob;
    two saved filters; and she manages finance."""
    mine = [make_task(state=TaskState.CLAIMED, assignee=carol) for _ in range(3)]
    make_task(state=TaskState.DELEGATED, assignee=bob, owner=carol)
    Snooze.objects.create(task=mine[0], user=carol, until=timezone.now() + timedelta(hours=1))
    SavedFilter.objects.create(user=carol, name="Urgent", query="priority=4")
    SavedFilter.objects.create(user=carol, name="Overdue", query="sla=overdue")
    return carol


class TestTheMigrationInstallsWhatTheCodeCompiles:
    def test_the_migration_holds_the_text_the_code_compiles(self):
        migration = importlib.import_module(MIGRATION)

        assert selectors.header_function().create_sql() == migration.INBOX_HEADER


class TestTheCountsThroughTheFunction:
    def test_are_what_the_statement_answers(self, settings, carols_inbox):
        now = timezone.now()
        settings.BATON_DB_FUNCTIONS = False
        by_statement = selectors.inbox_header(user=carols_inbox, now=now)

        settings.BATON_DB_FUNCTIONS = True
        by_function = selectors.inbox_header(user=carols_inbox, now=now)

        assert by_function.counts == by_statement.counts
        assert by_function.manages_a_group is by_statement.manages_a_group is True
        assert [(saved.pk, saved.name, saved.query) for saved in by_function.saved_filters] == [
            (saved.pk, saved.name, saved.query) for saved in by_statement.saved_filters
        ]
        assert [saved.name for saved in by_function.saved_filters] == ["Overdue", "Urgent"]

    def test_leave_out_what_is_snoozed_until_it_wakes(self, settings, carols_inbox):
        settings.BATON_DB_FUNCTIONS = True

        now = selectors.inbox_header(user=carols_inbox, now=timezone.now())
        later = selectors.inbox_header(user=carols_inbox, now=timezone.now() + timedelta(hours=2))

        assert later.counts["mine"] == now.counts["mine"] + 1

    def test_are_one_call_of_the_function(self, settings, carols_inbox):
        settings.BATON_DB_FUNCTIONS = True

        with CaptureQueriesContext(connection) as queries:
            selectors.inbox_header(user=carols_inbox, now=timezone.now())

        assert len(queries) == 1
        assert selectors.header_function().name in queries.captured_queries[0]["sql"]

    def test_with_functions_turned_off_the_statement_is_sent(self, settings, carols_inbox):
        settings.BATON_DB_FUNCTIONS = False

        with CaptureQueriesContext(connection) as queries:
            selectors.inbox_header(user=carols_inbox, now=timezone.now())

        assert len(queries) == 1
        assert "baton_inbox_header" not in queries.captured_queries[0]["sql"]
