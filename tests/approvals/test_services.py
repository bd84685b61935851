"""The human-task use cases, and who may do what (the same rules for every channel)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from auditlog.models import LogEntry
from django.utils import timezone

from approvals import human_tasks
from approvals.audit import verify_audit_chain
from approvals.models import Comment, HumanTask, ReportingLine, Substitution
from approvals.states import Channel, Outcome, TaskState
from tests.conftest import at_once
from workflows.examples.models import ServiceEffect
from workflows.states import RunState

pytestmark = pytest.mark.django_db

INBOX = Channel.INBOX


def events(task: HumanTask) -> list[str]:
    return [
        entry.additional_data["event"]
        for entry in LogEntry.objects.get_for_object(task).order_by("id")
    ]


class TestOpeningTasks:
    def test_an_expense_waits_for_the_requesters_manager(self, start_expense, carol):
        run = start_expense()

        task = run.human_tasks.get()
        assert run.state == RunState.WAITING
        assert (task.state, task.assignee, task.node) == (
            TaskState.CLAIMED,
            carol,
            "manager_approval",
        )
        assert task.title == "Expense: Train to Lyon — €120.00 (alice)"
        assert events(task) == ["created"]

    def test_an_absent_manager_gets_a_visible_substitute(self, start_expense, carol, bob):
        now = timezone.now()
        Substitution.objects.create(
            user=carol,
            substitute=bob,
            starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=1),
        )

        task = start_expense().human_tasks.get()

        assert (task.assignee, task.substitute_for) == (bob, carol)


class TestApprove:
    def test_approving_moves_the_run_on_and_pays_once(self, manager_task, carol, drive):
        task = human_tasks.approve_human_task(
            task_id=manager_task.pk, user=carol, channel=INBOX, comment="Fine"
        )

        run = drive(task.run)
        assert (task.state, task.outcome, task.decided_by) == ("completed", "approved", carol)
        assert run.state == RunState.SUCCEEDED
        assert ServiceEffect.objects.filter(action="pay", applied_at__isnull=False).count() == 1
        assert events(task) == ["created", "approved"]
        assert Comment.objects.get(task=task).body == "Fine"

    def test_a_second_decision_is_refused_and_names_the_first(self, manager_task, carol, olga):
        human_tasks.approve_human_task(task_id=manager_task.pk, user=carol, channel=INBOX)

        with pytest.raises(human_tasks.AlreadyDecided, match="already approved by Carol at"):
            human_tasks.reject_human_task(
                task_id=manager_task.pk, user=olga, channel=INBOX, reason="no"
            )

        manager_task.refresh_from_db()
        assert manager_task.outcome == Outcome.APPROVED
        assert events(manager_task) == ["created", "approved"]

    def test_a_stale_version_is_refused(self, manager_task, carol):
        with pytest.raises(human_tasks.StaleTask, match="changed since you opened it"):
            human_tasks.approve_human_task(
                task_id=manager_task.pk,
                user=carol,
                channel=INBOX,
                expected_version=manager_task.version - 1,
            )

    def test_someone_who_may_see_but_not_decide_gets_403(self, manager_task, olga, carol, alice):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )

        with pytest.raises(human_tasks.NotAllowed) as refused:
            human_tasks.approve_human_task(task_id=manager_task.pk, user=carol, channel=INBOX)

        assert refused.value.status == 403

    def test_an_outsider_gets_404(self, manager_task, eve):
        with pytest.raises(human_tasks.TaskNotFound) as refused:
            human_tasks.approve_human_task(task_id=manager_task.pk, user=eve, channel=INBOX)

        assert refused.value.status == 404

    def test_an_operator_may_decide_any_task(self, manager_task, olga):
        task = human_tasks.approve_human_task(
            task_id=manager_task.pk, user=olga, channel=Channel.ADMIN
        )

        assert task.decided_by == olga


class TestReject:
    def test_a_reason_is_required(self, manager_task, carol):
        with pytest.raises(human_tasks.InvalidRequest, match="a reason is required"):
            human_tasks.reject_human_task(
                task_id=manager_task.pk, user=carol, channel=INBOX, reason="  "
            )

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.CLAIMED

    def test_rejecting_ends_the_expense_unpaid(self, manager_task, carol, drive):
        human_tasks.reject_human_task(
            task_id=manager_task.pk, user=carol, channel=INBOX, reason="Not in budget"
        )

        run = drive(manager_task.run)
        assert run.state == RunState.SUCCEEDED
        assert "pay" not in run.results
        assert run.results["manager_approval"]["payload"]["decisions"][0]["comment"] == (
            "Not in budget"
        )


class TestClaimAndRelease:
    def test_a_group_member_claims_then_releases(self, start_expense, carol, bob, drive):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        finance = drive(run).human_tasks.get(node="finance_approval")
        assert finance.state == TaskState.OPEN

        claimed = human_tasks.claim_human_task(task_id=finance.pk, user=bob, channel=INBOX)
        released = human_tasks.release_human_task(task_id=finance.pk, user=bob, channel=INBOX)

        assert claimed.assignee == bob
        assert (released.state, released.assignee) == (TaskState.OPEN, None)
        assert events(released) == ["created", "claimed", "released"]

    def test_only_a_candidate_may_claim(self, start_expense, carol, alice, drive):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        finance = drive(run).human_tasks.get(node="finance_approval")

        with pytest.raises(human_tasks.TaskNotFound):
            human_tasks.claim_human_task(task_id=finance.pk, user=alice, channel=INBOX)

    def test_a_directly_assigned_task_cannot_be_released(self, manager_task, carol):
        with pytest.raises(human_tasks.NotAllowed):
            human_tasks.release_human_task(task_id=manager_task.pk, user=carol, channel=INBOX)


class TestDelegateAndReassign:
    def test_a_task_cannot_be_handed_to_a_stranger_and_the_refusal_says_whom_one_may(
        self, manager_task, carol
    ):
        for hand_over in (human_tasks.delegate_human_task, human_tasks.reassign_human_task):
            with pytest.raises(
                human_tasks.NotAllowed, match="only to people in your groups"
            ) as refusal:
                hand_over(task_id=manager_task.pk, user=carol, to_username="eve", channel=INBOX)

            assert "Eve is none of these" in str(refusal.value)
        manager_task.refresh_from_db()
        assert (manager_task.state, manager_task.assignee.username) == (TaskState.CLAIMED, "carol")

    def test_an_operator_may_hand_a_task_to_anyone(self, manager_task, olga):
        human_tasks.reassign_human_task(
            task_id=manager_task.pk, user=olga, to_username="eve", channel=INBOX
        )

        manager_task.refresh_from_db()
        assert manager_task.assignee.username == "eve"

    def test_the_delegate_decides_and_the_owner_is_told(
        self, manager_task, carol, bob, mailoutbox, django_capture_on_commit_callbacks
    ):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk,
            user=carol,
            to_username="bob",
            channel=INBOX,
            comment="Please check",
        )

        with django_capture_on_commit_callbacks(execute=True):
            task = human_tasks.approve_human_task(task_id=manager_task.pk, user=bob, channel=INBOX)

        assert (task.owner, task.decided_by) == (carol, bob)
        assert [message.to for message in mailoutbox] == [["carol@example.com"]]
        assert events(task) == ["created", "delegated", "approved"]

    def test_delegating_to_an_unknown_user_is_refused_clearly(self, manager_task, carol):
        with pytest.raises(human_tasks.InvalidRequest, match="no active user called 'zed'"):
            human_tasks.delegate_human_task(
                task_id=manager_task.pk, user=carol, to_username="zed", channel=INBOX
            )

    def test_the_owner_reassigns_for_good(self, manager_task, carol, bob):
        task = human_tasks.reassign_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )

        assert (task.state, task.assignee, task.owner) == (TaskState.CLAIMED, bob, None)
        with pytest.raises(human_tasks.NotAllowed):
            human_tasks.approve_human_task(task_id=task.pk, user=carol, channel=INBOX)

    def test_the_groups_manager_reassigns_a_group_task(self, start_expense, carol, bob, eve, drive):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        finance = drive(run).human_tasks.get(node="finance_approval")
        human_tasks.claim_human_task(task_id=finance.pk, user=bob, channel=INBOX)
        ReportingLine.objects.create(user=eve, manager=carol)  # someone carol may hand it to

        # To eve: alice requested this expense, so it may not go to her.
        task = human_tasks.reassign_human_task(
            task_id=finance.pk, user=carol, to_username="eve", channel=INBOX
        )

        assert task.assignee.username == "eve"

    def test_a_reviewer_who_is_not_the_owner_cannot_reassign(self, manager_task, carol, bob):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=INBOX
        )

        with pytest.raises(
            human_tasks.NotAllowed, match="owner, its group's manager or an operator"
        ):
            human_tasks.reassign_human_task(
                task_id=manager_task.pk, user=bob, to_username="alice", channel=INBOX
            )


class TestComments:
    def test_a_comment_is_kept_and_audited(self, manager_task, carol):
        human_tasks.comment_on_human_task(
            task_id=manager_task.pk, user=carol, body="Receipt?", channel=INBOX
        )

        assert [c.body for c in manager_task.comments.all()] == ["Receipt?"]
        assert events(manager_task)[-1] == "commented"


class TestBulkApprove:
    def test_each_task_is_decided_and_audited_on_its_own(self, start_expense, carol):
        tasks = [start_expense(title=f"Trip {n}").human_tasks.get() for n in range(3)]
        human_tasks.approve_human_task(task_id=tasks[1].pk, user=carol, channel=INBOX)

        results = human_tasks.bulk_approve(
            selection=[(t.pk, t.version) for t in tasks], user=carol, channel=INBOX
        )

        assert [bool(result.error) for result in results] == [False, True, False]
        assert "already approved" in results[1].error
        assert all(events(task) == ["created", "approved"] for task in tasks)


def shares(run, people) -> list[HumanTask]:
    """The three shares of test_two_of_three: alice's, bob's, then the finance group's."""
    return [
        run.human_tasks.get(assignee=people["alice"]),
        run.human_tasks.get(assignee=people["bob"]),
        run.human_tasks.get(state=TaskState.OPEN),
    ]


