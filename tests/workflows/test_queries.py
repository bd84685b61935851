"""Queries (workflows.queries): a live run answers from its stored data, and nothing moves."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workflows.queries import QueryFailed, UnknownQuery, query_run

QUOTE = {"order_id": "Q-1", "amount": 100}


class TestQueryRun:
    def test_it_answers_from_the_input_and_the_results_so_far(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)

        answer = workflow_env.query(run, "quote")

        assert answer == {"order_id": "Q-1", "amount": 100, "currency": "EUR", "prepared": True}

    def test_it_only_reads(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)
        run = workflow_env.refresh(run)

        with CaptureQueriesContext(connection) as queries:
            query_run(run=run, name="quote")

        assert [query["sql"].split()[0] for query in queries.captured_queries] == ["SELECT"]
        workflow_env.assert_path(run, "prepare", "await_go")

    def test_it_answers_about_an_ended_run_too(self, workflow_env):
        run = workflow_env.signal(workflow_env.start("test_quoted", QUOTE), "go")

        assert workflow_env.query(run, "quote")["amount"] == 100

    def test_a_query_the_type_lacks_lists_those_it_has(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)

        with pytest.raises(UnknownQuery, match=r"no query 'price' \(its queries: broken, quote\)"):
            workflow_env.query(run, "price")

    def test_a_query_that_raises_says_what_it_raised(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)

        with pytest.raises(QueryFailed, match="Query 'broken' failed: KeyError: 'missing'"):
            workflow_env.query(run, "broken")
