"""A run's children, steps and events are found through indexes, with no index to spare.

Most runs have no parent, so the keys to a parent run and step are indexed only
where set (migration 0022); a lookup by parent still reads those indexes, as does
the delete of a parent. A run's events are found through event_run_at_idx, whose
first column is the run: the event table keeps no second index of the run alone. A
run's steps, through the steps' unique constraint, whose first column is the run too
(migration 0026): the steps' table keeps no index of the run alone either.
Thousands of rows are seeded and ANALYZEd, so PostgreSQL has a real choice.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.plans import compacted_around_module, explain, nodes, rows_out
from workflows.models import StepEvent, StepRun, WorkflowRun

pytestmark = pytest.mark.django_db

PARENTS = 20

# Compact before the module's seed, whatever earlier modules left dead in these tables,
# and after it, so that what these tests leave does not move the plans of those after.
compacted = compacted_around_module()


def _run(**fields) -> WorkflowRun:
    return WorkflowRun(
        workflow_type="test_linear", workflow_version=1, input={}, state="succeeded", **fields
    )


@pytest.fixture(scope="module")
def family(django_db_setup, django_db_blocker):
    """2,000 runs without a parent, 20 with children of their own, three finished steps a
    run, and 40 events a run
    for 100 of them, 10 for each other one (a run's events on a page or two of a
    table of many runs' events, as they are: with no other run's events, the table
    was so small that reading the run's pages through a bitmap cost less than
    reading its index in order, and the plan turned on what earlier tests left dead
    in it); return a parent run and its waiting step.

    Seeded once for the module, in a transaction around its tests (each test's own is a
    savepoint inside it), and rolled back after the last: each test finds the very
    tables, statistics and plans the first found, whatever its place in a random order.
    """
    with django_db_blocker.unblock(), transaction.atomic():
        yield seed()
        transaction.set_rollback(True)


def seed() -> tuple[WorkflowRun, StepRun]:
    now = timezone.now()
    runs = WorkflowRun.objects.bulk_create([_run() for _ in range(2000)])
    parents = runs[:PARENTS]
    steps = StepRun.objects.bulk_create(
        [
            StepRun(run=run, node="child", kind="child", state="waiting", scheduled_at=now)
            for run in parents
        ]
    )
    StepRun.objects.bulk_create(
        [
            StepRun(run=run, node=node, state="succeeded", scheduled_at=now)
            for run in runs
            for node in ("first", "second", "third")
        ]
    )
    WorkflowRun.objects.bulk_create(
        [
            _run(parent_run=run, parent_step=step)
            for run, step in zip(parents, steps, strict=True)
            for _ in range(3)
        ]
    )
    StepEvent.objects.bulk_create(
        [
            StepEvent(run=run, kind="started", at=now + timedelta(seconds=n))
            for m, run in enumerate(runs)
            for n in range(40 if m < 100 else 10)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_workflowrun, workflows_steprun, workflows_stepevent")
    return parents[0], steps[0]


def _index_scans(queryset) -> list[str]:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        plan = explain(cursor.mogrify(sql, params))["Plan"]
    return [
        node.get("Index Name", "")
        for node in nodes(plan)
        if "Scan" in node["Node Type"] and node.get("Relation Name") is not None
    ] + [node["Node Type"] for node in nodes(plan) if node["Node Type"] == "Seq Scan"]


def _indexes(table: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [table])
        return {name for (name,) in cursor.fetchall()}


class TestARunsChildren:
    def test_are_found_by_their_parent_run_through_its_partial_index(self, family):
        parent, _ = family

        assert _index_scans(WorkflowRun.objects.filter(parent_run=parent)) == ["run_parent_run_idx"]

    def test_are_found_by_their_parent_step_through_its_partial_index(self, family):
        _, step = family

        assert _index_scans(WorkflowRun.objects.filter(parent_step=step)) == ["run_parent_step_idx"]

    def test_index_only_the_runs_that_have_a_parent(self, family):
        assert "workflows_workflowrun_parent_run_id_8ab5db39" not in _indexes(
            "workflows_workflowrun"
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'run_parent_run_idx'")
            assert cursor.fetchone()[0] == PARENTS * 3


class TestARunsSteps:
    def test_are_found_through_the_unique_constraint_whose_first_column_is_the_run(self, family):
        parent, _ = family

        assert _index_scans(parent.steps.order_by("id")) == ["step_unique_per_round_and_item"]

    def test_of_a_batch_of_runs_are_found_through_it_too(self, family):
        batch = WorkflowRun.objects.filter(parent_run=None).values_list("pk", flat=True)[:20]

        assert _index_scans(StepRun.objects.filter(run_id__in=list(batch))) == [
            "step_unique_per_round_and_item"
        ]

    def test_have_no_index_of_the_run_alone(self):
        assert not any(
            name.startswith("workflows_steprun_run_id") for name in _indexes("workflows_steprun")
        )


class TestARunsEvents:
    def test_are_found_through_the_run_and_time_index(self, family):
        parent, _ = family

        query = StepEvent.objects.filter(run=parent).order_by("at")
        sql, params = query.query.sql_with_params()
        with connection.cursor() as cursor:
            plan = explain(cursor.mogrify(sql, params))["Plan"]

        # The month that holds the events (the others are empty, and scanned as such).
        reading = [node for node in nodes(plan) if "Scan" in node["Node Type"] and rows_out(node)]
        assert [node["Node Type"] for node in reading] == ["Index Scan"]
        assert reading[0]["Index Name"].endswith("run_id_at_idx")
        assert rows_out(reading[0]) == 40

    def test_have_no_second_index_of_the_run_alone(self):
        assert not any(
            name.startswith("workflows_stepevent_run_id")
            for name in _indexes("workflows_stepevent")
        )
