"""The console's task list reads what a page needs, never the history.

A year of decided tasks (10,000, 100 of them in the last two weeks, with expired
and cancelled ones between), offered to a dozen groups, and 300 live tasks spread
over the same year (a stale task is as old as the history), on a hundred runs, are
seeded once in compact tables (tests/plans.py) and ANALYZEd, so that PostgreSQL
has a real choice, the same for every test; then EXPLAIN ANALYZE runs on the
very query each page sends: the list unfiltered and deep in it, each state, and
each kind of link the SLA dashboard gives (a type's, a group's queue's, a
person's, an SLA state's, a day's decisions, a week's decisions of a type), for
an operator and for a group's manager. A node that reads or sorts more than the
live tasks, or than the recent decisions, would grow with the history.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.console import task_selectors as console_task_selectors
from approvals.human_tasks import inbox_entries
from approvals.models import HumanTask, InboxEntry
from tests.plans import compacted_around_module, explain, nodes, rows_out
from workflows.models import StepRun, WorkflowRun

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]

HISTORY = 10_000
RECENT = 100
ENDED = 400  # expired or cancelled, through the year
LIVE = 300
RUNS = 101  # prime to the tasks' cycles of 2, 3, 4, 12 and 13
TEAMS = 12
LIMIT = console_task_selectors.PAGE_SIZE + 1
TASK_TABLES = {"approvals_humantask", "approvals_humantask_candidate_groups"}
TYPES = ("expense", "order", "vendor_onboarding")


# Compact before the class's seed, whatever earlier modules left dead in these tables,
# and after it, so that what these tests leave does not move the plans of those after.
compacted = compacted_around_module()


@dataclass(frozen=True)
class History:
    now: datetime
    finance: int  # the group's id


@pytest.fixture(scope="class")
def history(django_db_setup, django_db_blocker):
    """The year's tasks, the finished ones offered to twelve groups in turn; the live
    ones open in finance's or legal's queue, held by bob, or delegated by carol to bob;
    each on one of 101 waiting runs, as a company's tasks are spread over its runs.

    Seeded once for the class, in a transaction around its tests (each test's own is a
    savepoint inside it), and rolled back after the last: the tests only read, and
    each finds the very tables, statistics and plans the first found (seeded once a
    test, the rolled back seeds of earlier tests swelled the task table on disk, and
    the plans of a test moved with its place in the module's random order).
    """
    with django_db_blocker.unblock(), transaction.atomic():
        yield seed()
        transaction.set_rollback(True)


def seed() -> History:
    now = timezone.now()
    bob, carol = User.objects.create_user("bob"), User.objects.create_user("carol")
    teams = [Group.objects.create(name=name) for name in ("finance", "legal", "security")]
    teams += [Group.objects.create(name=f"team {n}") for n in range(TEAMS - 3)]
    finance, legal = teams[0], teams[1]
    runs = WorkflowRun.objects.bulk_create(
        WorkflowRun(
            workflow_type="expense", workflow_version=1, state="waiting", input={}, started_by=carol
        )
        for _ in range(RUNS)
    )
    steps = StepRun.objects.bulk_create(
        StepRun(run=run, node="manager_approval", state="waiting", scheduled_at=now) for run in runs
    )
    order = itertools.count()

    def task(n: int, created_days_ago: float, **fields: Any) -> HumanTask:
        spread = next(order) % RUNS
        return HumanTask(
            run=runs[spread],
            step=steps[spread],
            node="manager_approval",
            workflow_type=TYPES[n % 3],
            title=f"Task {n}",
            created_at=now - timedelta(days=created_days_ago),
            **fields,
        )

    def decided(n: int, days_ago: float) -> HumanTask:
        return task(
            n,
            days_ago + 0.5,
            state="completed",
            outcome="approved",
            assignee=bob if n % 2 else None,
            decided_by=(carol, bob)[n % 2],
            decided_at=now - timedelta(days=days_ago),
            completed_at=now - timedelta(days=days_ago),
        )

    old = [decided(n, 30 + n % 330 + (n % 24) / 24) for n in range(HISTORY)]
    recent = [decided(n, (n % 13) + (n % 24) / 24) for n in range(RECENT)]
    ended = [
        task(
            n,
            20 + n % 340,
            state=("expired", "cancelled")[n % 2],
            completed_at=now - timedelta(days=19 + n % 340),
        )
        for n in range(ENDED)
    ]
    live = [
        task(
            n,
            n * 365 / LIVE,
            state=("open", "open", "claimed", "delegated")[n % 4],
            assignee=None if n % 4 < 2 else bob,
            owner=carol if n % 4 == 3 else None,
            due_at=None if n % 5 == 0 else now + timedelta(hours=n % 72 - 24),
        )
        for n in range(LIVE)
    ]
    HumanTask.objects.bulk_create(old + recent + ended + live)
    through = HumanTask.candidate_groups.through
    through.objects.bulk_create(
        through(humantask=made, group=teams[n % TEAMS])
        for n, made in enumerate(old + recent + ended)
    )
    through.objects.bulk_create(
        through(humantask=made, group=finance if n % 2 else legal) for n, made in enumerate(live)
    )
    InboxEntry.objects.bulk_create(
        entry for made in live for entry in inbox_entries.entries_for(made)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return History(now=now, finance=finance.pk)


def page_sql(query: dict[str, str], group_ids: frozenset[int] | None = None) -> str:
    """The SQL of the page query the list sends for `query` (not its groups' query)."""
    filters = console_task_selectors.read_filters(query, group_ids=group_ids)
    with CaptureQueriesContext(connection) as captured:
        console_task_selectors.tasks_page(filters=filters, group_ids=group_ids, now=timezone.now())
    return captured.captured_queries[0]["sql"]


def index_names(sql: str) -> set[str]:
    return {node.get("Index Name", "") for node in nodes(explain(sql)["Plan"])} - {""}


def problems(sql: str, *, most_rows_read: int, most_rows_sorted: int) -> list[str]:
    """What is wrong with the plan of `sql`: a sequential scan of a task table, a task
    scan that reads more than `most_rows_read` rows in all its loops, or a sort fed
    more than `most_rows_sorted` rows."""
    found = []
    for node in nodes(explain(sql)["Plan"]):
        relation = node.get("Relation Name")
        if node["Node Type"] == "Seq Scan" and relation in TASK_TABLES:
            found.append(f"Seq Scan on {relation}")
        if relation == "approvals_humantask":
            read = rows_out(node) + node.get("Rows Removed by Filter", 0) * node["Actual Loops"]
            if read > most_rows_read:
                found.append(f"{node['Node Type']} {node.get('Index Name', '')} read {read}")
        if "Sort" in node["Node Type"]:
            fed = sum(rows_out(child) for child in node.get("Plans", []))
            if fed > most_rows_sorted:
                found.append(f"{node['Node Type']} over {fed} rows ({node['Sort Key']})")
    return found


def deep_cursor(query: dict[str, str], *, pages: int) -> str:
    """The cursor `pages` pages into an operator's list for `query`."""
    cursor = ""
    for _ in range(pages):
        filters = console_task_selectors.read_filters({**query, "cursor": cursor}, group_ids=None)
        cursor = console_task_selectors.tasks_page(
            filters=filters, group_ids=None, now=timezone.now()
        ).next_cursor
    assert cursor, "the list is shorter than the deep page"
    return cursor


def dashboard_links(now) -> list[dict[str, str]]:
    """The filters the SLA dashboard's task numbers link to, one of each kind."""
    today = now.astimezone(UTC).date()
    week_ago = (today - timedelta(days=6)).isoformat()
    day = (today - timedelta(days=3)).isoformat()
    return [
        {"state": "live"},
        *({"state": "live", "sla": sla} for sla in ("overdue", "due_soon", "on_time")),
        {"state": "live", "type": "order", "sla": "on_time"},
        {"state": "open", "group": "finance"},
        {"state": "open", "group": "finance", "sla": "overdue"},
        {"state": "live", "person": "bob"},
        {"state": "live", "person": "bob", "sla": "due_soon"},
        {"state": "completed", "decided_from": day, "decided_to": day},
        {
            "state": "completed",
            "type": "order",
            "decided_from": week_ago,
            "decided_to": today.isoformat(),
        },
    ]


def listed(found: dict[Any, list[str]]) -> str:
    return "\n".join(f"{query}: {issues}" for query, issues in found.items())


class TestPlans:
    def test_the_whole_list_and_a_state_read_one_pages_range_and_sort_nothing(self, history):
        deep = deep_cursor({}, pages=40)
        found = {}

        for query in [{}, {"cursor": deep}, {"state": "completed"}]:
            issues = problems(page_sql(query), most_rows_read=2 * LIMIT, most_rows_sorted=0)
            if issues:
                found[str(query)] = issues

        assert found == {}, listed(found)
        assert "task_created_idx" in index_names(page_sql({"cursor": deep}))

    def test_each_dashboard_link_reads_at_most_the_live_tasks_or_the_recent_decisions(
        self, history
    ):
        finance = frozenset({history.finance})
        found = {}

        for group_ids in (None, finance):
            for query in dashboard_links(history.now):
                most = RECENT if "decided_from" in query else LIVE
                sql = page_sql(query, group_ids=group_ids)
                issues = problems(sql, most_rows_read=most, most_rows_sorted=most)
                if issues:
                    found[(str(query), "manager" if group_ids else "operator")] = issues

        assert len(dashboard_links(history.now)) == 11
        assert found == {}, listed(found)

    def test_live_tasks_are_one_range_of_their_own_index_however_deep_the_page(self, history):
        deep = deep_cursor({"state": "live"}, pages=8)

        first, later = page_sql({"state": "live"}), page_sql({"state": "live", "cursor": deep})

        for sql in (first, later):
            assert problems(sql, most_rows_read=LIMIT, most_rows_sorted=0) == []
            assert "task_live_created_idx" in index_names(sql)

    def test_a_days_decisions_are_a_range_of_the_decided_at_index(self, history):
        day = (history.now.astimezone(UTC).date() - timedelta(days=3)).isoformat()

        sql = page_sql({"decided_from": day, "decided_to": day})

        assert "task_decided_at_idx" in index_names(sql)

    def test_a_rare_state_walks_the_newest_tasks_not_the_history(self, history):
        found = {}

        for state in ("expired", "cancelled", "delegated"):
            sql = page_sql({"state": state})
            issues = problems(sql, most_rows_read=HISTORY // 10, most_rows_sorted=ENDED)
            if issues:
                found[state] = issues

        assert found == {}, listed(found)
