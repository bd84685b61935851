"""The approval node kind plugged into the engine: here, an approval a loop enters again.

`test_revised` (tests/workflows/definitions.py) revises, asks carol to sign off, and
on a rejection goes back to revise once more (max_rounds=2); a second rejection
fails the run and undoes both revisions.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals import human_tasks
from approvals.models import HumanTask
from approvals.states import Channel, Outcome, TaskState
from workflows.states import RunState, StepKind, StepState

pytestmark = pytest.mark.django_db


@pytest.fixture
def revised(people, start, drive):
    """A run of test_revised waiting for carol's first sign-off."""
    return drive(start("test_revised", {}))


def task_of(run, round: int) -> HumanTask:
    return HumanTask.objects.get(run=run, step__round=round)


class TestAnApprovalEnteredAgain:
    def test_a_rejection_sends_the_run_back_and_opens_a_new_task_for_the_same_people(
        self, revised, carol, drive
    ):
        first = task_of(revised, 0)

        human_tasks.reject_human_task(
            task_id=first.pk, user=carol, channel=Channel.INBOX, reason="Fix"
        )
        run = drive(revised)

        second = task_of(run, 1)
        first.refresh_from_db()
        assert run.state == RunState.WAITING
        assert (first.state, first.outcome) == (TaskState.COMPLETED, Outcome.REJECTED)
        assert second.state == TaskState.CLAIMED
        assert second.pk != first.pk
        assert second.assignee == carol
        assert second.step.node == "sign_off"
        assert [s.round for s in run.steps.filter(node="revise").order_by("round")] == [0, 1]

    def test_approving_the_second_round_finishes_the_run(self, revised, carol, drive, effects):
        human_tasks.reject_human_task(
            task_id=task_of(revised, 0).pk, user=carol, channel=Channel.INBOX, reason="Fix"
        )
        drive(revised)

        human_tasks.approve_human_task(
            task_id=task_of(revised, 1).pk, user=carol, channel=Channel.INBOX
        )
        run = drive(revised)

        assert run.state == RunState.SUCCEEDED
        assert effects(run) == {"test.revise": 2, "test.publish": 1}
        publish = run.steps.get(node="publish", kind=StepKind.FORWARD)
        assert (publish.round, publish.state) == (1, StepState.SUCCEEDED)

    def test_a_rejection_in_the_last_round_fails_the_run_and_undoes_both_revisions(
        self, revised, carol, drive, effects
    ):
        for round in (0, 1):
            human_tasks.reject_human_task(
                task_id=task_of(revised, round).pk, user=carol, channel=Channel.INBOX, reason="No"
            )
            drive(revised)

        revised.refresh_from_db()
        assert revised.state == RunState.COMPENSATED
        assert revised.error["type"] == "RoundsExhausted"
        assert effects(revised) == {"test.revise": 2, "test.undo_revise": 2}
        assert HumanTask.objects.filter(run=revised, state=TaskState.COMPLETED).count() == 2

    def test_the_task_page_timeline_names_the_second_round(self, revised, carol, drive, client):
        human_tasks.reject_human_task(
            task_id=task_of(revised, 0).pk, user=carol, channel=Channel.INBOX, reason="Fix"
        )
        drive(revised)
        client.force_login(carol)

        response = client.get(reverse("approvals:task", args=[task_of(revised, 1).pk]))

        assert response.status_code == 200
        assert "revise (round 2) completed" in " ".join(response.text.split())
        assert "sign off (round 2) waiting" in " ".join(response.text.split())
