"""The inbox's read model stays true: after every use case, each task's entries are exactly
the tabs and people the rules give, with the task's current sort keys, its title and what
its row shows (its node, state, version, its run's version, the usernames it names).

The rules are written out again here, from the task row and its candidates, so that
a mistake in `approvals.human_tasks.inbox_entries` cannot confirm itself.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import human_tasks
from approvals.models import HumanTask, InboxEntry, Substitution
from approvals.states import Channel, TaskState
from tests.workflows.definitions import VERSIONED_RENAMES, VERSIONED_V2
from workflows import engine, registry

pytestmark = pytest.mark.django_db

INBOX = Channel.INBOX
NO_DUE_TIME = datetime(9999, 1, 1, tzinfo=UTC)


def view(task: HumanTask) -> tuple:
    """What the task's row shows, from the task, its run and its people."""

    def name(user: Any) -> str:
        return user.username if user is not None else ""

    return (
        task.run_id,
        task.node,
        task.kind,
        task.state,
        task.outcome,
        task.version,
        task.run.workflow_version,
        name(task.assignee),
        name(task.owner),
        name(task.substitute_for),
        name(task.run.started_by),
    )


VIEW = (
    "run_id",
    "node",
    "kind",
    "state",
    "outcome",
    "version",
    "workflow_version",
    "assignee",
    "owner",
    "substitute_for",
    "started_by",
)


def expected_entries(task: HumanTask) -> set[tuple]:
    keys = (task.due_at or NO_DUE_TIME, -task.priority, task.workflow_type, task.title, *view(task))
    if task.state == TaskState.OPEN:
        return {("queue", user.pk, None, *keys) for user in task.candidate_users.all()} | {
            ("queue", None, group.pk, *keys) for group in task.candidate_groups.all()
        }
    if task.state == TaskState.CLAIMED:
        return {("mine", task.assignee_id, None, *keys)}
    if task.state == TaskState.DELEGATED:
        return {("mine", task.assignee_id, None, *keys), ("delegated", task.owner_id, None, *keys)}
    return set()


def stored_entries(task: HumanTask) -> set[tuple]:
    rows = InboxEntry.objects.filter(task=task).values_list(
        "tab", "user_id", "group_id", "sort_due", "sort_priority", "workflow_type", "title", *VIEW
    )
    assert len(rows) == len(set(rows)), "an entry is stored twice"
    return set(rows)


def assert_in_step() -> None:
    """Every task in the database has exactly the entries the rules give it."""
    for task in HumanTask.objects.all():
        assert stored_entries(task) == expected_entries(task), f"{task.title} ({task.state})"


def shown(task: HumanTask, *fields: str) -> list[tuple]:
    """The values of `fields` in each of the task's entries."""
    return list(InboxEntry.objects.filter(task=task).values_list(*fields))


def tabs_of(task: HumanTask) -> set[tuple]:
    return {entry[:3] for entry in stored_entries(task)}


class TestOpening:
    def test_a_task_for_one_person_is_in_their_tab(self, manager_task, carol):
        assert tabs_of(manager_task) == {("mine", carol.pk, None)}
        assert_in_step()

    def test_a_task_for_a_group_is_in_the_groups_queue(self, bob, carol, start_expense, drive):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)

        drive(run)

        finance = run.human_tasks.get(node="finance_approval")
        assert finance.state == TaskState.OPEN
        assert tabs_of(finance) == {
            ("queue", None, group.pk) for group in finance.candidate_groups.all()
        }
        assert_in_step()

    def test_each_share_of_an_n_of_m_approval_has_its_own_entry(self, people, start, drive):
        run = drive(start("test_two_of_three", {}))

        assert run.human_tasks.count() == 3
        assert_in_step()


