"""The inbox's queries read a short range of an index, in the order shown, at any size.

Thousands of tasks are seeded and ANALYZEd, so that PostgreSQL has a real choice,
then EXPLAIN ANALYZE runs on the very queries a page sends, for every tab, sort and
filter, on the first page and a deep one, and on the plans the page's and the
counts' functions keep. A backlog (600 per stream) is far larger than what any
node may touch, so reading or sorting it would show.

The tables are compacted before the seed and after the tests: the suite's PostgreSQL
runs without autovacuum, and the dead rows and stale sizes earlier modules leave
would otherwise weigh on the planner's choices here.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.human_tasks import inbox_entries
from approvals.inbox import selectors
from approvals.models import HumanTask, InboxEntry, Snooze
from approvals.run_data_filters import Condition
from tests.plans import compact, explain, nodes, rows_out
from workflows.models import StepRun, WorkflowRun

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are PostgreSQL's"),
]

BACKLOG = 600
LONGEST_STREAM = BACKLOG + 100  # security's queue: its own 600, and 100 shared with finance
SNOOZED = 20
RUNS = 101  # prime to the tasks' other cycles, so that each person's tasks fall on every run
TASK_TABLES = {
    "approvals_humantask",
    "approvals_inboxentry",
    "approvals_snooze",
    "approvals_humantask_candidate_users",
    "approvals_humantask_candidate_groups",
}


# What the inbox's queries read, and the tables the seed fills.
READ_TABLES = [
    *sorted(TASK_TABLES),
    "auth_user",
    "auth_user_groups",
    "auth_group",
    "approvals_groupmanager",
    "approvals_savedfilter",
    "workflows_workflowrun",
    "workflows_steprun",
]


@pytest.fixture(scope="module")
def compacted(django_db_setup, django_db_blocker):
    """Compact the tables the inbox reads before the seed and once the tests are done, as
    autovacuum would: earlier modules' rolled-back rows stay on disk as dead rows and
    index entries until then, and larger tables and indexes move these plans; what
    these tests leave would move the plan tests that come after."""
    compact(django_db_blocker, tuple(READ_TABLES))
    yield
    compact(django_db_blocker, tuple(READ_TABLES))


@pytest.fixture(scope="class")
def crowded(compacted, django_db_setup, django_db_blocker):
    """bob's tabs: 600 tasks of his, 600 he delegated, 600 in each of his two groups'
    queues (finance and security, 100 in both) and 600 open to him by name; beside
    them, other people's thousands, finished tasks, and snoozes: spread over 101
    waiting runs, as a company's tasks are (on one run, the index of a run's decisions
    ranks a person's as well as their own index does, and the planner's choice
    between two such indexes turns on noise).

    Seeded once for the class, in a transaction around its tests (each test's own is a
    savepoint inside it), and rolled back after the last: the tests only read.
    """
    with django_db_blocker.unblock(), transaction.atomic():
        bob = seed()
        yield bob
        transaction.set_rollback(True)


def seed() -> User:
    now = timezone.now()
    others = User.objects.bulk_create(User(username=f"user{n}") for n in range(20))
    bob, alice = User.objects.create_user("bob"), User.objects.create_user("alice")
    finance, security, legal = (
        Group.objects.create(name=name) for name in ("finance", "security", "legal")
    )
    bob.groups.add(finance, security)
    alice.groups.add(legal)
    tasks, candidates = [], []

    # The run objects in memory: the entries' view values read them.
    runs = WorkflowRun.objects.bulk_create(
        WorkflowRun(workflow_type="expense", workflow_version=1, state="waiting", input={})
        for _ in range(RUNS)
    )
    steps = StepRun.objects.bulk_create(
        StepRun(run=run, node="manager_approval", state="waiting", scheduled_at=now) for run in runs
    )

    def task(n: int, **fields: Any) -> HumanTask:
        made = HumanTask(
            run=runs[len(tasks) % RUNS],
            step=steps[len(tasks) % RUNS],
            node="manager_approval",
            workflow_type=("expense", "vendor_onboarding")[n % 2],
            title=f"Task {n} {('train', 'hotel', 'taxi')[n % 3]}",
            search_data={"amount": n * 10},
            priority=1 + n % 4,
            due_at=None if n % 7 == 0 else now + timedelta(hours=n % 300 - 100),
            created_at=now,
            **fields,
        )
        tasks.append(made)
        return made

    for n in range(BACKLOG):
        task(n, state="claimed", assignee=bob)
        task(n, state="delegated", assignee=alice, owner=bob)
        candidates.append(
            (task(n, state="open"), [], [finance, security] if n < 100 else [finance])
        )
        candidates.append((task(n, state="open"), [], [security]))
        candidates.append((task(n, state="open"), [bob], []))
        candidates.append((task(n, state="open"), [], [legal]))
    for n in range(3000):
        task(n, state="claimed", assignee=others[n % 20])
        task(n, state="completed", outcome="approved", decided_by=others[n % 20])
    HumanTask.objects.bulk_create(tasks)
    by_user, by_group = HumanTask.candidate_users.through, HumanTask.candidate_groups.through
    by_user.objects.bulk_create(
        by_user(humantask=made, user=user) for made, users, _ in candidates for user in users
    )
    by_group.objects.bulk_create(
        by_group(humantask=made, group=group)
        for made, _, in_groups in candidates
        for group in in_groups
    )
    # The rows refresh would write, made in bulk (test_inbox_entries proves refresh).
    InboxEntry.objects.bulk_create(
        entry for made in tasks for entry in inbox_entries.entries_for(made)
    )
    mine = [made for made in tasks if made.assignee_id == bob.pk and made.state == "claimed"]
    Snooze.objects.bulk_create(
        Snooze(task=made, user=bob, until=now + timedelta(hours=1 if n < SNOOZED else -1))
        for n, made in enumerate(mine[: SNOOZED * 2])
    )
    Snooze.objects.bulk_create(
        Snooze(task=made, user=others[n % 20], until=now + timedelta(hours=1))
        for n, made in enumerate(tasks[:3000])
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return bob


def problems(sql: str, *, most_rows_read: int, most_rows_sorted: int) -> list[str]:
    """What is wrong with the plan of `sql`: a sequential scan of a task table, a scan
    that reads more than `most_rows_read` rows per loop, a sort fed more than
    `most_rows_sorted` rows, or JIT."""
    explained = explain(sql)
    found = ["JIT compiled it"] if "JIT" in explained else []
    for node in nodes(explained["Plan"]):
        relation = node.get("Relation Name")
        if node["Node Type"] == "Seq Scan" and relation in TASK_TABLES:
            found.append(f"Seq Scan on {relation}")
        if relation == "approvals_inboxentry":
            read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            if read > most_rows_read:
                found.append(f"{node['Node Type']} read {read} entries per loop")
        if node["Node Type"] == "Sort":
            fed = sum(rows_out(child) for child in node.get("Plans", []))
            if fed > most_rows_sorted:
                found.append(f"Sort over {fed} rows ({node['Sort Key']})")
    return found


def page_queries(user: Any, filters: selectors.InboxFilters) -> tuple[list[str], str]:
    with CaptureQueriesContext(connection) as queries:
        page = selectors.inbox(user=user, filters=filters, now=timezone.now())
    return [query["sql"] for query in queries.captured_queries], page.next_cursor


def deep_cursor(user: Any, filters: selectors.InboxFilters, pages: int) -> str:
    cursor = ""
    for _ in range(pages):
        cursor = selectors.inbox(
            user=user,
            filters=selectors.InboxFilters(**{**filters.__dict__, "cursor": cursor}),
            now=timezone.now(),
        ).next_cursor
    assert cursor, "the backlog is shorter than the deep page"
    return cursor


# Filters an index range serves. The others (type, title search, run data) filter the rows of the
# tab's range as it is read, so a rare match may read the whole tab (never more): the
# planner may then sort what matched, which is why they get the tab's size as bounds.
RANGE_FILTERS = [{}, {"priority": 3}, {"sla": "overdue"}, {"sla": "on_time"}]
WALK_FILTERS = [
    {"workflow_type": "vendor_onboarding"},
    {"search": "hotel"},
    {"where": (Condition("amount", ">", 1000),)},
]
# A run-data filter's page is planned with its values (not compiled once): PostgreSQL
# may then read each of the person's streams whole, through its index, and sort what
# matched, stream by stream. Still only the person's own rows, never anyone else's.
DATA_FILTER = WALK_FILTERS[-1]
STREAMS = 3  # bob's own, and one for each of his two groups


def kept_plan_problems(
    function: Any, query: str, values: str, *, most_rows_read: int, most_rows_sorted: int
) -> list[str]:
    """What is wrong with the plan `function` keeps for `query` (its body, or one of its
    cases) run with `values`: planned as the function plans it, for any values (a
    generic plan, which its settings force)."""
    with connection.cursor() as cursor:
        cursor.execute(f"PREPARE kept ({', '.join(function.arguments)}) AS {query}")
        for setting, value in function.planner:  # as the function sets them
            cursor.execute(f"SET LOCAL {setting} = {value}")
        try:
            return problems(
                f"EXECUTE kept ({values})",
                most_rows_read=most_rows_read,
                most_rows_sorted=most_rows_sorted,
            )
        finally:
            cursor.execute("DEALLOCATE kept")


class TestPlans:
    def test_every_page_reads_a_short_range_of_an_index_and_sorts_no_backlog(
        self, settings, crowded
    ):
        # The statements themselves, as planned for these values (a filtered page's, as
        # it is sent); the function that runs an unfiltered page keeps a plan for any
        # values (test_the_page_functions_kept_plans...).
        settings.BATON_DB_FUNCTIONS = False
        limit = selectors.PAGE_SIZE + 1
        pages = []
        for tab, sort in itertools.product(selectors.TABS, selectors.SORTS):
            for extra in RANGE_FILTERS + WALK_FILTERS:
                pages.append((selectors.InboxFilters(tab=tab, sort=sort, **extra), extra))
            deep = deep_cursor(crowded, selectors.InboxFilters(tab=tab, sort=sort), pages=4)
            pages.append((selectors.InboxFilters(tab=tab, sort=sort, cursor=deep), {}))
        found = {}

        for filters, extra in pages:
            sqls, _ = page_queries(crowded, filters)
            walk = extra in WALK_FILTERS
            # One statement: the page's ids, and each one's row through the entries'
            # task index (one entry a loop), in the ids' order.
            (page,) = sqls
            sorted_at_most = LONGEST_STREAM if walk else STREAMS * limit
            if extra is DATA_FILTER:
                sorted_at_most = STREAMS * LONGEST_STREAM
            issues = problems(
                page,
                most_rows_read=LONGEST_STREAM if walk else limit + SNOOZED,
                most_rows_sorted=sorted_at_most,
            )
            if issues:
                found[(filters.tab, filters.sort, str(extra), bool(filters.cursor))] = issues

        assert len(pages) == 48
        assert found == {}

    def test_the_page_functions_kept_plans_read_a_short_range_and_sort_no_backlog(self, crowded):
        # The function keeps one plan per tab and sort for any user, cursor and types (a
        # generic plan, which its settings force): mine and delegated read one range of
        # bob's index and sort nothing; the queue merges bob's range with one per group,
        # each cut at a page, and sorts at most those. Each task's row is one entry.
        function = selectors.page_function()
        limit = selectors.PAGE_SIZE + 1
        shapes = list(itertools.product(selectors.TABS, selectors.SORTS))
        queries = [query for _, query in function.cases] + [function.body]
        types = ",".join(f"'{name}'" for name in ("expense", "vendor_onboarding"))
        now = timezone.now()
        found = {}

        for (tab, sort), query in zip(shapes, queries, strict=True):
            filters = selectors.InboxFilters(tab=tab, sort=sort)
            deep = deep_cursor(crowded, filters, pages=4)
            for cursor in ("", deep):
                after = selectors._decode(cursor, sort)
                values = selectors._values(filters, user_id=crowded.pk, now=now, after=after)
                arguments = ", ".join(
                    [
                        str(crowded.pk),
                        f"'{tab}'",
                        f"'{sort}'",
                        f"'{now.isoformat()}'",
                        str(values["after_priority"]),
                        f"'{values['after_due'].isoformat()}'",
                        f"'{values['after_id']}'",
                        f"ARRAY[{types}]::varchar[]",
                        f"ARRAY[{types}]::varchar[]",
                    ]
                )
                issues = kept_plan_problems(
                    function,
                    query,
                    arguments,
                    most_rows_read=limit + SNOOZED,
                    most_rows_sorted=STREAMS * limit if tab == "queue" else 0,
                )
                if issues:
                    found[(tab, sort, bool(cursor))] = issues

        assert len(shapes) == len(function.cases) + 1 == 6
        assert found == {}

    def test_the_counts_read_at_most_the_cap_of_each_stream(self, settings, crowded):
        # The statement itself, as planned for these values; the function that runs it
        # on a page is planned for any values (the next test).
        settings.BATON_DB_FUNCTIONS = False
        with CaptureQueriesContext(connection) as queries:
            header = selectors.inbox_header(user=crowded, now=timezone.now())

        assert len(queries) == 1
        assert header.counts == {
            "mine": selectors.COUNT_CAP,
            "queue": selectors.COUNT_CAP,
            "delegated": selectors.COUNT_CAP,
        }
        cap = selectors.COUNT_CAP
        assert (
            problems(
                queries.captured_queries[0]["sql"],
                most_rows_read=cap + SNOOZED,
                most_rows_sorted=STREAMS * cap,
            )
            == []
        )

    def test_the_counts_functions_kept_plan_reads_at_most_the_cap_of_each_stream(self, crowded):
        # The function keeps one plan for any user and time (a generic plan, which its
        # settings force): it must read the same ranges as the plan for these values.
        function = selectors.header_function()
        cap = selectors.COUNT_CAP

        found = kept_plan_problems(
            function,
            function.body,
            f"{crowded.pk}, '{timezone.now().isoformat()}'",
            most_rows_read=cap + SNOOZED,
            most_rows_sorted=STREAMS * cap,
        )

        assert found == []

    def test_a_deep_page_reads_as_few_entries_as_the_first(self, settings, crowded):
        settings.BATON_DB_FUNCTIONS = False
        filters = selectors.InboxFilters(tab="queue")
        (first,), _ = page_queries(crowded, filters)
        deep = deep_cursor(crowded, filters, pages=20)
        (later,), _ = page_queries(crowded, selectors.InboxFilters(tab="queue", cursor=deep))

        def entries_read(sql: str) -> float:
            return sum(
                rows_out(node) + node.get("Rows Removed by Filter", 0) * node["Actual Loops"]
                for node in nodes(explain(sql)["Plan"])
                if node.get("Relation Name") == "approvals_inboxentry"
            )

        limit = selectors.PAGE_SIZE + 1
        # Each stream's page, the snoozed tasks passed over, and one entry of each task shown.
        most = STREAMS * limit + SNOOZED + limit
        assert entries_read(first) <= most
        assert entries_read(later) <= most
