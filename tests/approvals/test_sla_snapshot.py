"""The operators' SLA dashboard as beat counts it: saved as one row, read back whole while
fresh, counted live when stale or for a group manager."""

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
from approvals.models import SlaSnapshot
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

        assert SlaSnapshot.objects.get().computed_at == now


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

    def test_a_group_manager_is_counted_live(self, carol, history, groups, now):
        sla_snapshot.refresh(now=now)
        client = Client()
        client.force_login(carol)

        response = client.get("/console/sla/")

        board = response.context["board"]
        assert board.group_ids == frozenset({groups["finance"].pk})
        assert board.now > now


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
