"""My requests reads a short range of its index, in the order shown, at any size.

Thousands of runs of other people are seeded beside alice's few hundred and
ANALYZEd, then EXPLAIN ANALYZE runs on the very query a page sends, for every
filter, on the first page and a deep one: the page must read alice's range of
`run_started_by_idx` backwards, never scan the table, never sort.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import request_pages
from approvals.request_pages import RequestFilters
from tests.plans import explain, nodes
from workflows.models import WorkflowRun

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]

ALICES = 400
OTHERS = 20_000
STATES = ("waiting", "succeeded", "cancelled", "running", "compensated")
TYPES = ("expense", "order", "vendor_onboarding")


@pytest.fixture
def crowded(alice) -> User:
    """alice's 400 runs among 20,000 of twenty other people, a year of them."""
    now = timezone.now()
    others = User.objects.bulk_create(User(username=f"user{n}") for n in range(20))

    def run(n: int, person: User) -> WorkflowRun:
        return WorkflowRun(
            workflow_type=TYPES[n % 3],
            workflow_version=1,
            state=STATES[n % 5],
            input={},
            started_by=person,
        )

    WorkflowRun.objects.bulk_create(
        [run(n, alice) for n in range(ALICES)] + [run(n, others[n % 20]) for n in range(OTHERS)],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        # Spread them over a year (created_at is set on insert), then let the planner see.
        cursor.execute(
            "UPDATE workflows_workflowrun SET created_at = %s - random() * interval '365 days'",
            [now + timedelta(seconds=1)],
        )
        cursor.execute("ANALYZE")
    return alice


def page_sql(user: Any, filters: RequestFilters) -> tuple[str, str]:
    """The SQL of a page's first query (its runs), and the cursor of the next page."""
    with CaptureQueriesContext(connection) as queries:
        page = request_pages.my_requests(user=user, filters=filters)
    return queries.captured_queries[0]["sql"], page.next_cursor


def problems(sql: str, *, most_rows_read: int) -> list[str]:
    found = []
    plan = explain(sql)
    for node in nodes(plan["Plan"]):
        relation = node.get("Relation Name")
        if relation == "workflows_workflowrun":
            if node["Node Type"] == "Seq Scan":
                found.append("Seq Scan on workflows_workflowrun")
            elif node.get("Index Name") != "run_started_by_idx":
                found.append(f"{node['Node Type']} on {node.get('Index Name')}")
            read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            if read > most_rows_read:
                found.append(f"{node['Node Type']} read {read} runs")
        if node["Node Type"] in ("Sort", "Incremental Sort"):
            found.append(f"{node['Node Type']} ({node['Sort Key']})")
    return found


# A state or a type filters alice's own range as it is read: at worst it reads all of
# her runs, never anyone else's. Without a filter, a page reads one page of rows.
FILTERS = [{}, {"state": "active"}, {"state": "succeeded"}, {"workflow_type": "order"}]


class TestPlans:
    def test_every_page_reads_the_persons_range_of_the_index_backwards_unsorted(self, crowded):
        limit = request_pages.PAGE_SIZE + 1
        found = {}

        for extra in FILTERS:
            first, cursor = page_sql(crowded, RequestFilters(**extra))
            deep, _ = page_sql(crowded, RequestFilters(**extra, cursor=cursor))
            for depth, sql in (("first", first), ("second", deep)):
                issues = problems(sql, most_rows_read=ALICES if extra else limit)
                if issues:
                    found[(str(extra), depth)] = issues

        assert found == {}

    def test_a_page_deep_in_the_past_reads_as_few_runs_as_the_first(self, crowded):
        cursor = ""
        for _ in range(10):
            _, cursor = page_sql(crowded, RequestFilters(cursor=cursor))

        sql, _ = page_sql(crowded, RequestFilters(cursor=cursor))

        assert problems(sql, most_rows_read=request_pages.PAGE_SIZE + 1) == []
