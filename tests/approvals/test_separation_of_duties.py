"""Separation of duties: nobody decides their own request, and an expense needs two people.

Every channel (services, inbox, API, admin, email links) obeys the same rule,
and every refusal says why and changes nothing.
"""

from __future__ import annotations

import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
from auditlog.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from approvals import human_tasks
from approvals.inbox.views import _confirmation
from approvals.models import EmailLink, HumanTask, ReportingLine, Substitution
from approvals.notify import links
from approvals.states import Channel, TaskState
from workflows import engine

pytestmark = pytest.mark.django_db

INBOX = Channel.INBOX
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "decision-panel"}


def snapshot(task: HumanTask) -> tuple:
    """What a refused action must leave as it was: the row, its audit trail, its comments."""
    task = HumanTask.objects.get(pk=task.pk)
    return (
        task.state,
        task.version,
        task.assignee_id,
        task.owner_id,
        task.outcome,
        sorted(task.candidate_users.values_list("username", flat=True)),
        LogEntry.objects.get_for_object(task).count(),
        task.comments.count(),
    )


@pytest.fixture
def finance_task_of(start_expense, carol, drive):
    """The open finance task of a 5000 EUR expense that carol approved as manager."""

    def make(requester: str) -> HumanTask:
        run = start_expense(amount="5000.00", requester=requester)
        human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel=INBOX)
        return drive(run).human_tasks.get(node="finance_approval")

    return make


@pytest.fixture
def bobs_finance_task(finance_task_of) -> HumanTask:
    """bob's own expense, open to the finance group, of which bob is a member."""
    return finance_task_of("bob")


@pytest.fixture
def olgas_manager_task(olga, carol, start_expense) -> HumanTask:
    """carol's approval of an expense of olga, the operator."""
    ReportingLine.objects.create(user=olga, manager=carol)
    return start_expense(requester="olga").human_tasks.get()


class TestTheRequesterNeverDecides:
    def test_claiming_their_own_expense_from_the_queue_is_refused(self, bobs_finance_task, bob):
        before = snapshot(bobs_finance_task)

        with pytest.raises(human_tasks.ConflictOfDuty) as refused:
            human_tasks.claim_human_task(task_id=bobs_finance_task.pk, user=bob, channel=INBOX)

        assert str(refused.value) == "You requested this expense, so you cannot claim it."
        assert refused.value.status == 403
        assert snapshot(bobs_finance_task) == before

    def test_approving_their_own_expense_is_refused(self, bobs_finance_task, bob):
        before = snapshot(bobs_finance_task)

        with pytest.raises(human_tasks.ConflictOfDuty) as refused:
            human_tasks.approve_human_task(
                task_id=bobs_finance_task.pk, user=bob, channel=INBOX, comment="fine by me"
            )

        assert str(refused.value) == "You requested this expense, so you cannot decide it."
        assert snapshot(bobs_finance_task) == before

    def test_rejecting_their_own_expense_is_refused(self, bobs_finance_task, bob):
        before = snapshot(bobs_finance_task)

        with pytest.raises(human_tasks.ConflictOfDuty, match="You requested this expense"):
            human_tasks.reject_human_task(
                task_id=bobs_finance_task.pk, user=bob, channel=INBOX, reason="changed my mind"
            )

        assert snapshot(bobs_finance_task) == before

    def test_whoever_started_the_run_is_a_requester_too(self, start, drive, carol):
        run = drive(
            start(
                "expense",
                {"requester": "alice", "title": "Taxi", "amount": "30.00", "currency": "EUR"},
                started_by=carol,
            )
        )
        task = run.human_tasks.get()
        before = snapshot(task)

        with pytest.raises(human_tasks.ConflictOfDuty, match="You requested this expense"):
            human_tasks.approve_human_task(task_id=task.pk, user=carol, channel=INBOX)

        assert task.assignee == carol  # still hers to see, and to give away
        assert snapshot(task) == before

    def test_an_operator_is_refused_their_own_request(self, olgas_manager_task, olga):
        before = snapshot(olgas_manager_task)

        with pytest.raises(human_tasks.ConflictOfDuty, match="You requested this expense"):
            human_tasks.approve_human_task(
                task_id=olgas_manager_task.pk, user=olga, channel=Channel.ADMIN
            )

        assert snapshot(olgas_manager_task) == before

    def test_an_operator_may_still_decide_someone_elses_request(self, manager_task, olga):
        task = human_tasks.approve_human_task(
            task_id=manager_task.pk, user=olga, channel=Channel.ADMIN
        )

        assert (task.state, task.decided_by) == (TaskState.COMPLETED, olga)

    def test_the_requester_cannot_choose_who_decides_even_as_an_operator(
        self, olgas_manager_task, olga
    ):
        before = snapshot(olgas_manager_task)

        with pytest.raises(human_tasks.ConflictOfDuty) as refused:
            human_tasks.reassign_human_task(
                task_id=olgas_manager_task.pk, user=olga, to_username="bob", channel=INBOX
            )

        assert str(refused.value) == (
            "You requested this expense, so you cannot choose who decides it."
        )
        assert snapshot(olgas_manager_task) == before