class TestChanges:
    def test_claim_and_release_move_the_task_between_queue_and_mine(
        self, bob, carol, start_expense, drive
    ):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        drive(run)
        task = run.human_tasks.get(node="finance_approval")

        human_tasks.claim_human_task(task_id=task.pk, user=bob, channel=INBOX)
        claimed = tabs_of(task)
        assert_in_step()
        human_tasks.release_human_task(task_id=task.pk, user=bob, channel=INBOX)

        assert claimed == {("mine", bob.pk, None)}
        assert {tab for tab, *_ in tabs_of(task)} == {"queue"}
        assert_in_step()

    def test_delegation_shows_in_the_delegates_tab_and_the_owners_delegated_tab(
        self, manager_task, carol, bob
    ):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )

        assert tabs_of(manager_task) == {("mine", bob.pk, None), ("delegated", carol.pk, None)}
        assert_in_step()

    def test_reassignment_leaves_only_the_new_assignee(self, manager_task, carol, olga, bob):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )

        human_tasks.reassign_human_task(
            task_id=manager_task.pk, user=olga, to_username="carol", channel=INBOX
        )

        assert tabs_of(manager_task) == {("mine", carol.pk, None)}
        assert_in_step()

    def test_escalation_reopens_the_task_to_its_widened_candidates(self, manager_task, carol):
        engine.sweep(now=manager_task.escalate_at + timedelta(minutes=1))

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.OPEN
        assert ("queue", carol.pk, None) in tabs_of(manager_task)
        assert any(group for _, _, group in tabs_of(manager_task))
        assert_in_step()

    def test_a_deadline_that_keeps_waiting_moves_the_due_time_in_the_entries(
        self, people, start, drive
    ):
        run = drive(start("test_deadline_waits", {}))
        task = run.human_tasks.get()
        first_due = task.due_at

        engine.sweep(now=task.created_at + timedelta(hours=2))

        task.refresh_from_db()
        assert task.due_at > first_due
        assert {entry[3] for entry in stored_entries(task)} == {task.due_at}
        assert_in_step()

    def test_a_task_opened_for_someone_away_names_whom_its_substitute_stands_in_for(
        self, carol, bob, start_expense
    ):
        now = timezone.now()
        Substitution.objects.create(
            user=carol,
            substitute=bob,
            starts_at=now - timedelta(hours=1),
            ends_at=now + timedelta(days=1),
        )

        task = start_expense().human_tasks.get(node="manager_approval")

        assert (task.assignee, task.substitute_for) == (bob, carol)
        assert_in_step()

    def test_handing_over_held_tasks_shows_the_substitute_and_the_owner(
        self, manager_task, carol, bob
    ):
        human_tasks.hand_over_held_tasks(user=carol, to_username="bob", channel=INBOX)

        assert tabs_of(manager_task) == {("mine", bob.pk, None), ("delegated", carol.pk, None)}
        assert_in_step()

    def test_a_run_moved_to_another_version_shows_the_renamed_node_and_its_version(
        self, start, drive, people
    ):
        run = drive(start("test_versioned", {"path": "approve", "amount": 5}))
        task = run.human_tasks.get()
        registry.register(VERSIONED_V2)
        try:
            engine.migrate_runs(
                workflow_type="test_versioned",
                from_version=1,
                to_version=2,
                renames=VERSIONED_RENAMES,
                channel="api",
            )
        finally:
            registry.unregister(VERSIONED_V2)

        task.refresh_from_db()
        assert task.node == "review"
        assert set(shown(task, "node", "workflow_version")) == {("review", 2)}
        assert_in_step()


class TestRenames:
    """Entries show usernames: a user's new one reaches every live task naming them."""

    def test_a_renamed_assignee_and_owner_are_shown_by_their_new_names(
        self, manager_task, carol, bob
    ):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )
        bob.username, carol.username = "robert", "caroline"

        bob.save()
        carol.save(update_fields=["username"])

        assert set(shown(manager_task, "assignee", "owner")) == {("robert", "caroline")}
        assert_in_step()

    def test_whoever_started_the_run_is_shown_by_their_new_name(self, start, drive, alice):
        run = drive(start("test_deadline_waits", {}, started_by=alice))
        alice.username = "alicia"

        alice.save()

        assert set(shown(run.human_tasks.get(), "started_by")) == {("alicia",)}
        assert_in_step()

    def test_a_save_that_cannot_change_the_username_reads_nothing_more(self, carol):
        with CaptureQueriesContext(connection) as queries:
            carol.save(update_fields=["last_login"])

        assert len(queries) == 1  # the UPDATE alone


