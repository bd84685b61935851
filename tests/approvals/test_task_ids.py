"""Human-task ids sort by the time they were made (workflows.ids), as run ids do, so the
rows a new task writes keyed by it land beside the last tasks' rows."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


class TestTimeOrderedTaskIds:
    def test_a_task_an_approval_opens_has_a_uuid_of_version_7(self, start_expense):
        run = start_expense()

        task = run.human_tasks.get(node="manager_approval")

        assert task.pk.version == 7

    def test_tasks_opened_one_after_another_sort_in_the_order_they_were_opened(self, start_expense):
        first = start_expense().human_tasks.get(node="manager_approval")
        second = start_expense().human_tasks.get(node="manager_approval")

        assert first.pk < second.pk
        assert first.created_at <= second.created_at
