"""The SLA dashboard as beat counts it, the operators' and each managed set of groups':
saved as one row per scope, read back whole while fresh, counted live when stale."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.console import sla as sla_selectors
from approvals.console import sla_snapshot
from approvals.models import GroupManager, HumanTask, SlaSnapshot
from approvals.states import TaskState
from approvals.tasks import refresh_sla_snapshot
from tests.approvals.test_sla_selectors import by_name, finished
from tests.plans import nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def olga_client(operator) -> Client:
    operator.is_staff = True
    operator.save()
    client = Client()
    client.force_login(User.objects.get(pk=operator.pk))
    return client


@pytest.fixture
def history(make_task, manager_task, groups, bob, carol, now):
    """An overdue task in finance's queue, one due soon held by bob, a decision and
    finished runs today."""
    make_task(groups=[groups["finance"]], due_at=now - timedelta(hours=3), title="Late")
    make_task(state=TaskState.CLAIMED, assignee=bob, due_at=now + timedelta(hours=2))
    make_task(state=TaskState.COMPLETED, decided_at=now, decided_by=carol)
    finished(workflow_type="order", state="succeeded", at=now, count=2)
    finished(workflow_type="order", state="dead_lettered", at=now)


class TestRefresh:
    def test_the_saved_numbers_are_the_live_dashboards(self, history, now):
        live = sla_selectors.dashboard(now=now)

        refresh_sla_snapshot()

        read = sla_snapshot.dashboard(now=now)
        assert read.overall == live.overall
        assert by_name(read.by_type) == by_name(live.by_type)
        assert by_name(read.by_group) == by_name(live.by_group)
        assert by_name(read.by_assignee) == by_name(live.by_assignee)
        assert read.latency == live.latency
        assert read.days == live.days
        assert read.decisions_per_day == live.decisions_per_day
        assert read.run_trends == live.run_trends
        assert read.cycle_times == live.cycle_times
        assert [task.title for task in read.oldest_overdue] == ["Late"]

    def test_refreshing_twice_keeps_one_row_with_the_later_count(self, history, now):
        sla_snapshot.refresh(now=now - timedelta(seconds=30))

        sla_snapshot.refresh(now=now)

        assert SlaSnapshot.objects.get(scope=sla_snapshot.OPERATORS).computed_at == now
        assert SlaSnapshot.objects.count() == 2  # the operators' and carol's finance


class TestReading:
    def test_a_fresh_snapshot_is_shown_as_of_its_time_and_not_recounted(
        self, olga_client, history, make_task, now
    ):
        sla_snapshot.refresh(now=now - timedelta(seconds=20))
        make_task(due_at=now - timedelta(hours=1), title="After the count")

        response = olga_client.get("/console/sla/")

        board = response.context["board"]
        assert board.now == now - timedelta(seconds=20)
        assert board.overall.overdue == 1  # the count's; the newer task waits for the next
        assert "After the count" in response.text  # the oldest overdue are read live

    def test_a_snapshot_twice_the_interval_old_is_ignored(
        self, olga_client, history, make_task, now, settings
    ):
        settings.BATON_SLA_SNAPSHOT_SECONDS = 60
        sla_snapshot.refresh(now=now - timedelta(seconds=121))
        make_task(due_at=now - timedelta(hours=1))

        response = olga_client.get("/console/sla/")

        assert response.context["board"].overall.overdue == 2

    def test_a_snapshot_of_another_shape_is_counted_live(
        self, olga_client, history, make_task, now
    ):
        # As one saved by the code before a deploy: the lists' counts of the rest missing.
        snapshot = sla_snapshot.refresh(now=now)
        del snapshot.data["people_not_shown"]
        snapshot.save()
        make_task(due_at=now - timedelta(hours=1))

        response = olga_client.get("/console/sla/")

        assert response.context["board"].overall.overdue == 2  # counted now, not read


class TestPlan:
    def test_with_a_fresh_snapshot_the_page_reads_its_row_and_ten_overdue_tasks(
        self, olga_client, history, now
    ):
        sla_snapshot.refresh(now=now)

        with CaptureQueriesContext(connection) as captured:
            olga_client.get("/console/sla/")

        read = []
        with connection.cursor() as cursor:
            for query in captured.captured_queries:
                sql = query["sql"]
                if "approvals_slasnapshot" in sql or '"approvals_humantask"' in sql:
                    cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
                    plan = cursor.fetchone()[0][0]["Plan"]
                    read.append({node.get("Relation Name") for node in nodes(plan)} - {None})
        # Nothing else counts tasks, entries or runs: the page's cost is the row's and
        # the index range of the oldest overdue, whatever the open work.
        assert [tables for tables in read if "approvals_slasnapshot" in tables] == [
            {"approvals_slasnapshot"}
        ]
        assert [tables for tables in read if "approvals_humantask" in tables] == [
            {"approvals_humantask", "auth_user"}
        ]
        sent = " ".join(query["sql"] for query in captured.captured_queries)
        assert "approvals_inboxentry" not in sent
        assert "workflows_workflowrun" not in sent


class TestPeople:
    def test_the_page_lists_the_fifty_most_overdue_people_and_counts_the_rest(
        self, olga_client, make_task, now
    ):
        people = User.objects.bulk_create(
            User(username=f"reviewer-{number:03d}") for number in range(55)
        )
        for number, person in enumerate(people):
            late = now - timedelta(hours=1) if number >= 50 else now + timedelta(days=3)
            make_task(state=TaskState.CLAIMED, assignee=person, due_at=late)
        sla_snapshot.refresh(now=now)

        response = olga_client.get("/console/sla/")

        board = response.context["board"]
        assert len(board.by_assignee) == 50
        assert {"reviewer-050", "reviewer-054"} <= {row.name for row in board.by_assignee}
        assert "reviewer-054" in response.text  # overdue: listed first
        assert "reviewer-049" not in response.text  # on time, and last by name
        hidden = board.people_not_shown  # every holder is still counted
        assert hidden >= 5
        assert f"{hidden} more hold tasks" in response.text

    def test_the_snapshot_keeps_only_the_people_the_page_shows(self, make_task, now):
        people = User.objects.bulk_create(
            User(username=f"reviewer-{number:03d}") for number in range(55)
        )
        for person in people:
            make_task(state=TaskState.CLAIMED, assignee=person, due_at=now + timedelta(days=3))

        snapshot = sla_snapshot.refresh(now=now)

        assert len(snapshot.data["by_assignee"]) == 50
        assert snapshot.data["people_not_shown"] >= 5


class TestGroups:
    def test_the_page_lists_the_fifty_most_overdue_groups_and_counts_the_rest(
        self, olga_client, make_task, now
    ):
        groups = Group.objects.bulk_create(Group(name=f"team-{number:03d}") for number in range(55))
        for number, group in enumerate(groups):
            late = now - timedelta(hours=1) if number >= 50 else now + timedelta(days=3)
            make_task(state=TaskState.OPEN, groups=[group], due_at=late)
        sla_snapshot.refresh(now=now)

        response = olga_client.get("/console/sla/")

        board = response.context["board"]
        assert len(board.by_group) == 50
        assert {"team-050", "team-054"} <= {row.name for row in board.by_group}
        assert "team-049" not in response.text  # on time, and last by name
        hidden = board.groups_not_shown  # every group with a queue is still counted
        assert hidden >= 5
        assert f"{hidden} more have tasks waiting" in response.text


@pytest.fixture
def carol_client(carol) -> Client:
    """carol, who manages finance (and may not open the console)."""
    client = Client()
    client.force_login(carol)
    return client


@pytest.fixture
def finance_and_legal(make_task, manager_task, groups, bob, carol, now):
    """carol's finance's work and legal's, some of it offered to both: an overdue task in
    both queues, one due soon held by bob offered to both, one in legal's queue only,
    and decisions on tasks offered to both and to legal only."""
    both = [groups["finance"], groups["legal"]]
    make_task(groups=both, due_at=now - timedelta(hours=3), title="Late for both")
    make_task(state=TaskState.CLAIMED, assignee=bob, groups=both, due_at=now + timedelta(hours=2))
    make_task(groups=[groups["legal"]], due_at=now + timedelta(days=3), title="Legal's")
    decided = [
        make_task(
            state=TaskState.COMPLETED,
            groups=both,
            decided_at=now - timedelta(hours=1),
            decided_by=carol,
        ),
        make_task(
            state=TaskState.COMPLETED,
            groups=[groups["legal"]],
            workflow_type="order",
            decided_at=now - timedelta(days=8),
            decided_by=carol,
        ),
    ]
    for task in decided:  # each waited four hours for its decision
        HumanTask.objects.filter(pk=task.pk).update(created_at=task.decided_at - timedelta(hours=4))


class TestManagers:
    def test_each_managed_set_is_saved_with_the_live_numbers_of_its_groups(
        self, finance_and_legal, groups, eve, now
    ):
        GroupManager.objects.create(group=groups["legal"], manager=eve)
        finance, legal = {groups["finance"].pk}, {groups["legal"].pk}
        live = {
            "finance": sla_selectors.dashboard(now=now, group_ids=finance),
            "legal": sla_selectors.dashboard(now=now, group_ids=legal),
        }

        sla_snapshot.refresh(now=now)

        read = {
            "finance": sla_snapshot.dashboard(now=now, group_ids=finance),
            "legal": sla_snapshot.dashboard(now=now, group_ids=legal),
        }
        for name in ("finance", "legal"):
            assert read[name].now == now  # the snapshot's, not counted again
            assert read[name].overall == live[name].overall
            assert by_name(read[name].by_type) == by_name(live[name].by_type)
            assert by_name(read[name].by_group) == by_name(live[name].by_group)
            assert by_name(read[name].by_assignee) == by_name(live[name].by_assignee)
            assert read[name].latency == live[name].latency
            assert read[name].decisions_per_day == live[name].decisions_per_day
            assert read[name].days == live[name].days
            assert read[name].group_ids == live[name].group_ids
            assert read[name].run_trends == read[name].cycle_times == []
        assert read["legal"].overall.total == 3
        assert [task.title for task in read["finance"].oldest_overdue] == ["Late for both"]

    def test_a_manager_sees_the_snapshots_numbers_as_of_its_time(
        self, carol_client, finance_and_legal, make_task, groups, now
    ):
        sla_snapshot.refresh(now=now - timedelta(seconds=20))
        make_task(groups=[groups["finance"]], due_at=now - timedelta(hours=1), title="After")

        response = carol_client.get("/console/sla/")

        board = response.context["board"]
        assert board.now == now - timedelta(seconds=20)
        assert board.group_ids == frozenset({groups["finance"].pk})
        assert board.overall.overdue == 1  # the count's; the newer task waits for the next
        assert "After" in response.text  # the oldest overdue are read live, for finance
        assert f'datetime="{board.now.isoformat()}"' in response.text
        assert "Legal&#x27;s" not in response.text

    def test_a_manager_of_two_groups_counts_a_task_offered_to_both_once(
        self, carol_client, finance_and_legal, groups, carol, now
    ):
        GroupManager.objects.create(group=groups["legal"], manager=carol)
        sla_snapshot.refresh(now=now)

        response = carol_client.get("/console/sla/")

        board = response.context["board"]
        assert board.now == now
        assert board.group_ids == frozenset({groups["finance"].pk, groups["legal"].pk})
        assert (board.overall.overdue, board.overall.due_soon, board.overall.on_time) == (1, 1, 1)
        assert by_name(board.by_assignee) == {"bob": (0, 1, 0)}
        assert by_name(board.by_group) == {"finance": (1, 0, 0), "legal": (1, 0, 1)}
        assert [(row.workflow_type, row.decisions) for row in board.latency] == [("expense", 1)]
        assert sum(day.count for day in board.decisions_per_day) == 2
        assert [task.title for task in board.oldest_overdue] == ["Late for both"]

    def test_a_stale_snapshot_is_counted_live(
        self, carol_client, finance_and_legal, make_task, groups, now, settings
    ):
        settings.BATON_SLA_SNAPSHOT_SECONDS = 60
        sla_snapshot.refresh(now=now - timedelta(seconds=121))
        make_task(groups=[groups["finance"]], due_at=now - timedelta(hours=1))

        response = carol_client.get("/console/sla/")

        board = response.context["board"]
        assert board.now > now
        assert board.overall.overdue == 2

    def test_a_snapshot_of_the_groups_she_managed_before_is_not_hers(
        self, carol_client, finance_and_legal, groups, carol, now
    ):
        sla_snapshot.refresh(now=now)
        GroupManager.objects.create(group=groups["legal"], manager=carol)

        response = carol_client.get("/console/sla/")

        board = response.context["board"]
        assert board.now > now  # counted live over both groups until beat's next count
        assert board.overall.total == 3

    def test_the_snapshot_of_a_set_no_one_manages_any_more_is_deleted(
        self, finance_and_legal, groups, carol, now
    ):
        sla_snapshot.refresh(now=now)
        GroupManager.objects.create(group=groups["legal"], manager=carol)
        sla_snapshot.refresh(now=now)
        both = sla_snapshot.scope_key({groups["finance"].pk, groups["legal"].pk})
        assert set(SlaSnapshot.objects.values_list("scope", flat=True)) == {"operators", both}

        GroupManager.objects.all().delete()
        sla_snapshot.refresh(now=now)

        assert list(SlaSnapshot.objects.values_list("scope", flat=True)) == ["operators"]


class TestScopeKey:
    def test_a_few_groups_are_keyed_by_their_sorted_ids(self):
        assert sla_snapshot.scope_key({12, 3}) == "groups:3,12"
        assert sla_snapshot.scope_key(None) == "operators"

    def test_many_groups_are_keyed_by_a_stable_hash_that_fits_the_column(self):
        many = set(range(1000, 1020))

        key = sla_snapshot.scope_key(many)

        assert len(key) == SlaSnapshot._meta.get_field("scope").max_length
        assert key == sla_snapshot.scope_key(sorted(many, reverse=True))
        assert key != sla_snapshot.scope_key(many | {1020})
        assert key.startswith("groups:#")


class TestManagerPlan:
    def test_with_a_fresh_snapshot_a_managers_page_reads_its_row_and_ten_overdue_tasks(
        self, carol_client, finance_and_legal, now
    ):
        sla_snapshot.refresh(now=now)

        with CaptureQueriesContext(connection) as captured:
            carol_client.get("/console/sla/")

        sent = [query["sql"] for query in captured.captured_queries]
        # The session, carol, her console permissions (her own and her groups'), the
        # groups she manages, the snapshot's row and the oldest overdue of her groups.
        assert len(sent) == 7
        assert len([sql for sql in sent if "approvals_slasnapshot" in sql]) == 1
        [overdue] = [sql for sql in sent if 'FROM "approvals_humantask"' in sql]
        assert "LIMIT 10" in overdue
        assert "approvals_humantask_candidate_groups" in overdue
        assert not any("COUNT(" in sql for sql in sent)
        assert not any("approvals_inboxentry" in sql for sql in sent)