class TestNobodyHandsATaskToItsRequester:
    def test_delegating_to_the_requester_is_refused(self, manager_task, carol):
        before = snapshot(manager_task)

        with pytest.raises(human_tasks.ConflictOfDuty) as refused:
            human_tasks.delegate_human_task(
                task_id=manager_task.pk, user=carol, to_username="alice", channel=INBOX
            )

        assert str(refused.value) == (
            "Alice requested this expense, so it cannot be delegated to Alice: "
            "nobody decides their own request."
        )
        assert snapshot(manager_task) == before

    def test_reassigning_to_the_requester_is_refused(self, manager_task, carol, alice):
        before = snapshot(manager_task)

        with pytest.raises(human_tasks.ConflictOfDuty, match="cannot be reassigned to Alice"):
            human_tasks.reassign_human_task(
                task_id=manager_task.pk, user=carol, to_username="alice", channel=INBOX
            )

        assert snapshot(manager_task) == before
        with pytest.raises(human_tasks.TaskNotFound):  # so alice still cannot approve it
            human_tasks.approve_human_task(task_id=manager_task.pk, user=alice, channel=INBOX)

    def test_an_operator_cannot_reassign_to_the_requester(self, manager_task, olga):
        before = snapshot(manager_task)

        with pytest.raises(human_tasks.ConflictOfDuty, match="Alice requested this expense"):
            human_tasks.reassign_human_task(
                task_id=manager_task.pk, user=olga, to_username="alice", channel=Channel.ADMIN
            )

        assert snapshot(manager_task) == before


class TestAnExpenseNeedsTwoApprovers:
    def test_the_manager_who_approved_cannot_approve_again_as_finance(self, finance_task_of, carol):
        finance = finance_task_of("alice")
        manager = finance.run.human_tasks.get(node="manager_approval")
        before = snapshot(finance)

        with pytest.raises(human_tasks.ConflictOfDuty) as refused:
            human_tasks.approve_human_task(task_id=finance.pk, user=carol, channel=INBOX)

        when = re.escape(f"{timezone.localtime(manager.decided_at):%Y-%m-%d %H:%M}")
        assert re.fullmatch(
            f"You already approved this expense at its manager approval stage on {when} .+; "
            "one person decides at most one of its stages, so someone else must decide this one.",
            str(refused.value),
        )
        assert snapshot(finance) == before

    def test_nor_claim_it_from_the_finance_queue(self, finance_task_of, carol):
        finance = finance_task_of("alice")

        with pytest.raises(human_tasks.ConflictOfDuty, match="You already approved this expense"):
            human_tasks.claim_human_task(task_id=finance.pk, user=carol, channel=INBOX)

    def test_nor_be_delegated_it(self, finance_task_of, bob):
        finance = finance_task_of("alice")
        human_tasks.claim_human_task(task_id=finance.pk, user=bob, channel=INBOX)
        before = snapshot(finance)

        with pytest.raises(human_tasks.ConflictOfDuty, match="Carol already approved this expense"):
            human_tasks.delegate_human_task(
                task_id=finance.pk, user=bob, to_username="carol", channel=INBOX
            )

        assert snapshot(finance) == before

    def test_another_finance_member_approves_and_it_is_paid(self, finance_task_of, bob, drive):
        finance = finance_task_of("alice")

        human_tasks.approve_human_task(
            task_id=finance.pk, user=bob, channel=INBOX, values={"cost_centre": "FIN-1200"}
        )

        assert drive(finance.run).results["pay"]

    def test_a_type_without_the_flag_lets_one_person_decide_two_stages(
        self, start, drive, alice, groups
    ):
        alice.groups.add(groups["security"])
        run = drive(
            start("vendor_onboarding", {"vendor_name": "Acme", "contact_email": "a@acme.example"})
        )

        legal = {"contract_id": "LEG-1", "risk_level": "low"}
        for node, values in (("legal_review", legal), ("security_review", None)):
            task = run.human_tasks.get(node=node)
            human_tasks.approve_human_task(
                task_id=task.pk, user=alice, channel=INBOX, values=values
            )

        # Both stages decided by alice: the run went on to finance's bank details.
        assert drive(run).human_tasks.get(node="collect_bank_details").is_live


