"""A requester's use cases: withdraw a request, comment on it."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

from approvals import human_tasks
from approvals.models import Comment
from approvals.request_pages import RequestNotFound
from approvals.requests import services as request_services
from approvals.states import TaskState
from workflows.starting import start_for
from workflows.states import RunState

pytestmark = pytest.mark.django_db


@pytest.fixture
def expense(alice, employees, drive):
    """alice's expense, waiting for carol."""
    run, _ = start_for(
        user=alice,
        workflow_type="expense",
        input={"title": "Train to Lyon", "amount": "120.00", "currency": "EUR"},
        channel="inbox",
    )
    return drive(run)


def withdraw(run, user, **options):
    return request_services.withdraw_request(run_id=run.pk, user=user, channel="inbox", **options)


class TestWithdrawRequest:
    def test_cancels_the_run_closes_its_tasks_and_audits_who_and_why(self, expense, alice):
        run = withdraw(expense, alice, reason="Trip cancelled", remote_addr="10.0.0.9")

        entry = LogEntry.objects.get_for_object(run).get()
        assert run.state == RunState.CANCELLED
        assert expense.human_tasks.get().state == TaskState.CANCELLED
        assert (entry.actor, entry.remote_addr) == (alice, "10.0.0.9")
        assert entry.additional_data["comment"] == "Trip cancelled"

    def test_someone_with_a_task_on_it_is_refused_saying_who_may(self, expense, carol):
        with pytest.raises(request_services.WithdrawRefused) as refused:
            withdraw(expense, carol)

        expense.refresh_from_db()
        assert str(refused.value) == (
            "Only alice, who asked for this request, or an operator may withdraw it."
        )
        assert refused.value.status == 403
        assert expense.state == RunState.WAITING

    def test_someone_who_may_not_see_it_is_told_there_is_no_such_request(self, expense, eve):
        with pytest.raises(RequestNotFound):
            withdraw(expense, eve)

    def test_a_second_withdrawal_is_refused_and_changes_nothing(self, expense, alice):
        withdraw(expense, alice)

        with pytest.raises(request_services.RequestEnded) as ended:
            withdraw(expense, alice)

        assert ended.value.status == 409
        assert LogEntry.objects.get_for_object(expense).count() == 1

    def test_a_decided_and_paid_request_cannot_be_withdrawn(self, expense, alice, carol, drive):
        human_tasks.approve_human_task(
            task_id=expense.human_tasks.get().pk, user=carol, channel="inbox"
        )
        drive(expense)

        with pytest.raises(request_services.RequestEnded, match=r"already ended \(succeeded\)"):
            withdraw(expense, alice)


class TestCommentOnRequest:
    def test_goes_to_each_open_task_and_is_audited_there(self, expense, alice):
        (comment,) = request_services.comment_on_request(
            run_id=expense.pk, user=alice, body=" Receipt attached. ", channel="inbox"
        )

        task = expense.human_tasks.get()
        assert (comment.task, comment.body) == (task, "Receipt attached.")
        entry = LogEntry.objects.get_for_object(task).get(additional_data__event="commented")
        assert (entry.actor, entry.additional_data["comment"]) == (alice, "Receipt attached.")

    def test_after_the_decision_it_goes_to_the_last_task(self, expense, alice, carol):
        task = expense.human_tasks.get()
        human_tasks.reject_human_task(task_id=task.pk, user=carol, channel="inbox", reason="No")

        (comment,) = request_services.comment_on_request(
            run_id=expense.pk, user=alice, body="Why not?", channel="inbox"
        )

        assert comment.task == task

    def test_text_the_database_cannot_hold_is_refused_saying_why(self, expense, alice):
        with pytest.raises(request_services.InvalidText) as refused:
            request_services.comment_on_request(
                run_id=expense.pk, user=alice, body="Receipt\x00", channel="inbox"
            )

        assert str(refused.value).startswith("The comment must not contain control characters")
        assert Comment.objects.count() == 0

    def test_a_reason_longer_than_a_comment_may_be_is_refused(self, expense, alice):
        with pytest.raises(request_services.InvalidText):
            withdraw(expense, alice, reason="x" * 5000)

        expense.refresh_from_db()
        assert expense.state == RunState.WAITING

    def test_an_empty_comment_is_refused(self, expense, alice):
        with pytest.raises(request_services.InvalidText):
            request_services.comment_on_request(
                run_id=expense.pk, user=alice, body="   ", channel="inbox"
            )

        assert Comment.objects.count() == 0
