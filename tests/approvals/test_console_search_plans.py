"""The console's search at scale: a business key is read through the GIN index on the
input, and its runs by their ids, never by walking the history newest first, however
many runs the planner believes the table holds.

The planner prices a key it has no statistics for at its floor, one run in 10,000 a
searchable field. On a few thousand runs that is a run or two, and the GIN index wins;
on millions it expects a match every few hundred runs, and the page's one query (key,
order and limit together) rather walked the time index backwards until a page was
full: for an old order, the whole history. That flip needs a table of millions of
pages, not a test's few (on the scale bench's 200,000-run database, its row count
scaled in the catalogue, it came between 1.5 and 2 million runs; see
`approvals.console.selectors._found_first`). Here the plans of the queries the page
now sends are read with the runs' table made to look like `HISTORY` runs to the
planner (its row count in the catalogue, in the test's transaction, rolled back with
it): the ids through the GIN index, the page by primary key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.console.selectors import SEARCH_FEW, RunFilters, runs_page
from tests.plans import nodes
from workflows.models import WorkflowRun

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans"),
]

HISTORY = 10_000_000
RUNS = 3000


@pytest.fixture
def orders() -> None:
    """Analysed runs, each with an order id of its own, as a company's history has."""
    WorkflowRun.objects.bulk_create(
        WorkflowRun(
            workflow_type="order",
            workflow_version=1,
            input={"order_id": f"A-{n}"},
            state="succeeded",
            correlation_id=f"shop-{n}",
        )
        for n in range(RUNS)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_workflowrun")


def as_if_at(runs: int) -> None:
    """Make the planner believe the runs' table holds `runs` rows, until the test's end."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pg_class SET reltuples = %s WHERE oid = 'workflows_workflowrun'::regclass",
            [runs],
        )


def plan(sql: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        return cursor.fetchone()[0][0]["Plan"]


def indexes(sql: str) -> set[str]:
    return {node["Index Name"] for node in nodes(plan(sql)) if "Index Name" in node}


def runs_queries(filters: RunFilters) -> Iterator[str]:
    """The queries of the runs' table a console page of `filters` sends, in order."""
    with CaptureQueriesContext(connection) as captured:
        runs_page(filters=filters)
    for query in captured.captured_queries:
        if 'FROM "workflows_workflowrun"' in query["sql"]:
            yield query["sql"]


class TestSearchAtScale:
    def test_a_key_reads_the_input_index_then_its_runs_by_id(self, orders):
        as_if_at(HISTORY)

        found, page = list(runs_queries(RunFilters(search="A-7")))

        assert "run_input_idx" in indexes(found)
        assert "workflows_workflowrun_pkey" in indexes(page)
        assert "run_created_idx" not in indexes(found) | indexes(page)
        assert "Seq Scan" not in {node["Node Type"] for node in nodes(plan(found))}

    def test_the_page_shows_the_run_the_key_names(self, orders):
        as_if_at(HISTORY)

        page = runs_page(filters=RunFilters(search="A-7"))

        assert [row.run.input for row in page.rows] == [{"order_id": "A-7"}]
        assert page.next_cursor == ""


class TestAValueManyRunsShare:
    def test_is_paged_newest_first_through_the_time_index(self, orders):
        WorkflowRun.objects.bulk_create(
            WorkflowRun(workflow_type="order", workflow_version=1, input={"order_id": "common"})
            for _ in range(SEARCH_FEW + 30)
        )
        newest = list(
            WorkflowRun.objects.filter(input__order_id="common")
            .order_by("-created_at", "-id")
            .values_list("pk", flat=True)
        )

        first = runs_page(filters=RunFilters(search="common"))
        second = runs_page(filters=RunFilters(search="common", cursor=first.next_cursor))

        assert [row.run.pk for row in first.rows + second.rows] == newest[:50]
