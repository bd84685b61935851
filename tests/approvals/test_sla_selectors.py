"""The SLA dashboard's numbers: open tasks by SLA state per type, group and person, the
oldest overdue, decision times; and the page, for operators only, in fixed queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import sla_selectors
from approvals.models import HumanTask
from approvals.states import TaskState

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def open_tasks(make_task, manager_task, groups, bob, carol, now):
    """Besides carol's manager task (due in two days): one overdue in finance's queue,
    one due soon held by bob, one with no due time in legal's queue."""
    return {
        "late": make_task(
            groups=[groups["finance"]], due_at=now - timedelta(hours=3), title="Late"
        ),
        "soon": make_task(
            state=TaskState.CLAIMED, assignee=bob, due_at=now + timedelta(hours=2), title="Soon"
        ),
        "whenever": make_task(groups=[groups["legal"]], title="Whenever"),
    }


def by_name(rows) -> dict[str, tuple[int, int, int]]:
    return {row.name: (row.overdue, row.due_soon, row.on_time) for row in rows}


class TestDashboard:
    def test_counts_open_tasks_by_sla_state_per_type_group_and_person(
        self, open_tasks, manager_task, now
    ):
        manager_task.due_at = now + timedelta(days=2)
        manager_task.save()

        board = sla_selectors.dashboard(now=now)

        assert (board.overall.overdue, board.overall.due_soon, board.overall.on_time) == (1, 1, 2)
        assert by_name(board.by_type) == {"expense": (1, 1, 2)}
        assert by_name(board.by_group)["finance"] == (1, 0, 0)
        assert by_name(board.by_group)["legal"] == (0, 0, 1)
        assert by_name(board.by_assignee) == {"bob": (0, 1, 0), "carol": (0, 0, 1)}

    def test_lists_the_oldest_overdue_first_and_leaves_out_finished_tasks(
        self, open_tasks, make_task, now
    ):
        older = make_task(due_at=now - timedelta(days=2), title="Older")
        make_task(state=TaskState.COMPLETED, due_at=now - timedelta(days=9), title="Done")

        board = sla_selectors.dashboard(now=now)

        assert [task.title for task in board.oldest_overdue] == [older.title, "Late"]

    def test_decision_times_are_the_median_and_95th_percentile_of_recent_decisions(
        self, make_task, carol, now
    ):
        def decided(*, waited_hours: float, days_ago: int = 0) -> None:
            task = make_task(
                state=TaskState.COMPLETED,
                decided_at=now - timedelta(days=days_ago),
                decided_by=carol,
            )
            HumanTask.objects.filter(pk=task.pk).update(
                created_at=task.decided_at - timedelta(hours=waited_hours)
            )

        for hours in (1, 2, 3, 4, 100):
            decided(waited_hours=hours)
        decided(waited_hours=5, days_ago=30)

        [latency] = sla_selectors.dashboard(now=now).latency

        assert (latency.workflow_type, latency.decisions, latency.median_hours) == (
            "expense",
            5,
            3.0,
        )
        assert latency.p95_hours == pytest.approx(80.8, abs=0.1)


class TestSlaPage:
    @pytest.fixture
    def olga_client(self, operator) -> Client:
        operator.is_staff = True
        operator.save()
        client = Client()
        client.force_login(User.objects.get(pk=operator.pk))
        return client

    def test_an_operator_sees_the_numbers(self, olga_client, open_tasks):
        response = olga_client.get("/console/sla/")

        assert response.status_code == 200
        assert "Oldest overdue" in response.text
        assert "Late" in response.text

    def test_an_outsider_is_refused(self, eve):
        client = Client()
        client.force_login(eve)

        response = client.get("/console/sla/")

        assert response.status_code == 403
        assert "for operators (staff) only" in response.text

    def test_the_number_of_queries_does_not_grow_with_the_tasks(
        self, olga_client, make_task, groups, bob, carol, now
    ):
        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                olga_client.get("/console/sla/")
            return len(captured)

        make_task(groups=[groups["finance"]], due_at=now - timedelta(hours=1))
        few = queries()
        for hours in range(10):
            make_task(groups=[groups["legal"]], due_at=now - timedelta(hours=hours))
            make_task(state=TaskState.CLAIMED, assignee=bob)
            make_task(state=TaskState.COMPLETED, decided_at=now, decided_by=carol)

        assert queries() == few
        assert HumanTask.objects.count() > 30