class TestMultipleApprovers:
    def test_n_of_m_approves_at_n_and_cancels_the_rest(self, people, start, drive):
        run = drive(start("test_two_of_three", {}))
        tasks = shares(run, people)
        assert len(tasks) == 3

        for task, user in zip(tasks[:2], ("alice", "bob"), strict=True):
            human_tasks.approve_human_task(task_id=task.pk, user=people[user], channel=INBOX)

        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert run.results["board"]["signal"] == "board.approved"
        tasks[2].refresh_from_db()
        assert tasks[2].state == TaskState.CANCELLED
        assert events(tasks[2]) == ["created", "cancelled"]

    def test_n_of_m_rejects_as_soon_as_n_is_out_of_reach(self, people, start, drive):
        run = drive(start("test_two_of_three", {}))
        tasks = shares(run, people)

        human_tasks.reject_human_task(
            task_id=tasks[0].pk, user=people["alice"], channel=INBOX, reason="no"
        )
        human_tasks.reject_human_task(
            task_id=tasks[1].pk, user=people["bob"], channel=INBOX, reason="no"
        )

        run = drive(run)
        assert run.results["board"]["signal"] == "board.rejected"
        assert run.human_tasks.filter(state=TaskState.CANCELLED).count() == 1


class TestAQuorumThatCanNoLongerBeReached:
    """Two of alice, bob and carol must approve; alice started the run, so she may not."""

    @pytest.fixture
    def run(self, people, start, drive):
        return drive(start("test_two_of_three_people", {}, started_by=people["alice"]))

    def share_of(self, run, user):
        return run.human_tasks.get(assignee=user)

    def test_a_rejection_beside_the_barred_requester_rejects_it_at_once(self, run, people, drive):
        human_tasks.reject_human_task(
            task_id=self.share_of(run, people["bob"]).pk,
            user=people["bob"],
            channel=INBOX,
            reason="not this year",
        )

        run = drive(run)
        assert run.state == RunState.SUCCEEDED  # on_reject=None: the run ends there
        assert run.results["board"]["signal"] == "board.rejected"
        assert "can no longer get them" in run.results["board"]["payload"]["reason"]
        assert set(run.human_tasks.values_list("state", flat=True)) == {
            TaskState.COMPLETED,
            TaskState.CANCELLED,
        }

    def test_the_reason_is_on_the_runs_timeline_and_in_the_barred_shares_audit_trail(
        self, run, people, drive
    ):
        alices = self.share_of(run, people["alice"])

        human_tasks.reject_human_task(
            task_id=self.share_of(run, people["bob"]).pk,
            user=people["bob"],
            channel=INBOX,
            reason="not this year",
        )

        [warning] = run.events.filter(kind="warning")
        assert warning.node == "board"
        assert warning.detail["message"].startswith(
            "This approval needs 2 approvals and can no longer get them (0 approved, 1 rejected,"
            " 1 still open): nobody who may decide is left for 1 share (held by alice"
        )
        assert events(alices) == ["created", "quorum_unreachable", "cancelled"]
        assert verify_audit_chain().intact

    def test_carol_cannot_approve_a_share_the_rejection_already_closed(self, run, people):
        human_tasks.reject_human_task(
            task_id=self.share_of(run, people["bob"]).pk,
            user=people["bob"],
            channel=INBOX,
            reason="not this year",
        )

        with pytest.raises(human_tasks.TaskError):
            human_tasks.approve_human_task(
                task_id=self.share_of(run, people["carol"]).pk, user=people["carol"], channel=INBOX
            )

    def test_approvals_that_can_still_reach_it_keep_it_waiting(self, run, people, drive):
        human_tasks.approve_human_task(
            task_id=self.share_of(run, people["bob"]).pk, user=people["bob"], channel=INBOX
        )

        run = drive(run)
        assert run.state == RunState.WAITING
        assert not run.events.filter(kind="warning").exists()

    def test_and_carols_approval_then_approves_it(self, run, people, drive):
        for name in ("bob", "carol"):
            human_tasks.approve_human_task(
                task_id=self.share_of(run, people[name]).pk, user=people[name], channel=INBOX
            )

        run = drive(run)
        assert run.results["board"]["signal"] == "board.approved"


