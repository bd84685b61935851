"""Beat's count of every group manager's SLA board at once: the same numbers each
manager's live page counts, whatever the managers and however their groups overlap."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.console import sla as sla_selectors
from approvals.console import sla_managers
from approvals.models import GroupManager, HumanTask
from approvals.states import TaskState

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def eves_groups(groups, eve):
    """eve manages legal and security (carol manages finance)."""
    for name in ("legal", "security"):
        GroupManager.objects.create(group=groups[name], manager=eve)
    return [groups["legal"], groups["security"]]


@pytest.fixture
def decide(make_task, carol):
    """Make a task offered to `groups`, decided `ago` before now after waiting `waited`."""

    def make(*, groups, ago: timedelta, waited: timedelta, now, workflow_type="expense"):
        task = make_task(
            state=TaskState.COMPLETED,
            groups=groups,
            workflow_type=workflow_type,
            decided_at=now - ago,
            decided_by=carol,
        )
        HumanTask.objects.filter(pk=task.pk).update(created_at=now - ago - waited)
        return task

    return make


@pytest.fixture
def company(make_task, decide, groups, eves_groups, bob, now):
    """Open work and decisions across both managers' groups: some offered to both of
    eve's groups, some to carol's and eve's, some to a group of no one's, decided
    inside the decision times' week, earlier in the fortnight and before it."""
    finance, legal, security = groups["finance"], groups["legal"], groups["security"]
    make_task(groups=eves_groups, due_at=now - timedelta(hours=3))
    make_task(groups=[finance, legal], due_at=now + timedelta(hours=2))
    make_task(state=TaskState.CLAIMED, assignee=bob, groups=eves_groups, due_at=now)
    make_task(groups=[security], workflow_type="order")
    # Waited 1, 2, 9 and 30 hours, decided 1, 2, 4 and 0 days ago.
    week = ((1, 1, [legal]), (2, 2, [security]), (9, 4, eves_groups), (30, 0, [finance, legal]))
    for hours, days_ago, offered in week:
        decide(groups=offered, ago=timedelta(days=days_ago), waited=timedelta(hours=hours), now=now)
    decide(
        groups=[finance, security],
        ago=timedelta(days=10),
        waited=timedelta(hours=50),
        now=now,
        workflow_type="order",
    )
    decide(groups=eves_groups, ago=timedelta(days=20), waited=timedelta(hours=1), now=now)
    decide(groups=[], ago=timedelta(hours=1), waited=timedelta(hours=7), now=now)


class TestDashboards:
    def test_each_managers_board_is_the_live_dashboard_of_her_groups(
        self, company, groups, carol, eve, now
    ):
        boards = sla_managers.dashboards(now=now)

        finance = frozenset({groups["finance"].pk})
        legal_and_security = frozenset({groups["legal"].pk, groups["security"].pk})
        assert set(boards) == {finance, legal_and_security}
        for group_ids, board in boards.items():
            live = sla_selectors.dashboard(now=now, group_ids=group_ids)
            # Beat's count leaves the oldest overdue tasks to the page, read live.
            assert board == replace(live, oldest_overdue=[])

    def test_a_task_offered_to_two_of_her_groups_is_one_decision_in_her_times_and_days(
        self, company, eve, groups, now
    ):
        boards = sla_managers.dashboards(now=now)

        eves = boards[frozenset({groups["legal"].pk, groups["security"].pk})]
        # Her week's decisions waited 1, 2, 9 and 30 hours, the 9 offered to both of her
        # groups: counted twice, the median would be 9.0 and there would be five.
        [expense] = eves.latency
        assert (expense.workflow_type, expense.decisions, expense.median_hours) == (
            "expense",
            4,
            5.5,
        )
        # The fortnight adds the order decided ten days ago; the one of twenty is older.
        assert sum(day.count for day in eves.decisions_per_day) == 5

    def test_a_manager_with_no_decisions_has_none_on_any_day(self, groups, eve, eves_groups, now):
        boards = sla_managers.dashboards(now=now)

        finance = boards[frozenset({groups["finance"].pk})]
        assert finance.latency == []
        assert [day.count for day in finance.decisions_per_day] == [0] * sla_selectors.TREND_DAYS
        assert finance.latency_since == finance.days[-sla_selectors.LATENCY_DAYS]
