"""The console's read side: the runs list is served by indexes (the plans say so), and a
business key is matched exactly, as text or as the number it spells."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection

from approvals.console.selectors import RunFilters, business_keys, filtered_runs, runs_page
from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db


def plan(filters: RunFilters) -> str:
    """The plan of a page's query, with sequential scans priced out as on a big table."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    return filtered_runs(filters).order_by("-created_at", "-id")[:26].explain()


class TestPlans:
    @pytest.fixture(autouse=True)
    def many_runs(self, alice):
        """Analysed runs of many requesters, states and correlation ids, so each plan is
        the one a big table gets, whatever statistics earlier tests left behind."""
        starters = [alice] + [
            User.objects.create_user(username=f"requester-{n}") for n in range(29)
        ]
        WorkflowRun.objects.bulk_create(
            WorkflowRun(
                workflow_type="order",
                workflow_version=1,
                input={},
                state="dead_lettered" if n % 50 == 0 else "succeeded",
                started_by=starters[n % len(starters)],
                correlation_id=f"shop-{n}",
            )
            for n in range(3000)
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE workflows_workflowrun")
            cursor.execute("ANALYZE auth_user")

    def test_a_business_key_search_reads_the_gin_index_on_the_input(self):
        # Enough analysed runs that the planner weighs the key, not a tiny table's walk.
        WorkflowRun.objects.bulk_create(
            WorkflowRun(
                workflow_type="order",
                workflow_version=1,
                input={"order_id": f"A-{n}"},
                state="running",
            )
            for n in range(3000)
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE workflows_workflowrun")
            cursor.execute("SET LOCAL enable_seqscan = off")

        # The predicate's plan, without the page's order and limit: with statistics
        # left by earlier tests the planner may rather walk the time index backwards
        # for a page of 26; what matters is that the key is answered by its index.
        assert "run_input_idx" in filtered_runs(RunFilters(search="A-7")).order_by().explain()

    def test_every_run_newest_first_reads_the_created_index_backwards(self):
        assert "Index Scan Backward using run_created_idx" in plan(RunFilters())

    def test_a_state_reads_the_state_and_time_index(self):
        assert "run_state_created_idx" in plan(RunFilters(state="dead_lettered"))

    def test_a_requester_reads_the_requests_index(self, alice):
        assert "run_started_by_idx" in plan(RunFilters(requester="alice"))

    def test_a_correlation_id_reads_its_index(self):
        assert "run_correlation_idx" in plan(RunFilters(correlation_id="shop-9"))


class TestFinishedBetween:
    def test_keeps_the_runs_that_ended_on_the_days_given_inclusive(self):
        def ended(day: int) -> WorkflowRun:
            run = WorkflowRun.objects.create(
                workflow_type="order", workflow_version=1, input={}, state="running"
            )
            WorkflowRun.objects.filter(pk=run.pk).update(
                finished_at=datetime(2026, 11, day, 23, 59, tzinfo=UTC)
            )
            return run

        ended(9)
        kept = {ended(10).pk, ended(11).pk}
        ended(12)
        WorkflowRun.objects.create(workflow_type="order", workflow_version=1, input={})

        filters = RunFilters.from_query(
            {"finished_from": "2026-11-10", "finished_to": "2026-11-11"}
        )

        assert {run.pk for run in filtered_runs(filters)} == kept
        # The predicate's plan, without the page's order and limit: on these few rows,
        # with statistics earlier tests left, the planner may rather walk the time index
        # backwards for a page of 26 (seen in CI); what matters is that the days are
        # answered by their index.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE workflows_workflowrun")
            cursor.execute("SET LOCAL enable_seqscan = off")
        assert "run_finished_idx" in filtered_runs(filters).order_by().explain()

    def test_a_date_it_cannot_read_is_left_out_and_said_so(self):
        filters = RunFilters.from_query({"finished_from": "yesterday"})

        assert filters.finished_from is None
        assert filters.problems == ("Finished from must be a date such as 2026-12-01; left out.",)


class TestSearch:
    def test_a_key_is_matched_exactly_not_by_part(self, start, order_input):
        run = start("order", order_input(order_id="B-2002"))

        found = runs_page(filters=RunFilters(search="B-2002")).rows
        partial = runs_page(filters=RunFilters(search="B-200")).rows

        assert [row.run for row in found] == [run]
        assert partial == []

    def test_a_type_filter_narrows_the_search_to_its_own_keys(self, start, order_input):
        start("order", order_input(order_id="B-2002"))

        assert runs_page(filters=RunFilters(search="B-2002", workflow_type="expense")).rows == []

    def test_the_list_names_a_run_by_its_declared_keys(self, start, order_input):
        run = start("order", order_input(order_id="B-2002", customer_email="ada@example.com"))

        # The customer's email is personal: sealed, so neither searchable nor a key.
        assert business_keys(run) == [("Order id", "B-2002")]
