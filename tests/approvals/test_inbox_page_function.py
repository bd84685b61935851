"""The inbox page's rows as a PostgreSQL function (approvals.inbox.selectors.rows_function):
installed as compiled, and answering what the statement answers.

The migration freezes the function's text; the code compiles it again from the
models and the inbox's queries and calls it by a name that hashes that text. A
change to the rows' SQL without a migration that installs the new function fails
here, not in production. tests/approvals/test_selectors.py's TestPageTasks holds
the function's rows equal to what the ORM loads.
"""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import duties
from approvals.inbox import selectors
from approvals.models import HumanTask, InboxEntry

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="functions are PostgreSQL's"),
]

MIGRATION = "approvals.migrations.0029_inbox_rows_function"


@pytest.fixture
def page(finance_task, make_task, people, carol):
    """Ids of tasks some inbox shows, in an order of no index's: carol decided the first
    stage of finance_task's run (an expense, whose type separates its approvers and
    names a requester in its input), and the others are plain."""
    for n in range(4):
        make_task(state="claimed", assignee=people["bob"], title=f"Plain {n}")
    shown = set(InboxEntry.objects.values_list("task_id", flat=True))
    ids = sorted(shown, key=str)
    assert finance_task.pk in ids
    return ids


def _rows(task_ids, *, user):
    with connection.cursor() as cursor:
        return selectors._page_tasks(cursor, task_ids, user_id=user.pk)


class TestTheMigrationInstallsWhatTheCodeCompiles:
    def test_the_migration_holds_the_text_the_code_compiles(self):
        migration = importlib.import_module(MIGRATION)

        assert selectors.rows_function().create_sql() == migration.INBOX_ROWS


class TestTheRowsThroughTheFunction:
    def test_are_what_the_statement_answers_in_the_order_asked(
        self, settings, page, people, carol, finance_task
    ):
        for user in (people["bob"], carol):
            settings.BATON_DB_FUNCTIONS = False
            by_statement = _rows(page, user=user)

            settings.BATON_DB_FUNCTIONS = True
            by_function = _rows(page, user=user)

            assert by_function == by_statement
            assert [task.pk for task in by_function] == page
        (finance,) = [task for task in by_function if task.pk == finance_task.pk]
        assert [decision["decided_by_id"] for decision in finance.viewer_decisions] == [carol.pk]
        assert finance.run_input["amount"] == "1500.00"

    def test_a_type_left_out_of_both_lists_carries_neither_decisions_nor_input(
        self, settings, page, carol, finance_task, monkeypatch
    ):
        settings.BATON_DB_FUNCTIONS = True
        monkeypatch.setattr(duties, "separating_types", lambda: ())
        monkeypatch.setattr(duties, "requester_types", lambda: ())

        (finance,) = [task for task in _rows(page, user=carol) if task.pk == finance_task.pk]

        assert finance.viewer_decisions is None
        assert finance.run_input == {}

    def test_a_task_decided_since_its_id_was_read_is_left_out(self, settings, page, carol):
        settings.BATON_DB_FUNCTIONS = True
        gone = page[1]
        InboxEntry.objects.filter(task_id=gone).delete()

        rows = _rows(page, user=carol)

        assert [task.pk for task in rows] == [task_id for task_id in page if task_id != gone]
        assert HumanTask.objects.filter(pk=gone).exists()

    def test_are_one_call_of_the_function(self, settings, page, carol):
        settings.BATON_DB_FUNCTIONS = True

        with CaptureQueriesContext(connection) as queries:
            _rows(page, user=carol)

        assert len(queries) == 1
        assert selectors.rows_function().name in queries.captured_queries[0]["sql"]

    def test_with_functions_turned_off_the_statement_is_sent(self, settings, page, carol):
        settings.BATON_DB_FUNCTIONS = False

        with CaptureQueriesContext(connection) as queries:
            _rows(page, user=carol)

        assert len(queries) == 1
        assert "baton_inbox_rows" not in queries.captured_queries[0]["sql"]