@pytest.mark.django_db(transaction=True)
class TestRaceOfTwoDecisions:
    def test_exactly_one_decision_is_recorded(self, people, start, drive):
        run = drive(start("test_two_of_three", {}))
        task = run.human_tasks.get(state=TaskState.OPEN)  # the finance group's share

        outcomes = at_once(
            lambda: human_tasks.approve_human_task(
                task_id=task.pk, user=people["bob"], channel=INBOX
            ),
            lambda: human_tasks.reject_human_task(
                task_id=task.pk, user=people["carol"], channel=INBOX, reason="no"
            ),
        )

        task.refresh_from_db()
        refused = [o for o in outcomes if isinstance(o, human_tasks.AlreadyDecided)]
        decided = [o for o in outcomes if isinstance(o, HumanTask)]
        assert (len(decided), len(refused)) == (1, 1)
        assert str(refused[0]).startswith("This task was already")
        assert events(task) == ["created", task.outcome]


class TestText:
    def test_a_comment_past_the_shared_limit_is_refused_whatever_the_channel(
        self, manager_task, carol
    ):
        for channel in (Channel.INBOX, Channel.API, Channel.EMAIL, Channel.ADMIN):
            with pytest.raises(
                human_tasks.InvalidRequest,
                match=r"The comment must be at most 4000 characters \(this has 4001\)",
            ):
                human_tasks.approve_human_task(
                    task_id=manager_task.pk, user=carol, channel=channel, comment="x" * 4001
                )

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.CLAIMED

    def test_a_comment_at_the_limit_is_kept_whole(self, manager_task, carol):
        human_tasks.comment_on_human_task(
            task_id=manager_task.pk, user=carol, body="x" * 4000, channel=INBOX
        )

        assert len(Comment.objects.get().body) == 4000

    def test_a_comment_with_a_nul_character_is_refused(self, manager_task, carol):
        with pytest.raises(
            human_tasks.InvalidRequest, match="control characters \\(found U\\+0000"
        ):
            human_tasks.approve_human_task(
                task_id=manager_task.pk, user=carol, channel=INBOX, comment="ok\x00"
            )

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.CLAIMED


