"""The SLA dashboard's numbers: open tasks by SLA state per type, group and person, the
oldest overdue, decision times, decisions and finished runs per day, failure rates and
cycle times; and the page, for operators and group managers, in fixed queries."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import escalation
from approvals.console import sla as sla_selectors
from approvals.escalation import DUE_SOON
from approvals.models import HumanTask
from approvals.states import Sla, TaskState
from workflows.models import WorkflowRun

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

    def test_decision_times_take_the_last_seven_whole_utc_days_today_included(
        self, make_task, carol, now
    ):
        first_day = now.astimezone(UTC).date() - timedelta(days=sla_selectors.LATENCY_DAYS - 1)
        start = datetime.combine(first_day, time.min, tzinfo=UTC)
        for at in (start, start - timedelta(microseconds=1)):
            make_task(state=TaskState.COMPLETED, decided_at=at, decided_by=carol)

        board = sla_selectors.dashboard(now=now)

        assert board.latency_since == first_day
        assert [row.decisions for row in board.latency] == [1]


class TestSlaCondition:
    def test_selects_each_task_in_the_sla_state_the_escalation_rule_gives_it(self, make_task, now):
        dues = [
            now - timedelta(seconds=1),
            now,
            now + timedelta(seconds=1),
            now + DUE_SOON,
            now + DUE_SOON + timedelta(seconds=1),
            None,
        ]
        tasks = [make_task(due_at=due, title=f"Due {n}") for n, due in enumerate(dues)]

        selected = {
            state: set(
                HumanTask.objects.filter(
                    sla_selectors.sla_condition(sla=state, now=now), pk__in=[t.pk for t in tasks]
                ).values_list("pk", flat=True)
            )
            for state in Sla.values
        }

        assert selected == {
            state: {
                task.pk for task in tasks if escalation.sla(due_at=task.due_at, now=now) == state
            }
            for state in Sla.values
        }


def finished(*, workflow_type: str, state: str, at, took_hours: float = 1.0, count: int = 1):
    """Rows of runs of `workflow_type` that ended in `state` at `at`, started `took_hours`
    before."""
    runs = WorkflowRun.objects.bulk_create(
        WorkflowRun(workflow_type=workflow_type, workflow_version=1, input={}, state=state)
        for _ in range(count)
    )
    WorkflowRun.objects.filter(pk__in=[run.pk for run in runs]).update(
        finished_at=at, created_at=at - timedelta(hours=took_hours)
    )
    return runs


class TestTrends:
    def test_counts_decisions_per_day_over_the_window_with_empty_days_as_zero(
        self, make_task, carol, now
    ):
        for days_ago in (0, 0, 3, sla_selectors.TREND_DAYS + 2):
            make_task(
                state=TaskState.COMPLETED,
                decided_at=now - timedelta(days=days_ago),
                decided_by=carol,
            )

        board = sla_selectors.dashboard(now=now)

        counts = {day.day: day.count for day in board.decisions_per_day}
        assert len(counts) == sla_selectors.TREND_DAYS
        today = board.last_day
        assert counts[today] == 2
        assert counts[today - timedelta(days=3)] == 1
        assert sum(counts.values()) == 3

    def test_counts_runs_finished_per_type_and_day_and_their_failures(self, now):
        finished(workflow_type="order", state="succeeded", at=now, count=3)
        finished(workflow_type="order", state="failed", at=now)
        finished(workflow_type="order", state="compensated", at=now - timedelta(days=1))
        finished(workflow_type="order", state="dead_lettered", at=now - timedelta(days=1))
        finished(workflow_type="order", state="succeeded", at=now - timedelta(days=40))
        finished(workflow_type="expense", state="cancelled", at=now)

        board = sla_selectors.dashboard(now=now)

        trends = {trend.workflow_type: trend for trend in board.run_trends}
        order = trends["order"]
        assert (order.total.finished, order.total.failed) == (6, 1)
        assert (order.total.compensated, order.total.dead_lettered) == (1, 1)
        assert order.failure_rate == 50.0
        assert (order.days[-1].finished, order.days[-1].failures) == (4, 1)
        assert (order.days[-2].finished, order.days[-2].failures) == (2, 2)
        assert trends["expense"].failure_rate == 0.0
        assert len(order.days) == sla_selectors.TREND_DAYS

    def test_cycle_times_are_the_median_and_95th_percentile_of_recent_runs(self, now):
        for hours in (1, 2, 3, 4, 100):
            finished(workflow_type="order", state="succeeded", at=now, took_hours=hours)
        finished(
            workflow_type="order", state="succeeded", at=now - timedelta(days=40), took_hours=500
        )

        [cycle] = sla_selectors.dashboard(now=now).cycle_times

        assert (cycle.workflow_type, cycle.runs, cycle.median_hours) == ("order", 5, 3.0)
        assert cycle.p95_hours == pytest.approx(80.8, abs=0.1)


class TestManagersView:
    def test_a_manager_sees_only_the_tasks_offered_to_their_groups(
        self, open_tasks, make_task, groups, carol, now
    ):
        make_task(
            state=TaskState.COMPLETED,
            groups=[groups["legal"]],
            decided_at=now,
            decided_by=carol,
        )
        make_task(
            state=TaskState.COMPLETED,
            groups=[groups["finance"]],
            decided_at=now,
            decided_by=carol,
        )
        finished(workflow_type="order", state="failed", at=now)

        board = sla_selectors.dashboard(now=now, group_ids={groups["finance"].pk})

        assert (board.overall.overdue, board.overall.due_soon, board.overall.on_time) == (1, 0, 0)
        assert [row.name for row in board.by_group] == ["finance"]
        assert [task.title for task in board.oldest_overdue] == ["Late"]
        assert sum(day.count for day in board.decisions_per_day) == 1
        assert [row.decisions for row in board.latency] == [1]
        assert board.run_trends == []
        assert board.cycle_times == []
        assert not board.shows_runs


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
        assert "for operators and for group managers" in response.text
        assert "you manage no group" in response.text

    def test_a_group_manager_sees_their_groups_tasks_and_no_run_trends(
        self, carol, open_tasks, now
    ):
        finished(workflow_type="order", state="failed", at=now)
        client = Client()
        client.force_login(carol)

        response = client.get("/console/sla/")

        assert response.status_code == 200
        assert "the groups you manage" in response.text
        assert "Late" in response.text
        assert "Whenever" not in response.text  # legal's task: carol manages finance only
        assert "Runs finished per day" not in response.text
        assert response.context["board"].group_ids == frozenset(
            {open_tasks["late"].candidate_groups.get().pk}
        )

    def test_an_operator_sees_charts_with_numbers_linked_to_their_runs(
        self, olga_client, make_task, carol, now
    ):
        make_task(state=TaskState.COMPLETED, decided_at=now, decided_by=carol)
        finished(workflow_type="order", state="succeeded", at=now, count=2)
        finished(workflow_type="order", state="dead_lettered", at=now)

        response = olga_client.get("/console/sla/")

        assert response.text.count('<svg class="chart"') == 4
        assert "order: 3 runs finished, 1 of them failed (33.3%)" in response.text
        today = now.date().isoformat()
        since = (now.date() - timedelta(days=sla_selectors.TREND_DAYS - 1)).isoformat()
        link = (
            "/console/?type=order&amp;state=dead_lettered"
            f"&amp;finished_from={since}&amp;finished_to={today}"
        )
        assert f'<a href="{link}">1</a>' in response.text
        listed = olga_client.get(link.replace("&amp;", "&"))
        assert listed.context["page"].rows[0].run.state == "dead_lettered"
        assert len(listed.context["page"].rows) == 1

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
            make_task(
                state=TaskState.COMPLETED,
                decided_at=now - timedelta(days=hours),
                decided_by=carol,
                workflow_type=f"type{hours}",
            )
            finished(workflow_type=f"type{hours}", state="failed", at=now - timedelta(days=hours))

        assert queries() == few
        assert HumanTask.objects.count() > 30

    def test_a_managers_page_costs_a_fixed_number_of_queries_too(
        self, carol, make_task, groups, now
    ):
        client = Client()
        client.force_login(carol)

        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                assert client.get("/console/sla/").status_code == 200
            return len(captured)

        make_task(groups=[groups["finance"]], due_at=now - timedelta(hours=1))
        few = queries()
        for hours in range(10):
            make_task(groups=[groups["finance"]], due_at=now - timedelta(hours=hours))
            make_task(
                state=TaskState.COMPLETED,
                groups=[groups["finance"]],
                decided_at=now - timedelta(days=hours),
                decided_by=carol,
            )

        assert queries() == few


class TestPercentileOnSqlite:
    """The demo's SQLite has no percentile_cont: Python's interpolation stands in for it,
    and gives what PostgreSQL gives."""

    @pytest.mark.parametrize("fraction", [0.0, 0.5, 0.95, 1.0])
    @pytest.mark.parametrize("values", [[1.0], [1.0, 2.0], [3.0, 1.0, 100.0, 2.0, 4.0]])
    def test_it_interpolates_as_postgresql_does(self, values, fraction):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT percentile_cont(%s) WITHIN GROUP (ORDER BY x) FROM unnest(%s) AS x",
                [fraction, values],
            )
            (expected,) = cursor.fetchone()

        assert sla_selectors.interpolated_percentile(sorted(values), fraction) == pytest.approx(
            expected
        )

    def test_no_values_have_no_percentile(self):
        assert sla_selectors.interpolated_percentile([], 0.5) is None
