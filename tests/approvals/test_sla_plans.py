"""The SLA dashboard's queries read index ranges bounded by time, never a whole table.

Thousands of finished runs and decided tasks are seeded, nearly all of them older
than the trend window, then ANALYZEd so that PostgreSQL has a real choice; every
query the dashboard sends (an operator's and a manager's) is EXPLAINed as sent.
A sequential scan of the runs or tasks table would grow with the history, which at
a million finished runs is the difference between a fast page and a dead one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from approvals.console import sla as sla_selectors
from approvals.console import sla_managers, sla_snapshot
from approvals.human_tasks import inbox_entries
from approvals.models import GroupManager, HumanTask, InboxEntry
from tests.conftest import make_groups, make_people
from tests.plans import compacted_around_module, nodes
from workflows.models import StepRun, WorkflowRun

pytestmark = pytest.mark.django_db

HISTORY = 4000
RECENT = 100
BIG_TABLES = {"workflows_workflowrun", "approvals_humantask"}


# Compact before the module's seed, whatever earlier modules left dead in these tables,
# and after it, so that what these tests leave does not move the plans of those after.
compacted = compacted_around_module()


@dataclass(frozen=True)
class History:
    now: datetime
    groups: dict[str, Group]
    people: dict[str, User]


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """4,000 runs and 4,000 decisions from the last year, 100 of each in the window,
    600 runs still going with 300 open tasks in finance's or legal's queue, each task
    on a run of its own, as a company's are.

    Seeded once for the module, in a transaction around its tests (each test's own is a
    savepoint inside it), and rolled back after the last: each test finds the very
    tables, statistics and plans the first found, whatever its place in a random order.
    The personas are the seed's (see `people` and `groups` below).
    """
    with (
        django_db_blocker.unblock(),
        override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]),
        transaction.atomic(),
    ):
        yield seed()
        transaction.set_rollback(True)


@pytest.fixture
def groups(history) -> dict[str, Group]:
    return history.groups


@pytest.fixture
def people(history) -> dict[str, User]:
    return history.people


def seed() -> History:
    now = timezone.now()
    groups = make_groups()
    people = make_people(groups)
    types = ("expense", "order", "vendor_onboarding")
    states = ("succeeded", "succeeded", "succeeded", "failed", "compensated", "dead_lettered")
    finished = [
        WorkflowRun(
            workflow_type=types[n % 3],
            workflow_version=1,
            input={},
            state=states[n % 6],
            finished_at=now - timedelta(days=30 + n % 330, hours=n % 24),
        )
        for n in range(HISTORY)
    ]
    finished += [
        WorkflowRun(
            workflow_type=types[n % 3],
            workflow_version=1,
            input={},
            state=states[n % 6],
            finished_at=now - timedelta(hours=n % (24 * sla_selectors.TREND_DAYS - 24)),
        )
        for n in range(RECENT)
    ]
    going = [
        WorkflowRun(workflow_type=types[n % 3], workflow_version=1, input={}, state="running")
        for n in range(600)
    ]
    WorkflowRun.objects.bulk_create(finished + going)
    runs = finished + going
    steps = StepRun.objects.bulk_create(
        StepRun(run=run, node="manager_approval", state="succeeded", scheduled_at=now)
        for run in finished
    ) + StepRun.objects.bulk_create(
        StepRun(run=run, node="manager_approval", state="waiting", scheduled_at=now)
        for run in going
    )

    def task(n: int, run: int, **fields: Any) -> HumanTask:
        return HumanTask(
            run=runs[run],
            step=steps[run],
            node="manager_approval",
            workflow_type=types[n % 3],
            title=f"Task {n}",
            created_at=now - timedelta(days=400),
            **fields,
        )

    deciders = (people["carol"], people["bob"])
    decided = [
        task(
            n,
            n,
            state="completed",
            decided_by=deciders[n % 2],
            decided_at=now - timedelta(days=30 + n % 330),
        )
        for n in range(HISTORY)
    ] + [
        task(
            n,
            HISTORY + n,
            state="completed",
            decided_by=deciders[n % 2],
            decided_at=now - timedelta(hours=n),
        )
        for n in range(RECENT)
    ]
    live = [
        task(n, len(finished) + n, state="open", due_at=now + timedelta(hours=n % 72 - 24))
        for n in range(300)
    ]
    HumanTask.objects.bulk_create(decided + live)
    through = HumanTask.candidate_groups.through
    through.objects.bulk_create(
        through(humantask=made, group=groups["finance" if n % 2 else "legal"])
        for n, made in enumerate(decided + live)
    )
    InboxEntry.objects.bulk_create(
        entry for made in live for entry in inbox_entries.entries_for(made)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return History(now=now, groups=groups, people=people)


def plans(**scope: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each query the dashboard sends, with its plan."""
    with CaptureQueriesContext(connection) as captured:
        sla_selectors.dashboard(now=timezone.now(), **scope)
    found = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
            found.append((query["sql"], cursor.fetchone()[0][0]["Plan"]))
    return found


