"""My requests reads a short range of its index, in the order shown, at any size.

Thousands of runs of other people are seeded beside alice's few hundred and
ANALYZEd, then EXPLAIN ANALYZE runs on the very query a page sends, for every
filter, on the first page and a deep one: the page must read alice's range of
`run_started_by_idx` backwards, never scan the table, never sort.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import request_pages
from approvals.request_pages import RequestFilters
from tests.plans import compacted_around_module, explain, nodes
from workflows.models import WorkflowRun

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]

ALICES = 400
OTHERS = 20_000
STATES = ("waiting", "succeeded", "cancelled", "running", "compensated")
TYPES = ("expense", "order", "vendor_onboarding")


# Compact before the class's seed, whatever earlier modules left dead in these tables,
# and after it, so that what these tests leave does not move the plans of those after.
compacted = compacted_around_module()


@pytest.fixture(scope="class")
def crowded(django_db_setup, django_db_blocker) -> Iterator[User]:
    """alice's 400 runs among 20,000 of twenty other people, a year of them, started in
    turn (every 51st is hers) and stored in the order they were started, as a
    company's are.

    Seeded once for the class, in a transaction around its tests (each test's own is a
    savepoint inside it), and rolled back after the last: each test finds the very
    tables, statistics and plans the first found. The times are fixed, not random:
    drawn at random, they gave each run its own statistics.
    """
    with django_db_blocker.unblock(), transaction.atomic():
        yield seed()
        transaction.set_rollback(True)


def seed() -> User:
    now = timezone.now()
    alice = User.objects.create_user("alice")
    others = User.objects.bulk_create(User(username=f"user{n}") for n in range(20))
    count = ALICES + OTHERS

    def run(n: int, person: User) -> WorkflowRun:
        return WorkflowRun(
            workflow_type=TYPES[n % 3],
            workflow_version=1,
            state=STATES[n % 5],
            input={},
            started_by=person,
        )

    # Each person's n-th run has the n-th type and state, in turn.
    runs = WorkflowRun.objects.bulk_create(
        (
            run(n // (count // ALICES), alice)
            if n % (count // ALICES) == 0
            else run(n // 20, others[n % 20])
            for n in range(count)
        ),
        batch_size=5000,
    )
    year = timedelta(days=365)
    with connection.cursor() as cursor:
        # created_at is set on insert: spread the runs over the year, oldest first.
        cursor.execute(
            "UPDATE workflows_workflowrun SET created_at = started.at"
            " FROM unnest(%s::uuid[], %s::timestamptz[]) AS started(id, at)"
            " WHERE workflows_workflowrun.id = started.id",
            [
                [run.pk for run in runs],
                [now - year + year * (n + 1) / count for n in range(count)],
            ],
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