class TestTaskForms:
    def test_the_values_are_kept_on_the_decision_in_the_run_data_and_in_the_audit(
        self, finance_task, bob, drive
    ):
        task = human_tasks.approve_human_task(
            task_id=finance_task.pk, user=bob, channel=INBOX, values={"cost_centre": "FIN-1200"}
        )

        run = drive(task.run)
        task.refresh_from_db()
        assert task.form_values == {"cost_centre": "FIN-1200"}
        payload = run.results["finance_approval"]["payload"]
        assert payload["values"] == {"cost_centre": "FIN-1200"}
        assert payload["decisions"][0]["values"] == {"cost_centre": "FIN-1200"}
        assert run.state == RunState.SUCCEEDED
        entry = LogEntry.objects.get_for_object(task).order_by("id").last()
        assert entry.additional_data["event"] == "approved"
        assert entry.changes["form_values"] == [{}, {"cost_centre": "FIN-1200"}]

    def test_the_audit_chain_covers_the_values(self, finance_task, bob):
        human_tasks.approve_human_task(
            task_id=finance_task.pk, user=bob, channel=INBOX, values={"cost_centre": "FIN-1200"}
        )
        entry = LogEntry.objects.get_for_object(finance_task).order_by("id").last()
        LogEntry.objects.filter(pk=entry.pk).update(
            changes={**entry.changes, "form_values": [{}, {"cost_centre": "FIN-9999"}]}
        )

        assert verify_audit_chain().broken_entry.pk == entry.pk

    def test_approving_without_the_required_values_is_refused_and_nothing_is_decided(
        self, finance_task, bob
    ):
        with pytest.raises(human_tasks.InvalidForm) as refused:
            human_tasks.approve_human_task(task_id=finance_task.pk, user=bob, channel=INBOX)

        assert refused.value.status == 422
        assert refused.value.errors == [
            {"field": "cost_centre", "message": "Field required", "type": "missing"}
        ]
        assert str(refused.value) == (
            "Fill in the form to approve: Cost centre: This is required. Nothing was decided."
        )
        finance_task.refresh_from_db()
        assert (finance_task.state, finance_task.outcome, finance_task.form_values) == (
            TaskState.OPEN,
            "",
            {},
        )
        assert events(finance_task) == ["created"]
        assert not finance_task.run.signals.filter(name__startswith="finance_approval").exists()

    def test_values_that_do_not_fit_are_refused_naming_the_field_in_words(self, finance_task, bob):
        with pytest.raises(human_tasks.InvalidForm) as refused:
            human_tasks.approve_human_task(
                task_id=finance_task.pk, user=bob, channel=INBOX, values={"cost_centre": "12"}
            )

        assert refused.value.errors[0]["field"] == "cost_centre"
        assert "Cost centre: Enter the cost centre to charge, e.g. FIN-1200." in str(refused.value)
        finance_task.refresh_from_db()
        assert finance_task.state == TaskState.OPEN

    def test_a_field_the_form_does_not_have_is_refused(self, finance_task, bob):
        with pytest.raises(human_tasks.InvalidForm) as refused:
            human_tasks.approve_human_task(
                task_id=finance_task.pk,
                user=bob,
                channel=INBOX,
                values={"cost_centre": "FIN-1200", "project": "x"},
            )

        assert refused.value.errors == [
            {
                "field": "project",
                "message": "Extra inputs are not permitted",
                "type": "extra_forbidden",
            }
        ]

    def test_rejecting_needs_a_reason_but_no_form(self, finance_task, bob, drive):
        task = human_tasks.reject_human_task(
            task_id=finance_task.pk, user=bob, channel=INBOX, reason="Not in budget"
        )

        run = drive(task.run)
        assert (task.outcome, task.form_values) == (Outcome.REJECTED, {})
        assert run.results["finance_approval"]["payload"]["values"] == {}
        assert "pay" not in run.results

    def test_an_approval_without_a_form_refuses_values(self, manager_task, carol):
        with pytest.raises(human_tasks.InvalidForm, match="This decision has no form"):
            human_tasks.approve_human_task(
                task_id=manager_task.pk, user=carol, channel=INBOX, values={"x": "1"}
            )

    def test_an_already_decided_task_is_refused_as_such_whatever_the_values(
        self, finance_task, bob, carol
    ):
        human_tasks.approve_human_task(
            task_id=finance_task.pk, user=bob, channel=INBOX, values={"cost_centre": "FIN-1200"}
        )

        with pytest.raises(human_tasks.AlreadyDecided):
            human_tasks.approve_human_task(task_id=finance_task.pk, user=carol, channel=INBOX)

    def test_a_stale_view_is_refused_before_the_form_is_read(self, finance_task, bob):
        with pytest.raises(human_tasks.StaleTask):
            human_tasks.approve_human_task(
                task_id=finance_task.pk,
                user=bob,
                channel=INBOX,
                values={},
                expected_version=finance_task.version - 1 or 99,
            )

    def test_bulk_approval_refuses_a_task_whose_form_is_empty(self, finance_task, bob):
        results = human_tasks.bulk_approve(
            selection=[(finance_task.pk, finance_task.version)], user=bob, channel=INBOX
        )

        assert results[0].error.startswith("Fill in the form to approve: Cost centre")
        finance_task.refresh_from_db()
        assert finance_task.state == TaskState.OPEN

    def test_each_of_several_deciders_keeps_their_own_values(self, people, start, drive):
        run = drive(start("test_two_of_three_with_form", {}))
        alice_share = run.human_tasks.get(assignee=people["alice"])
        bob_share = run.human_tasks.get(assignee=people["bob"])

        human_tasks.approve_human_task(
            task_id=alice_share.pk,
            user=people["alice"],
            channel=INBOX,
            values={"budget_line": "R&D-1"},
        )
        human_tasks.approve_human_task(
            task_id=bob_share.pk,
            user=people["bob"],
            channel=INBOX,
            values={"budget_line": "OPS-7", "remark": "next quarter"},
        )

        run = drive(run)
        payload = run.results["board"]["payload"]
        assert [(d["by"], d["values"]) for d in payload["decisions"]] == [
            ("alice", {"budget_line": "R&D-1", "remark": ""}),
            ("bob", {"budget_line": "OPS-7", "remark": "next quarter"}),
        ]
        assert "values" not in payload  # several people: no one set speaks for the node
        alice_share.refresh_from_db()
        assert alice_share.form_values == {"budget_line": "R&D-1", "remark": ""}
