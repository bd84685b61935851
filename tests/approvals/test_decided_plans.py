"""The "Decided by me" tab reads a short range of its index, newest first, at any depth.

Thousands of decisions are seeded and ANALYZEd, so that PostgreSQL has a real
choice; EXPLAIN ANALYZE then runs on the very query a page sends, first page and
a deep one.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.inbox import decided
from approvals.models import HumanTask
from tests.plans import compacted_around_module, explain, nodes, rows_out
from workflows.models import StepRun, WorkflowRun

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]

DECISIONS = 20_000
RUNS = 101  # prime to 100, so bob's decisions fall on every run

# Compact before the class's seed, whatever earlier modules left dead in these tables,
# and after it, so that what these tests leave does not move the plans of those after.
compacted = compacted_around_module()


@pytest.fixture(scope="class")
def decisive(django_db_setup, django_db_blocker):
    """20,000 decisions a minute apart among a hundred reviewers, every hundredth of them
    bob's (200, eight pages); 2,000 tasks still open: spread over 101 waiting runs,
    as a company's decisions are (on one run, the index of a run's decisions,
    task_decided_idx, ranks bob's as well as the tab's own index, and the planner's
    choice between them turned on noise).

    Seeded once for the class, in a transaction around its tests (each test's own is a
    savepoint inside it), and rolled back after the last: the tests only read.
    """
    now = timezone.now()
    with django_db_blocker.unblock(), transaction.atomic():
        bob = User.objects.create_user("bob")
        others = User.objects.bulk_create(User(username=f"user{n}") for n in range(99))
        runs = WorkflowRun.objects.bulk_create(
            WorkflowRun(workflow_type="expense", workflow_version=1, state="waiting", input={})
            for _ in range(RUNS)
        )
        steps = StepRun.objects.bulk_create(
            StepRun(run=run, node="manager_approval", state="waiting", scheduled_at=now)
            for run in runs
        )

        def task(n: int, **fields) -> HumanTask:
            return HumanTask(
                run=runs[n % RUNS],
                step=steps[n % RUNS],
                node="manager_approval",
                workflow_type="expense",
                title=f"Task {n}",
                created_at=now - timedelta(days=30),
                **fields,
            )

        HumanTask.objects.bulk_create(
            [
                *(
                    task(
                        n,
                        state="completed",
                        outcome="approved",
                        decided_by=bob if n % 100 == 0 else others[n % 99],
                        decided_at=now - timedelta(minutes=n),
                    )
                    for n in range(DECISIONS)
                ),
                *(task(n, state="open") for n in range(2000)),
            ]
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        yield bob
        transaction.set_rollback(True)


def page_sql(user, cursor: str = "", filters=None) -> tuple[str, str]:
    with CaptureQueriesContext(connection) as queries:
        page = decided.decided_by(user=user, cursor=cursor, filters=filters)
    (query,) = queries.captured_queries
    return query["sql"], page.next_cursor


class TestDecidedPlan:
    @pytest.mark.parametrize("depth", [0, 4])
    def test_a_page_reads_one_short_range_of_its_index_and_sorts_nothing(self, decisive, depth):
        cursor = ""
        for _ in range(depth):
            _, cursor = page_sql(decisive, cursor)
        sql, _ = page_sql(decisive, cursor)

        plan = list(nodes(explain(sql)["Plan"]))

        (scan,) = [node for node in plan if node.get("Relation Name") == "approvals_humantask"]
        assert scan["Index Name"] == "task_decided_by_idx"
        assert rows_out(scan) + scan.get("Rows Removed by Filter", 0) <= decided.PAGE_SIZE + 1
        assert [node["Node Type"] for node in plan if "Sort" in node["Node Type"]] == []

    @pytest.mark.parametrize(
        "filters",
        [
            decided.DecidedFilters(outcome="approved"),
            decided.DecidedFilters(workflow_type="expense", search="task"),
        ],
    )
    def test_a_filtered_page_reads_the_same_range_and_sorts_nothing(self, decisive, filters):
        sql, _ = page_sql(decisive, filters=filters)

        plan = list(nodes(explain(sql)["Plan"]))

        (scan,) = [node for node in plan if node.get("Relation Name") == "approvals_humantask"]
        assert scan["Index Name"] == "task_decided_by_idx"
        assert rows_out(scan) == decided.PAGE_SIZE + 1
        assert [node["Node Type"] for node in plan if "Sort" in node["Node Type"]] == []
