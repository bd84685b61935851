"""Opening an approval's tasks: a group that does not exist warns on the run's timeline."""

from __future__ import annotations

from datetime import timedelta
from html import escape

import pytest
from django.contrib.auth.models import Group

from approvals import human_tasks
from workflows.models import StepEvent

pytestmark = pytest.mark.django_db

WARNING = (
    "Group 'auditors' named by approval 'review' does not exist, so nobody in it can see its"
    " task. Create the group, or reassign the task from the console."
)


class TestAGroupThatDoesNotExist:
    @pytest.fixture
    def run(self, audited, start, drive, alice):
        # The group passed the start-up check, then was deleted.
        Group.objects.create(name="auditors").delete()
        return drive(start("test_audited", {}, started_by=alice))

    def test_opening_the_task_warns_on_the_runs_timeline(self, run):
        [warning] = StepEvent.objects.filter(run=run, kind="warning")

        assert warning.node == "review"
        assert warning.detail == {"message": WARNING, "missing_groups": ["auditors"]}
        assert run.human_tasks.get().candidate_groups.count() == 0

    def test_the_operator_sees_it_on_the_runs_console_page(self, run, client, operator):
        operator.is_staff = True
        operator.save()
        client.force_login(operator)

        page = client.get(f"/console/runs/{run.pk}/")

        assert page.status_code == 200
        assert escape(WARNING) in page.text

    def test_the_requester_sees_it_on_the_request_page(self, run, client, alice):
        client.force_login(alice)

        page = client.get(f"/requests/{run.pk}/")

        assert page.status_code == 200
        assert escape(WARNING) in page.text

    def test_an_existing_group_opens_the_task_without_a_warning(
        self,
        audited,
        start,
        drive,
        alice,
    ):
        Group.objects.create(name="auditors")

        run = drive(start("test_audited", {}, started_by=alice))

        assert not StepEvent.objects.filter(run=run, kind="warning").exists()

    def test_an_escalation_to_a_missing_group_warns_too(self, run, alice):
        task = run.human_tasks.get()

        human_tasks.escalate_human_task(task_id=task.pk, now=task.escalate_at + timedelta(1))

        messages = [e.detail["message"] for e in StepEvent.objects.filter(kind="warning")]
        assert messages[1].startswith("Group 'audit_board' named by approval 'review'")
