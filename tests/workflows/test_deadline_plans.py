"""The sweep reads the run deadlines due through their partial index, never the runs table.

Thousands of live runs are seeded, most without a deadline or with one far off, and
finished runs whose deadline passed long ago, then ANALYZEd so that PostgreSQL has a
real choice; the sweep's query is EXPLAINed as sent. A sequential scan would make
every sweep (every few seconds) cost more the more runs exist.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.plans import compacted_around_module, explain, nodes, rows_out
from workflows.engine import sweeper
from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db

DUE = 20

# Compact before the seed, whatever earlier modules left dead in these tables, and
# after it, so that what this test leaves does not move the plans of those after.
compacted = compacted_around_module()


@pytest.fixture
def runs():
    """4,000 live runs without a deadline, 2,000 with one next month, 2,000 finished
    runs whose deadline passed, and 20 live runs whose deadline passed."""
    now = timezone.now()

    def run(state: str, deadline_at=None) -> WorkflowRun:
        return WorkflowRun(
            workflow_type="test_loan",
            workflow_version=1,
            input={},
            state=state,
            deadline_at=deadline_at,
        )

    WorkflowRun.objects.bulk_create(
        [run("waiting") for _ in range(4000)]
        + [run("running", now + timedelta(days=30, minutes=n)) for n in range(2000)]
        + [run("succeeded", now - timedelta(days=n % 90 + 1)) for n in range(2000)]
        + [run("waiting", now - timedelta(minutes=n + 1)) for n in range(DUE)]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return now


class TestDeadlineSweepPlan:
    def test_the_due_deadlines_are_read_from_the_partial_index_in_due_order(self, runs):
        query = sweeper._due_deadline_run_ids(runs, set())[:500]

        sql, params = query.query.sql_with_params()
        with connection.cursor() as cursor:
            plan = explain(cursor.mogrify(sql, params))["Plan"]

        scans = [node for node in nodes(plan) if "Scan" in node["Node Type"]]
        assert {node.get("Index Name") for node in scans} == {"run_deadline_idx"}
        assert not [node for node in nodes(plan) if node["Node Type"] == "Sort"]
        assert max(rows_out(node) for node in scans) == DUE
