"""The inbox's read side against a plain restatement of its rules: every tab, filter and
sort, paged through by keyset, lists exactly the tasks the rules give, once, in order.

Tasks are made directly (`make_task`, not through runs) so that many varied ones are
cheap; their entries come from `inbox_entries.refresh`, as the services make them.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.human_tasks import inbox_entries
from approvals.inbox import selectors
from approvals.models import HumanTask, SavedFilter, Snooze
from approvals.states import Sla, TaskState

pytestmark = pytest.mark.django_db

NO_DUE_TIME = datetime(9999, 1, 1, tzinfo=UTC)
WORDS = ("train", "hotel", "taxi", "dinner")


@pytest.fixture
def varied_tasks(make_task, people, groups):
    """Sixty tasks in every state, held by and open to a mix of people and groups."""
    rng = random.Random(20261201)
    now = timezone.now()
    everyone = list(people.values())
    for n in range(60):
        state = rng.choice(["open", "open", "claimed", "delegated", "completed"])
        assignee = rng.choice(everyone) if state in ("claimed", "delegated") else None
        owner = rng.choice([p for p in everyone if p != assignee]) if state == "delegated" else None
        make_task(
            state=state,
            assignee=assignee,
            owner=owner,
            users=rng.sample(everyone, rng.choice([0, 1, 2])) if state == "open" else [],
            groups=rng.sample(list(groups.values()), rng.choice([0, 1, 2])),
            priority=rng.choice([1, 2, 3, 4]),
            # Shared due times make the task id decide the order between them.
            due_at=rng.choice([None, now - timedelta(hours=5), now + timedelta(hours=3)])
            if n % 3
            else now + timedelta(hours=rng.randrange(-100, 100)),
            workflow_type=rng.choice(["expense", "vendor_onboarding"]),
            title=f"Task {n} {rng.choice(WORDS)}",
        )
    for task in rng.sample(list(HumanTask.objects.all()), 12):
        for user in everyone:
            until = now + timedelta(hours=rng.choice([-1, 1]))
            Snooze.objects.create(task=task, user=user, until=until)


def in_tab(task: HumanTask, user: Any, tab: str) -> bool:
    if tab == "mine":
        return task.state in (TaskState.CLAIMED, TaskState.DELEGATED) and task.assignee == user
    if tab == "delegated":
        return task.state == TaskState.DELEGATED and task.owner == user
    return task.state == TaskState.OPEN and (
        user in task.candidate_users.all()
        or bool({group.pk for group in task.candidate_groups.all()} & user.group_ids)
    )


def expected(user: Any, filters: selectors.InboxFilters, now: datetime) -> list[str]:
    """The titles a tab should list, straight from the rules."""
    user.group_ids = set(user.groups.values_list("id", flat=True))
    shown = []
    tasks = HumanTask.objects.prefetch_related("candidate_users", "candidate_groups", "snoozes")
    for task in tasks:
        due = task.due_at or NO_DUE_TIME
        if not in_tab(task, user, filters.tab):
            continue
        if any(s.user_id == user.pk and s.until > now for s in task.snoozes.all()):
            continue
        if filters.workflow_type and task.workflow_type != filters.workflow_type:
            continue
        if filters.priority is not None and task.priority != filters.priority:
            continue
        if filters.sla == Sla.OVERDUE and not due <= now:
            continue
        if filters.sla == Sla.DUE_SOON and not now < due <= now + timedelta(hours=24):
            continue
        if filters.sla == Sla.ON_TIME and not due > now + timedelta(hours=24):
            continue
        if filters.search and filters.search not in task.title.split():
            continue
        shown.append(task)
    if filters.sort == "priority":
        shown.sort(key=lambda t: (-t.priority, t.due_at or NO_DUE_TIME, t.pk))
    else:
        shown.sort(key=lambda t: (t.due_at or NO_DUE_TIME, t.pk))
    return [task.title for task in shown]


def listed(user: Any, filters: selectors.InboxFilters, now: datetime) -> list[str]:
    """Every title the inbox lists, following the cursors page by page (pages of 6)."""
    titles, cursor = [], ""
    for _ in range(100):
        page = selectors.inbox(
            user=user,
            filters=selectors.InboxFilters(**{**filters.__dict__, "cursor": cursor}),
            now=now,
            limit=6,
        )
        titles += [task.title for task in page.tasks]
        cursor = page.next_cursor
        if not cursor:
            return titles
    raise AssertionError("the cursors never end")


FILTERS = [
    {},
    {"workflow_type": "vendor_onboarding"},
    {"priority": 3},
    {"sla": Sla.OVERDUE},
    {"sla": Sla.DUE_SOON},
    {"sla": Sla.ON_TIME},
    {"search": "hotel"},
    {"priority": 2, "sla": Sla.ON_TIME},
]


class TestEveryTabFilterAndSort:
    @pytest.mark.parametrize("tab", ["mine", "queue", "delegated"])
    @pytest.mark.parametrize("sort", ["due", "priority"])
    def test_pages_list_what_the_rules_give_once_in_order(self, varied_tasks, people, tab, sort):
        now = timezone.now()
        checked = 0

        for person, extra in itertools.product(people.values(), FILTERS):
            filters = selectors.InboxFilters(tab=tab, sort=sort, **extra)
            want = expected(person, filters, now)
            assert listed(person, filters, now) == want, (person.username, extra)
            checked += len(want)

        assert checked > 0

    @pytest.mark.parametrize("sort", ["due", "priority"])
    def test_the_plain_query_used_off_postgresql_lists_the_same(
        self, varied_tasks, people, sort, monkeypatch
    ):
        now = timezone.now()
        wanted = {
            person.username: expected(person, selectors.InboxFilters(tab="queue", sort=sort), now)
            for person in people.values()
        }
        monkeypatch.setattr(connection, "vendor", "sqlite")

        for person in people.values():
            filters = selectors.InboxFilters(tab="queue", sort=sort)
            assert listed(person, filters, now) == wanted[person.username]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="compiled once on PostgreSQL only")
class TestCompiledOnce:
    """The SQL of a page and of the counts is compiled once per shape of filters
    (approvals.inbox.compiled_queries); bound to a call's values, it is what the ORM compiles."""

    @pytest.mark.parametrize("tab", ["mine", "queue", "delegated"])
    @pytest.mark.parametrize("sort", ["due", "priority"])
    def test_a_page_of_any_shape_binds_to_what_the_orm_compiles(self, bob, tab, sort):
        now = timezone.now()
        cursor = selectors._encode(
            [3, now.isoformat(), "6d1b8a52-0000-4000-8000-000000000001"]
            if sort == "priority"
            else [now.isoformat(), "6d1b8a52-0000-4000-8000-000000000001"]
        )

        for extra, after in itertools.product(FILTERS, ["", cursor]):
            filters = selectors.InboxFilters(tab=tab, sort=sort, cursor=after, **extra)
            shape = selectors._Shape(
                vendor="postgresql",
                tab=tab,
                sort=sort,
                workflow_type=bool(filters.workflow_type),
                priority=filters.priority is not None,
                sla=filters.sla,
                search=bool(filters.search),
                after=bool(after),
            )
            values = selectors._values(
                filters, user_id=bob.pk, now=now, after=selectors._decode(after, sort)
            )

            bound = selectors._page(shape, values, functions_used=False)

            assert bound == selectors._page_sql(shape, values), (extra, after)

    def test_the_counts_bind_to_what_the_orm_compiles(self, bob):
        values = {"user_id": bob.pk, "now": timezone.now()}

        bound = selectors._header(connection.vendor).bind(values)

        assert bound == selectors._header_sql(connection.vendor, values)


