"""Sending a request back for changes: the reviewer's request, the requester's revision task,
resubmission with its diff, the same approval again, and the bounds of the loop."""

from __future__ import annotations

from datetime import timedelta

import pytest
from auditlog.models import LogEntry
from django.utils import timezone

from approvals import human_tasks
from approvals.human_tasks import revisions
from approvals.models import HumanTask, Notification
from approvals.requests import services as request_services
from approvals.states import NoticeKind, Outcome, TaskKind, TaskState
from workflows import engine
from workflows.examples.models import ServiceEffect
from workflows.models import WorkflowRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


def ask_changes(task, user, reason="Attach the receipt and split the taxi.", **options):
    return human_tasks.request_changes(
        task_id=task.pk, user=user, channel="inbox", reason=reason, **options
    )


def resubmit(run, user, **changes):
    task = revisions.open_revision(run)
    current = {key: value for key, value in run.input.items() if key != "requester"}
    return revisions.resubmit_request(
        task_id=task.pk, user=user, input={**current, **changes}, channel="inbox"
    )


@pytest.fixture
def sent_back(manager_task, carol, drive):
    """alice's 120 EUR expense, sent back by carol for changes."""
    ask_changes(manager_task, carol)
    return drive(WorkflowRun.objects.get(pk=manager_task.run_id))


class TestRequestChanges:
    def test_needs_a_reason_and_changes_nothing_without_one(self, manager_task, carol):
        with pytest.raises(human_tasks.InvalidRequest, match="a reason is required") as refused:
            ask_changes(manager_task, carol, reason="  ")

        manager_task.refresh_from_db()
        assert refused.value.status == 422
        assert manager_task.state == TaskState.CLAIMED
        assert not HumanTask.objects.filter(kind=TaskKind.REVISION).exists()

    def test_only_a_reviewer_of_the_task_may_ask(self, manager_task, bob, eve):
        manager_task.candidate_users.add(bob)  # sees it, but carol holds it

        with pytest.raises(human_tasks.NotAllowed, match="not a reviewer"):
            ask_changes(manager_task, bob)
        with pytest.raises(human_tasks.TaskNotFound):
            ask_changes(manager_task, eve)

    def test_the_requester_may_not_ask_on_their_own_request(self, manager_task, alice):
        manager_task.candidate_users.add(alice)

        with pytest.raises(human_tasks.ConflictOfDuty, match="You requested this expense"):
            ask_changes(manager_task, alice)

    def test_an_approval_that_does_not_allow_it_refuses_saying_so(self, start, drive, people, bob):
        run = drive(start("vendor_onboarding", {"vendor_name": "Acme", "contact_email": "a@b.co"}))
        legal = run.human_tasks.get(node="legal_review")
        legal.candidate_users.add(bob)

        with pytest.raises(human_tasks.NotAllowed, match="cannot send the request back"):
            ask_changes(legal, bob)

    def test_ends_the_approval_and_gives_the_requester_a_revision_task(self, sent_back, carol):
        asked = sent_back.human_tasks.get(kind=TaskKind.APPROVAL)
        revision = sent_back.human_tasks.get(kind=TaskKind.REVISION)

        assert (asked.state, asked.outcome) == (TaskState.COMPLETED, Outcome.CHANGES_REQUESTED)
        assert sent_back.state == RunState.WAITING
        assert revision.node == "revise_for_manager"
        assert revision.assignee.username == "alice"
        assert revision.title == (
            "Changes requested by Carol: Attach the receipt and split the taxi."
        )

    def test_tells_the_requester_with_a_link_to_change_it(self, sent_back, alice):
        notice = Notification.objects.get(user=alice, kind=NoticeKind.CHANGES_REQUESTED)

        assert notice.url == f"/requests/{sent_back.pk}/revise/"
        assert "Attach the receipt" in notice.text
        assert not Notification.objects.filter(user=alice, kind=NoticeKind.REQUEST_DECIDED)