class TestEnding:
    def test_a_decision_empties_the_tasks_entries(self, manager_task, carol):
        human_tasks.approve_human_task(task_id=manager_task.pk, user=carol, channel=INBOX)

        assert stored_entries(manager_task) == set()
        assert_in_step()

    def test_a_rejection_empties_them_too(self, manager_task, carol):
        human_tasks.reject_human_task(
            task_id=manager_task.pk, user=carol, channel=INBOX, reason="No receipt."
        )

        assert stored_entries(manager_task) == set()

    def test_cancelling_the_run_empties_its_tasks_entries(self, manager_task):
        engine.cancel_run(run_id=manager_task.run_id)

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.CANCELLED
        assert stored_entries(manager_task) == set()
        assert_in_step()

    def test_a_deadline_that_fails_the_run_empties_them(self, people, start, drive):
        run = drive(start("test_deadline_fails", {}))
        task = run.human_tasks.get()

        engine.sweep(now=task.created_at + timedelta(hours=2))

        task.refresh_from_db()
        assert task.state == TaskState.EXPIRED
        assert stored_entries(task) == set()
        assert_in_step()

    def test_an_automatic_rejection_at_the_deadline_empties_them(self, manager_task):
        engine.sweep(now=manager_task.created_at + timedelta(days=7, minutes=1))

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.COMPLETED
        assert stored_entries(manager_task) == set()
        assert_in_step()


class TestMigration:
    def test_the_migrations_give_existing_tasks_the_entries_refresh_would(
        self, manager_task, carol, start_expense, drive
    ):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        drive(run)
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )
        InboxEntry.objects.all().delete()
        entries = importlib.import_module("approvals.migrations.0002_inbox_entries")
        titles = importlib.import_module("approvals.migrations.0013_inbox_entry_titles")

        view = importlib.import_module("approvals.migrations.0026_fill_inbox_entry_view")

        entries.fill_inbox_entries(django_apps, connection.schema_editor())
        with connection.cursor() as cursor:
            cursor.execute(titles.BACKFILL)
        view.fill_inbox_entry_view(django_apps, connection.schema_editor())

        assert InboxEntry.objects.count() == 3  # mine and delegated; the finance queue
        assert_in_step()

    def test_the_view_backfill_fills_every_live_tasks_entries_batch_by_batch(
        self, manager_task, carol, bob, start_expense, drive, monkeypatch
    ):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        drive(run)
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )
        for _ in range(3):
            start_expense(amount="80.00")
        # As the columns were added: their defaults, in every entry.
        InboxEntry.objects.update(
            run_id=None,
            node="",
            kind="",
            state="",
            version=0,
            workflow_version=0,
            assignee="",
            owner="",
            substitute_for="",
            started_by="",
        )
        view = importlib.import_module("approvals.migrations.0026_fill_inbox_entry_view")
        monkeypatch.setattr(view, "BATCH", 2)  # fewer than the live tasks: several batches
        live = HumanTask.objects.filter(state__in=("open", "claimed", "delegated")).count()
        assert live > 2 * view.BATCH

        view.fill_inbox_entry_view(django_apps, connection.schema_editor())

        assert_in_step()
        # Again, over values already there: nothing changes.
        view.fill_inbox_entry_view(django_apps, connection.schema_editor())
        assert_in_step()


class TestRefreshingEveryLiveTask:
    """`manage.py refresh_inbox`, for entries an earlier release wrote during a rolling
    upgrade, without what their rows show."""

    def test_it_puts_every_live_tasks_entries_in_step_and_leaves_decided_tasks_without(
        self, manager_task, carol, start_expense, drive
    ):
        decided = start_expense(amount="90.00")
        human_tasks.approve_human_task(
            task_id=decided.human_tasks.get().pk, user=carol, channel=INBOX
        )
        for _ in range(3):
            start_expense(amount="80.00")
        # As an earlier release writes them: without the row's values.
        InboxEntry.objects.update(
            run_id=None, node="", kind="", state="", version=0, workflow_version=0,
            assignee="", owner="", substitute_for="", started_by="",
        )  # fmt: skip
        out = StringIO()

        call_command("refresh_inbox", "--batch", "2", stdout=out)

        assert_in_step()
        live = HumanTask.objects.filter(state__in=("open", "claimed", "delegated")).count()
        assert live == 4
        assert out.getvalue().strip() == "Rewrote the inbox entries of 4 live task(s)."
        assert not InboxEntry.objects.filter(task__run=decided).exists()

    def test_running_it_again_changes_nothing(self, manager_task):
        call_command("refresh_inbox", stdout=StringIO())
        before = stored_entries(manager_task)

        call_command("refresh_inbox", stdout=StringIO())

        assert stored_entries(manager_task) == before == expected_entries(manager_task)