class TestPageTasks:
    """A page's tasks are read as plain values from their inbox entries, with the page's
    ids (selectors.inbox): the same values select_related and the viewer's annotation
    would load from the task, its run and its people."""

    def test_each_task_holds_what_the_orm_loads(self, varied_tasks, people, finance_task, carol):
        from approvals import duties
        from workflows.models import WorkflowRun

        # One task naming four different people, so that no two usernames can be mixed up.
        named = HumanTask.objects.filter(state="delegated").first()
        holders = (named.assignee_id, named.owner_id)
        substitute, requester = [p for p in people.values() if p.pk not in holders][:2]
        HumanTask.objects.filter(pk=named.pk).update(substitute_for=substitute)
        WorkflowRun.objects.filter(pk=named.run_id).update(started_by=requester)
        # A task's type is its run's, as the services open it (varied_tasks mixes them).
        run = WorkflowRun.objects.get(pk=named.run_id)
        HumanTask.objects.filter(run=run).update(workflow_type=run.workflow_type)
        # As the services do after a change to a task or its run (inbox_entries' rule).
        inbox_entries.refresh_run(run)
        built = []
        # Each person's every page (their tabs show every task some inbox shows).
        for person in people.values():
            shown = {task.pk: task for task in shown_to(person)}
            wanted = {
                task.pk: task
                for task in HumanTask.objects.filter(pk__in=shown)
                .select_related("assignee", "owner", "substitute_for", "run__started_by")
                .annotate(**duties.page_annotations(person))
            }

            for task in shown.values():
                want = wanted[task.pk]
                # Off PostgreSQL neither has them: duties_on_page reads them itself.
                decisions = getattr(want, "viewer_decisions", None)
                # Only separation of duties reads the run's input, for these types.
                requesting = want.run.workflow_type in duties.requester_types()
                assert task == dataclasses.replace(
                    selectors.PageTask.of(want),
                    viewer_decisions=None if decisions is None else tuple(decisions),
                    run_input=want.run.input if requesting else {},
                )
            built.extend(shown.values())

        assert named.pk in {task.pk for task in built}
        assert any(task.substitute_for and task.started_by for task in built)
        assert any(task.run_input for task in built)
        # carol decided the first stage of finance_task's run.
        assert connection.vendor != "postgresql" or any(task.viewer_decisions for task in built)

    def test_only_tasks_of_types_that_separate_approvers_carry_the_viewers_decisions(
        self, finance_task, carol, monkeypatch
    ):
        from approvals import duties

        assert "expense" in duties.separating_types()
        monkeypatch.setattr(duties, "separating_types", lambda: ())

        (built,) = [task for task in shown_to(carol) if task.pk == finance_task.pk]

        assert built.viewer_decisions is None
        # Read apart, carol's decision of the run's first stage still bars her.
        (conflict,) = [d.decisions for d in duties.duties_on_page([built]).values()]
        assert [decision.decided_by_id for decision in conflict] == [carol.pk]