class TestWhoAnswersTheRevision:
    def test_the_reviewer_is_refused_with_the_reason(self, sent_back, carol):
        with pytest.raises(human_tasks.NotAllowed) as refused:
            resubmit(sent_back, carol, amount="95.00")

        assert refused.value.status == 403
        assert str(refused.value) == (
            "Only alice, who asked for this expense, may change and resubmit it (or an "
            "operator acting for them); reviewers ask for changes, they do not make them."
        )
        assert revisions.open_revision(sent_back).is_live

    def test_someone_who_may_not_see_the_request_finds_no_task(self, sent_back, eve):
        with pytest.raises(human_tasks.TaskNotFound):
            resubmit(sent_back, eve, amount="95.00")

    def test_the_reviewer_cannot_claim_or_decide_it_either(self, sent_back, carol, operator):
        revision = revisions.open_revision(sent_back)

        with pytest.raises(human_tasks.NotAllowed, match="answered by resubmitting"):
            human_tasks.approve_human_task(task_id=revision.pk, user=operator, channel="inbox")

    def test_an_operator_may_answer_for_the_requester_and_is_audited_as_such(
        self, sent_back, operator
    ):
        task = resubmit(sent_back, operator, amount="95.00")

        entry = LogEntry.objects.get_for_object(task).get(additional_data__event="resubmitted")
        assert entry.actor == operator
        assert entry.additional_data["comment"] == "for alice"


class TestResubmit:
    def test_invalid_input_is_refused_field_by_field_and_nothing_changes(self, sent_back, alice):
        with pytest.raises(revisions.InvalidResubmission) as refused:
            resubmit(sent_back, alice, amount="-4")

        sent_back.refresh_from_db()
        assert refused.value.status == 422
        assert [error["field"] for error in refused.value.errors] == ["amount"]
        assert sent_back.input["amount"] == "120.00"
        assert revisions.open_revision(sent_back).state == TaskState.CLAIMED
        assert sent_back.human_tasks.count() == 2

    def test_the_requester_field_cannot_be_changed(self, sent_back, alice):
        with pytest.raises(revisions.InvalidResubmission, match="stays alice"):
            resubmit(sent_back, alice, requester="bob")

    def test_records_the_diff_on_the_task_and_in_the_audit(self, sent_back, alice, drive):
        task = resubmit(sent_back, alice, amount="95.00", title="Train to Lyon, 2nd class")

        entry = LogEntry.objects.get_for_object(task).get(additional_data__event="resubmitted")
        assert task.outcome == Outcome.RESUBMITTED
        assert task.changes == {
            "amount": ["120.00", "95.00"],
            "title": ["Train to Lyon", "Train to Lyon, 2nd class"],
        }
        assert entry.changes == task.changes
        assert entry.actor.username == "alice"

    def test_the_run_takes_the_new_input_and_keeps_the_old_one_on_the_step(self, sent_back, alice):
        resubmit(sent_back, alice, amount="95.00")

        sent_back.refresh_from_db()
        step = sent_back.steps.get(node="revise_for_manager")
        assert sent_back.input["amount"] == "95.00"
        assert step.result["payload"]["previous"]["amount"] == "120.00"
        assert step.result["payload"]["changes"] == {"amount": ["120.00", "95.00"]}

    def test_returns_to_the_same_approval_and_reviewer_with_a_fresh_escalation_clock(
        self, manager_task, alice, carol, drive
    ):
        first_escalation, first_deadline = manager_task.escalate_at, manager_task.due_at
        ask_changes(manager_task, carol)
        run = drive(WorkflowRun.objects.get(pk=manager_task.run_id))
        later = timezone.now() + timedelta(days=3)

        revisions.resubmit_request(
            task_id=revisions.open_revision(run).pk,
            user=alice,
            input={"title": "Train to Lyon", "amount": "95.00", "currency": "EUR"},
            channel="inbox",
            now=later,
        )

        again = run.human_tasks.get(kind=TaskKind.APPROVAL, state=TaskState.CLAIMED)
        assert again.node == "manager_approval"
        assert again.step.round == 1
        assert again.assignee == carol == manager_task.assignee
        assert again.created_at == later
        assert again.escalation_level == 0
        assert again.escalate_at > first_escalation
        assert again.escalate_at > later
        assert again.due_at - later == first_deadline - manager_task.created_at

    def test_a_second_resubmission_is_refused_naming_the_first(self, sent_back, alice):
        task = resubmit(sent_back, alice, amount="95.00")

        with pytest.raises(human_tasks.AlreadyDecided, match="already resubmitted by"):
            revisions.resubmit_request(
                task_id=task.pk, user=alice, input=dict(sent_back.input), channel="inbox"
            )

    def test_then_approved_it_is_paid_the_new_amount(self, sent_back, alice, carol, drive):
        resubmit(sent_back, alice, amount="95.00")
        again = sent_back.human_tasks.get(kind=TaskKind.APPROVAL, state=TaskState.CLAIMED)

        human_tasks.approve_human_task(task_id=again.pk, user=carol, channel="inbox")
        run = drive(sent_back)

        paid = ServiceEffect.objects.get(run_id=run.pk, action="pay")
        assert run.state == RunState.SUCCEEDED
        assert run.steps.get(node="pay").round == 1
        assert paid.data["amount"] == "95.00"
        assert paid.idempotency_key == f"{run.pk}:pay@1"


