"""The keys into runs, steps and human tasks refuse a delete at once (RESTRICT), and
every way Baton deletes those rows deletes the rows that point at them first."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from approvals import human_tasks
from approvals.models import HumanTask, InboxEntry
from approvals.states import Channel
from workflows import foreign_keys, retention
from workflows.models import StepRun, WorkflowRun
from workflows.states import RunState

pytestmark = pytest.mark.django_db


@pytest.fixture
def approved_expense(manager_task, carol, drive) -> WorkflowRun:
    human_tasks.approve_human_task(task_id=manager_task.pk, user=carol, channel=Channel.API)
    run = drive(manager_task.run)
    assert run.state == RunState.SUCCEEDED
    return run


class TestTheRules:
    def test_every_key_into_runs_steps_and_tasks_is_restrict_but_a_child_runs_two(self):
        keys = foreign_keys.keys_into(foreign_keys.PRUNED_TABLES)

        deferred = {key for key, rule in keys.items() if rule != foreign_keys.RESTRICT}

        # A new key (a new table pointing at runs) or a migration that altered a field
        # (Django recreates its key as NO ACTION) shows here: make it RESTRICT, as
        # workflows.0018 and approvals.0020 do, or prunes check it twice per row.
        assert deferred == set(foreign_keys.DEFERRED_KEYS)
        assert {keys[key] for key in foreign_keys.DEFERRED_KEYS} == {foreign_keys.NO_ACTION}
        assert len(keys) == 18


class TestIntegrity:
    def test_a_run_its_steps_point_at_is_refused_when_the_statement_ends(self, approved_expense):
        with (
            pytest.raises(IntegrityError, match="workflows_steprun"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("DELETE FROM workflows_workflowrun WHERE id = %s", [approved_expense.pk])

        assert WorkflowRun.objects.filter(pk=approved_expense.pk).exists()

    def test_a_task_its_candidates_point_at_is_refused_too(self, manager_task):
        with (
            pytest.raises(
                IntegrityError, match=r"still referenced from table .approvals_humantask_cand"
            ),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("DELETE FROM approvals_humantask WHERE id = %s", [manager_task.pk])

        assert HumanTask.objects.filter(pk=manager_task.pk).exists()


class TestDeletingInOrder:
    def test_retention_deletes_a_run_children_first(self, approved_expense):
        steps = StepRun.objects.filter(run=approved_expense).count()
        deleted: dict[str, int] = {}

        with transaction.atomic():
            retention._delete_set(
                WorkflowRun, [approved_expense.pk], deleted=deleted, events_from=None
            )

        assert not WorkflowRun.objects.filter(pk=approved_expense.pk).exists()
        assert deleted["workflows.WorkflowRun"] == 1
        assert deleted["workflows.StepRun"] == steps > 0
        assert deleted["approvals.HumanTask"] == 1
        assert not HumanTask.objects.filter(run_id=approved_expense.pk).exists()

    def test_djangos_collector_deletes_a_live_run_with_its_task_and_inbox_rows(self, manager_task):
        run = manager_task.run

        run.delete()

        assert not HumanTask.objects.filter(pk=manager_task.pk).exists()
        assert not InboxEntry.objects.filter(task_id=manager_task.pk).exists()

    def test_djangos_collector_deletes_a_parent_run_with_its_child(self, start, drive):
        parent = drive(start("test_parent", {"hold": True}))
        child = WorkflowRun.objects.get(parent_run=parent)

        parent.delete()

        assert not WorkflowRun.objects.filter(pk__in=[parent.pk, child.pk]).exists()