def shown_to(user: Any) -> list[selectors.PageTask]:
    """The tasks of every page of each of `user`'s tabs, in pages of the usual size."""
    tasks = []
    for tab in selectors.TABS:
        cursor = ""
        while True:
            filters = selectors.InboxFilters(tab=tab, cursor=cursor)
            page = selectors.inbox(user=user, filters=filters, now=timezone.now())
            tasks.extend(page.tasks)
            cursor = page.next_cursor
            if not cursor:
                break
    return tasks


class TestCounts:
    def test_each_tab_counts_what_it_lists(self, varied_tasks, people):
        now = timezone.now()

        for person in people.values():
            counts = selectors.inbox_header(user=person, now=now).counts
            for tab in selectors.TABS:
                assert counts[tab] == len(expected(person, selectors.InboxFilters(tab=tab), now))

    def test_a_task_in_two_of_my_groups_counts_once(self, make_task, bob, groups):
        make_task(state="open", users=[bob], groups=[groups["finance"], groups["security"]])

        counts = selectors.inbox_header(user=bob, now=timezone.now()).counts

        assert counts["queue"] == 1

    def test_counts_stop_at_the_cap(self, make_task, bob, groups):
        for _ in range(selectors.COUNT_CAP + 5):
            make_task(state="open", groups=[groups["finance"], groups["security"]])
        for _ in range(3):
            make_task(state="claimed", assignee=bob)

        counts = selectors.inbox_header(user=bob, now=timezone.now()).counts

        assert counts == {"mine": 3, "queue": selectors.COUNT_CAP, "delegated": 0}