class TestEveryChannelObeys:
    def test_bulk_approve_refuses_the_requesters_own_and_decides_the_rest(
        self, start, drive, start_expense, carol
    ):
        others = [start_expense(title=f"Trip {n}").human_tasks.get() for n in range(2)]
        own = drive(
            start(
                "expense",
                {"requester": "alice", "title": "Mine", "amount": "9.00", "currency": "EUR"},
                started_by=carol,
            )
        ).human_tasks.get()
        before = snapshot(own)

        results = human_tasks.bulk_approve(
            selection=[(task.pk, task.version) for task in [others[0], own, others[1]]],
            user=carol,
            channel=INBOX,
        )

        assert [result.error for result in results] == [
            "",
            "You requested this expense, so you cannot decide it.",
            "",
        ]
        assert snapshot(own) == before
        assert HumanTask.objects.filter(outcome="approved").count() == 2

    def test_a_decision_by_email_link_is_refused_and_the_link_stays_unused(
        self, bobs_finance_task, bob
    ):
        _, token = links.create_link(
            task=bobs_finance_task, recipient=bob, now=bobs_finance_task.created_at
        )
        before = snapshot(bobs_finance_task)

        with pytest.raises(human_tasks.ConflictOfDuty, match="you cannot decide it"):
            human_tasks.decide_by_link(token=token, user=bob, outcome="approved")

        assert snapshot(bobs_finance_task) == before
        assert EmailLink.objects.get().used_at is None

    def test_the_email_link_page_answers_a_forced_post_with_403(
        self, client, bobs_finance_task, bob
    ):
        _, token = links.create_link(
            task=bobs_finance_task, recipient=bob, now=bobs_finance_task.created_at
        )
        client.force_login(bob)
        url = reverse("approvals:email_link", args=[token])
        # The token the page would carry, had it offered a decision.
        confirm = _confirmation(SimpleNamespace(session=client.session), EmailLink.objects.get().pk)

        response = client.post(url, {"confirm": confirm, "outcome": "approved"})

        assert response.status_code == 403
        assert "Please confirm again" not in response.text  # refused by the service, not the form
        assert "You requested this expense, so you cannot decide it." in response.text
        assert EmailLink.objects.get().used_at is None

    def test_the_inbox_answers_403_with_the_reason(self, client, bobs_finance_task, bob):
        client.force_login(bob)
        before = snapshot(bobs_finance_task)

        response = client.post(
            reverse("approvals:approve", args=[bobs_finance_task.pk]),
            {"version": bobs_finance_task.version},
            **HTMX,
        )

        assert response.status_code == 403
        assert "You requested this expense, so you cannot decide it." in response.text
        assert snapshot(bobs_finance_task) == before


