"""The seeder's copies are what the code would have made: each copied live task has the
inbox entries `approvals.human_tasks.inbox_entries` would write for it, down to what its
row shows (its own run, title and person)."""

from __future__ import annotations

import pytest
from django.db import connection

from approvals.human_tasks import inbox_entries
from approvals.models import HumanTask, InboxEntry
from approvals.states import LIVE_TASK_STATES
from bench import seed
from bench.profiles import Seed

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the seeder is PostgreSQL's"),
]


def as_rows(entries: list[InboxEntry], fields: tuple[str, ...]) -> set[tuple]:
    return {tuple(getattr(entry, field) for field in fields) for entry in entries}


class TestSeed:
    def test_each_copied_tasks_entries_are_those_refresh_would_write(self):
        others = 120  # past the reviewer's own, so every kind of copy is made
        size = Seed(
            waiting_runs=2,
            tasks=seed.REVIEWER_CLAIMED + seed.REVIEWER_QUEUE + seed.TEMPLATE_TASKS + others,
        )
        seed.seed(size=size, log=lambda *_: None)
        fields = (
            "tab",
            "user_id",
            "group_id",
            "sort_due",
            "sort_priority",
            "workflow_type",
            "title",
            *inbox_entries.view_of(HumanTask.objects.filter(state__in=LIVE_TASK_STATES).first()),
        )
        live = HumanTask.objects.filter(state__in=LIVE_TASK_STATES).select_related(
            "run__started_by", "assignee", "owner", "substitute_for"
        )

        wrong = [
            task.title
            for task in live
            if as_rows(list(task.inbox_entries.all()), fields)
            != as_rows(inbox_entries.entries_for(task), fields)
        ]

        assert live.count() > seed.REVIEWER_CLAIMED + seed.REVIEWER_QUEUE
        assert wrong == []