class TestPageWithHeader:
    """The whole inbox page reads its list and its header together (inbox_with_header)."""

    @pytest.mark.parametrize("functions_used", [True, False], ids=["functions", "statements"])
    def test_it_reads_what_the_page_and_the_header_read_apart(
        self, varied_tasks, people, settings, functions_used
    ):
        settings.BATON_DB_FUNCTIONS = functions_used
        SavedFilter.objects.create(user=people["bob"], name="Hotels", query="q=hotel")
        SavedFilter.objects.create(user=people["bob"], name="Overdue", query="sla=overdue")
        now = timezone.now()
        checked = 0

        for person, tab, extra in itertools.product(people.values(), selectors.TABS, FILTERS):
            cursor = ""
            for _ in range(2):  # the first page, and the next one where there is one
                filters = selectors.InboxFilters(tab=tab, cursor=cursor, **extra)
                page, header = selectors.inbox_with_header(user=person, filters=filters, now=now)

                assert page == selectors.inbox(user=person, filters=filters, now=now)
                assert header == selectors.inbox_header(user=person, now=now)
                checked += len(page.tasks)
                cursor = page.next_cursor
                if not cursor:
                    break

        assert checked > 0

    def test_it_sends_one_query_on_postgresql_and_one_each_elsewhere(
        self, bob, make_task, monkeypatch
    ):
        make_task(state="claimed", assignee=bob, title="Mine")
        filters = selectors.InboxFilters()
        together, apart = (1, 2) if connection.vendor == "postgresql" else (2, 2)

        with CaptureQueriesContext(connection) as here:
            page, header = selectors.inbox_with_header(
                user=bob, filters=filters, now=timezone.now()
            )
        monkeypatch.setattr(connection, "vendor", "sqlite")
        with CaptureQueriesContext(connection) as elsewhere:
            selectors.inbox_with_header(user=bob, filters=filters, now=timezone.now())

        assert [task.title for task in page.tasks] == ["Mine"]
        assert header.counts["mine"] == 1
        assert len(here.captured_queries) == together
        assert len(elsewhere.captured_queries) == apart

    def test_it_sends_the_very_statements_the_page_and_the_header_send_apart(self, bob, make_task):
        make_task(state="claimed", assignee=bob, title="Mine")
        filters, now = selectors.InboxFilters(), timezone.now()
        with CaptureQueriesContext(connection) as apart:
            selectors.inbox(user=bob, filters=filters, now=now)
            selectors.inbox_header(user=bob, now=now)

        with CaptureQueriesContext(connection) as together:
            selectors.inbox_with_header(user=bob, filters=filters, now=now)

        # So the plans tests (test_inbox_plans.py), which explain each, cover what is sent.
        statements = [query["sql"] for query in apart.captured_queries]
        sent = [query["sql"] for query in together.captured_queries]
        assert sent == (
            [";\n".join(statements)] if connection.vendor == "postgresql" else statements
        )

    def test_a_damaged_cursor_is_refused_before_any_query(self, bob):
        filters = selectors.InboxFilters(cursor="not-a-cursor")

        with CaptureQueriesContext(connection) as captured, pytest.raises(selectors.BadCursor):
            selectors.inbox_with_header(user=bob, filters=filters, now=timezone.now())

        assert captured.captured_queries == []


class TestCursors:
    def test_a_cursor_of_the_other_sort_is_refused(self, make_task, carol):
        for n in range(3):
            make_task(state="claimed", assignee=carol, title=f"Task {n}")
        due_cursor = selectors.inbox(
            user=carol, filters=selectors.InboxFilters(), now=timezone.now(), limit=1
        ).next_cursor

        with pytest.raises(selectors.BadCursor):
            selectors.inbox(
                user=carol,
                filters=selectors.InboxFilters(sort="priority", cursor=due_cursor),
                now=timezone.now(),
                limit=10,
            )

    @pytest.mark.parametrize(
        "value",
        [
            ["9999-12-31T23:59:59-12:00", "00000000-0000-0000-0000-000000000000"],
            [9, "2026-01-01T00:00:00", "00000000-0000-0000-0000-000000000000"],
            {"a": 1, "b": 2},
            ["2026-01-01T00:00:00"],
        ],
    )
    def test_a_damaged_cursor_is_refused(self, value):
        cursor = selectors._encode(value)

        with pytest.raises(selectors.BadCursor):
            selectors._decode(cursor, "due")
        with pytest.raises(selectors.BadCursor):
            selectors._decode(cursor, "priority")

    def test_a_cursor_nested_past_pythons_recursion_limit_is_refused(self):
        cursor = base64.urlsafe_b64encode(b"[" * 3000).decode()

        with pytest.raises(selectors.BadCursor):
            selectors._decode(cursor, "due")

    def test_no_cursor_reads_as_the_first_page(self):
        assert selectors._decode("", "due") is None