class TestTheAdmin:
    def test_decide_on_the_operators_own_request_is_refused_with_the_reason(
        self, transition_url, client, admin_operator, olgas_manager_task
    ):
        client.force_login(admin_operator)
        before = snapshot(olgas_manager_task)

        response = client.post(
            transition_url(olgas_manager_task, "complete"), {"outcome": "approved"}, follow=True
        )

        assert "You requested this expense, so you cannot decide it." in response.text
        assert snapshot(olgas_manager_task) == before

    def test_reassign_to_the_requester_is_refused_with_the_reason(
        self, transition_url, client, admin_operator, manager_task
    ):
        client.force_login(admin_operator)
        before = snapshot(manager_task)

        response = client.post(
            transition_url(manager_task, "reassign"), {"to": "alice"}, follow=True
        )

        assert "Alice requested this expense, so it cannot be reassigned to Alice" in (
            response.text
        )
        assert snapshot(manager_task) == before


class TestEscalationsAndSubstitutes:
    def test_an_escalation_emails_no_decision_link_to_the_requester(
        self, start_expense, mailoutbox, django_capture_on_commit_callbacks
    ):
        task = start_expense(requester="bob").human_tasks.get()

        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=task.escalate_at + timedelta(minutes=1))

        assert [message.to for message in mailoutbox] == [["carol@example.com"]]
        assert not EmailLink.objects.filter(recipient__username="bob").exists()

    def test_a_manager_away_is_not_stood_in_for_by_the_requester(self, start_expense, carol, alice):
        Substitution.objects.create(
            user=carol,
            substitute=alice,
            starts_at=timezone.now() - timedelta(days=1),
            ends_at=timezone.now() + timedelta(days=1),
        )

        task = start_expense(requester="alice").human_tasks.get()

        assert (task.assignee, task.substitute_for) == (carol, None)


class TestPagesOfferOnlyWhatYouMayDo:
    def test_the_requester_sees_their_task_in_the_queue_without_decisions(
        self, client, bobs_finance_task, bob
    ):
        client.force_login(bob)

        response = client.get(reverse("approvals:inbox"), {"tab": "queue"})

        row = re.search(
            rf'<tr id="row-{bobs_finance_task.pk}">.*?</tr>', response.text, flags=re.S
        ).group(0)
        assert bobs_finance_task.title in row
        assert "You requested this expense, so you cannot decide it." in row
        assert "Claim" not in row
        assert "Approve" not in row
        assert "Reject" not in row
        assert 'type="checkbox"' not in row

    def test_another_finance_member_is_offered_the_decision(self, client, finance_task_of, bob):
        task = finance_task_of("alice")
        client.force_login(bob)

        response = client.get(reverse("approvals:inbox"), {"tab": "queue"})

        row = re.search(rf'<tr id="row-{task.pk}">.*?</tr>', response.text, flags=re.S).group(0)
        assert "Claim" in row
        assert "Approve" in row

    def test_the_task_page_shows_the_reason_instead_of_the_buttons(
        self, client, bobs_finance_task, bob
    ):
        client.force_login(bob)

        response = client.get(reverse("approvals:task", args=[bobs_finance_task.pk]))

        assert response.status_code == 200
        assert "You requested this expense, so you cannot decide it." in response.text
        assert ">Approve<" not in response.text
        assert ">Claim<" not in response.text
        assert ">Delegate<" not in response.text

    def test_the_manager_who_approved_sees_why_finance_is_not_theirs(
        self, client, finance_task_of, carol
    ):
        task = finance_task_of("alice")
        client.force_login(carol)

        response = client.get(reverse("approvals:task", args=[task.pk]))

        assert "You already approved this expense at its manager approval stage" in response.text
        assert ">Approve<" not in response.text
        assert ">Reassign<" in response.text  # as finance's manager she may hand it on

    def test_the_email_link_page_offers_the_requester_no_decision(
        self, client, bobs_finance_task, bob
    ):
        _, token = links.create_link(
            task=bobs_finance_task, recipient=bob, now=bobs_finance_task.created_at
        )
        client.force_login(bob)

        response = client.get(reverse("approvals:email_link", args=[token]))

        assert response.status_code == 200
        assert "You requested this expense, so you cannot decide it." in response.text
        assert 'name="confirm"' not in response.text
        assert "Confirm: approve" not in response.text