class TestRounds:
    def test_past_its_rounds_the_approval_may_no_longer_send_it_back(
        self, sent_back, alice, carol, drive
    ):
        resubmit(sent_back, alice, amount="95.00")
        ask_changes(sent_back.human_tasks.get(state=TaskState.CLAIMED), carol, reason="Still no")
        resubmit(drive(sent_back), alice, amount="90.00")
        third = sent_back.human_tasks.get(kind=TaskKind.APPROVAL, state=TaskState.CLAIMED)

        with pytest.raises(human_tasks.NotAllowed) as refused:
            ask_changes(third, carol, reason="Once more")

        assert str(refused.value) == (
            "This request was already sent back for changes 2 times, the most this approval "
            "allows: approve or reject it."
        )
        assert third.step.round == 2
        human_tasks.reject_human_task(task_id=third.pk, user=carol, channel="inbox", reason="No")
        assert drive(sent_back).state == RunState.SUCCEEDED  # notified of the rejection
        assert "pay" not in sent_back.results


class TestPastTheRoundsTheOtherwisePath:
    def test_a_loop_the_approval_cannot_count_ends_on_otherwise_after_its_rounds(
        self, start, drive, people, alice, carol, effects
    ):
        run = drive(start("test_reworked", {"author": "alice", "text": "first"}))

        for text in ("second", "third"):
            review = run.human_tasks.get(node="review", state=TaskState.CLAIMED)
            ask_changes(review, carol, reason="Shorter, please.")
            revision = revisions.open_revision(drive(run))
            revisions.resubmit_request(
                task_id=revision.pk, user=alice, input={"text": text}, channel="inbox"
            )
            run = drive(run)

        rounds = [(s.node, s.round) for s in run.steps.filter(kind="forward").order_by("id")]
        assert run.state == RunState.SUCCEEDED
        assert rounds == [
            ("review", 0),
            ("rework", 0),
            ("log_rework", 0),
            ("again", 0),
            ("review", 1),
            ("rework", 1),
            ("log_rework", 1),
            ("again", 1),
            ("give_up", 1),
        ]
        assert run.input["text"] == "third"
        assert effects(run) == {"test.log_rework": 2, "test.give_up": 1}


class TestWithdraw:
    def test_withdrawing_from_the_revision_ends_the_run_and_closes_the_task(self, sent_back, alice):
        run = request_services.withdraw_request(run_id=sent_back.pk, user=alice, channel="inbox")

        revision = sent_back.human_tasks.get(kind=TaskKind.REVISION)
        assert run.state == RunState.CANCELLED
        assert revision.state == TaskState.CANCELLED
        assert sent_back.steps.get(node="revise_for_manager").state == StepState.CANCELLED


class TestCommentingWhileSentBack:
    def test_the_requesters_comment_reaches_the_reviewer_who_sent_it_back(self, sent_back, alice):
        (comment,) = request_services.comment_on_request(
            run_id=sent_back.pk, user=alice, body="Is a scan enough?", channel="inbox"
        )

        assert comment.task.kind == TaskKind.APPROVAL
        assert comment.task.outcome == Outcome.CHANGES_REQUESTED


class TestTheSignalIsTheTasksAlone:
    def test_nobody_replaces_the_input_by_signalling_the_revise_node(self, sent_back):
        with pytest.raises(engine.IllegalRunOperation, match="decided by the human task"):
            engine.signal_run(
                run_id=sent_back.pk,
                name="revise_for_manager.resubmitted",
                payload={"input": {**sent_back.input, "amount": "9999.00"}},
            )

        sent_back.refresh_from_db()
        assert sent_back.input["amount"] == "120.00"