def whole_tables(found: list[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """The big tables each query reads whole, by the query's start."""
    scans = {
        sql[:80]: [
            node["Relation Name"]
            for node in nodes(plan)
            if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in BIG_TABLES
        ]
        for sql, plan in found
    }
    return {sql: tables for sql, tables in scans.items() if tables}


def indexes(plan: dict[str, Any]) -> set[tuple[str, str]]:
    return {(node["Node Type"], node.get("Index Name", "")) for node in nodes(plan)}


class TestPlans:
    def test_an_operators_dashboard_reads_no_whole_table(self, history):
        found = plans()

        assert len(found) == 8
        assert whole_tables(found) == {}

    def test_the_run_trends_read_a_range_of_the_finished_index(self, history):
        # An Index Only Scan once VACUUM has set the visibility map (as autovacuum does
        # on a real table); inside a test's transaction, a bitmap scan of the same range.
        run_plans = [plan for sql, plan in plans() if '"finished_at" >=' in sql]

        assert len(run_plans) == 2
        for plan in run_plans:
            assert "run_finished_idx" in {name for _, name in indexes(plan)}

    def test_decisions_per_day_read_the_decided_at_index(self, history):
        [decisions] = [plan for sql, plan in plans() if "decided_at" in sql and "::date" in sql]

        assert "task_decided_at_idx" in {name for _, name in indexes(decisions)}

    def test_a_managers_dashboard_reads_no_whole_table_either(self, history, groups):
        found = plans(group_ids={groups["finance"].pk})

        assert len(found) == 6
        assert whole_tables(found) == {}


class TestManagersCountPlans:
    """Beat counts every manager's board at once: a fixed number of queries, however
    many managers, none of which reads a whole table."""

    def test_every_managers_board_is_counted_in_six_queries_reading_no_whole_table(
        self, history, groups, eve
    ):
        GroupManager.objects.create(group=groups["legal"], manager=eve)

        with CaptureQueriesContext(connection) as captured:
            boards = sla_managers.dashboards(now=timezone.now())

        assert len(boards) == 2  # carol's finance, eve's legal
        found = []
        with connection.cursor() as cursor:
            for query in captured.captured_queries:
                cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
                found.append((query["sql"], cursor.fetchone()[0][0]["Plan"]))
        # The managed sets, then live tasks by type, group queues, people, decision
        # times and decisions per day.
        assert len(found) == 6
        assert whole_tables(found) == {}
        decisions = [plan for sql, plan in found if '"decided_at" >=' in sql]
        assert len(decisions) == 2
        for plan in decisions:
            assert "task_decided_at_idx" in {name for _, name in indexes(plan)}


class TestSnapshotPlans:
    def test_an_operators_page_reads_the_snapshot_row_and_a_range_of_a_due_index(
        self, history, operator, client
    ):
        sla_snapshot.refresh(now=timezone.now())
        operator.is_staff = True
        operator.save()
        client.force_login(operator)

        with CaptureQueriesContext(connection) as captured:
            client.get("/console/sla/")

        found = []
        with connection.cursor() as cursor:
            for query in captured.captured_queries:
                if "approvals_humantask" in query["sql"] or "slasnapshot" in query["sql"]:
                    cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
                    found.append((query["sql"], cursor.fetchone()[0][0]["Plan"]))
        assert whole_tables(found) == {}
        [overdue] = [plan for sql, plan in found if "approvals_humantask" in sql]
        # Either index of live tasks by due time: a range from the oldest, LIMIT 10.
        read = {name for _, name in indexes(overdue)}
        assert read & {"task_deadline_due_idx", "task_state_due_idx"}
        assert not any("COUNT(" in sql for sql, _ in found)
