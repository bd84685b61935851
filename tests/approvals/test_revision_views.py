"""The pages of a request sent back for changes: carol's Request changes on the task page,
alice's change-and-resubmit form, and who is refused there, with why."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.human_tasks import revisions
from approvals.models import Preferences
from approvals.states import Outcome, TaskKind, TaskState
from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db

CHANGED = {"title": "Train to Lyon", "amount": "95.00", "currency": "EUR", "description": ""}


@pytest.fixture
def browser(people):
    def signed_in(username: str) -> Client:
        client = Client()
        client.force_login(people[username])
        return client

    return signed_in


@pytest.fixture
def sent_back(manager_task, browser, drive):
    """carol sent alice's expense back from her task page."""
    browser("carol").post(
        f"/tasks/{manager_task.pk}/request-changes/", {"reason": "Add the ticket number."}
    )
    return drive(WorkflowRun.objects.get(pk=manager_task.run_id))


class TestRequestChangesOnTheTaskPage:
    def test_the_panel_offers_it_where_the_approval_allows_it(self, manager_task, browser):
        page = browser("carol").get(f"/tasks/{manager_task.pk}/").content.decode()

        assert "Request changes" in page
        assert "What should change (required; the requester reads it)" in page

    def test_htmx_without_a_reason_answers_the_panel_with_the_refusal(self, manager_task, browser):
        response = browser("carol").post(
            f"/tasks/{manager_task.pk}/request-changes/",
            {"reason": ""},
            headers={"HX-Request": "true", "HX-Target": "decision-panel"},
        )

        manager_task.refresh_from_db()
        assert response.status_code == 422
        assert "a reason is required" in response.content.decode()
        assert manager_task.state == TaskState.CLAIMED

    def test_sent_back_it_ends_the_task_and_redirects_to_it(self, sent_back):
        asked = sent_back.human_tasks.get(kind=TaskKind.APPROVAL)

        assert asked.outcome == Outcome.CHANGES_REQUESTED
        assert asked.channel == "inbox"

    def test_past_its_rounds_the_panel_says_why_instead(
        self, sent_back, browser, drive, alice, carol
    ):
        def resubmit(amount: str) -> None:
            revisions.resubmit_request(
                task_id=revisions.open_revision(sent_back).pk,
                user=alice,
                input={**CHANGED, "amount": amount},
                channel="inbox",
            )

        resubmit("95.00")
        second = sent_back.human_tasks.get(state=TaskState.CLAIMED)
        browser("carol").post(f"/tasks/{second.pk}/request-changes/", {"reason": "Again"})
        drive(sent_back)
        resubmit("90.00")
        third = sent_back.human_tasks.get(state=TaskState.CLAIMED)

        page = browser("carol").get(f"/tasks/{third.pk}/").content.decode()

        assert "Request changes</button>" not in page
        assert "already sent back for changes 2 times" in page
        assert "Approve</button>" in page


class TestTheRevisionPages:
    def test_the_revision_task_s_page_leads_to_the_form(self, sent_back, browser):
        task = revisions.open_revision(sent_back)

        response = browser("alice").get(f"/tasks/{task.pk}/")

        assert response.status_code == 302
        assert response["Location"] == f"/requests/{sent_back.pk}/revise/"

    def test_the_request_page_offers_alice_the_form_and_tells_carol_who_changes_it(
        self, sent_back, browser
    ):
        mine = browser("alice").get(f"/requests/{sent_back.pk}/").content.decode()
        hers = browser("carol").get(f"/requests/{sent_back.pk}/").content.decode()

        assert "Change and resubmit…" in mine
        assert "Add the ticket number." in mine
        assert "Change and resubmit…" not in hers
        assert "Waiting for alice to change and resubmit it." in hers

    def test_the_form_is_filled_in_with_the_request_as_it_stands(self, sent_back, browser):
        page = browser("alice").get(f"/requests/{sent_back.pk}/revise/").content.decode()

        assert 'name="amount" type="text" value="120.00"' in page
        assert 'value="Train to Lyon"' in page
        assert 'name="requester"' not in page

    def test_carol_is_refused_the_form_with_the_reason(self, sent_back, browser):
        response = browser("carol").get(f"/requests/{sent_back.pk}/revise/")

        assert response.status_code == 403
        assert "reviewers ask for changes, they do not make them" in response.content.decode()

    def test_an_outsider_finds_no_such_request(self, sent_back, browser):
        assert browser("eve").get(f"/requests/{sent_back.pk}/revise/").status_code == 404

    def test_a_request_not_sent_back_has_nothing_to_resubmit(self, manager_task, browser):
        response = browser("alice").get(f"/requests/{manager_task.run_id}/revise/")

        assert response.status_code == 409
        assert "not waiting for changes" in response.content.decode()

    def test_an_invalid_field_comes_back_beside_its_box_and_nothing_changes(
        self, sent_back, browser
    ):
        response = browser("alice").post(
            f"/requests/{sent_back.pk}/revise/", {**CHANGED, "amount": "12.345"}
        )

        sent_back.refresh_from_db()
        page = response.content.decode()
        assert response.status_code == 422
        assert "Your request was not resubmitted" in page
        assert 'id="field-amount-error">Enter an amount with up to two decimals' in page
        assert 'value="12.345"' in page
        assert sent_back.input["amount"] == "120.00"
        assert revisions.open_revision(sent_back) is not None

    def test_resubmitting_lands_on_the_request_with_the_diff(self, sent_back, browser, drive):
        response = browser("alice").post(
            f"/requests/{sent_back.pk}/revise/", {**CHANGED, "note": "Ticket added"}, follow=True
        )

        page = response.content.decode()
        assert response.redirect_chain == [(f"/requests/{sent_back.pk}/", 302)]
        assert "Resubmitted: it is back with whoever asked for the changes." in page
        assert '<th scope="row">Amount</th><td><del>€120.00</del></td><td><ins>€95.00</ins>' in page
        assert sent_back.human_tasks.get(state=TaskState.CLAIMED).node == "manager_approval"

    def test_the_diff_is_written_in_the_readers_language_and_money(self, sent_back, browser, alice):
        Preferences.objects.create(user=alice, language="de")

        browser("alice").post(f"/requests/{sent_back.pk}/revise/", CHANGED)
        page = browser("alice").get(f"/requests/{sent_back.pk}/").content.decode()

        assert '<th scope="row">Betrag</th><td><del>120,00 €</del></td><td><ins>95,00 €</ins>' in (
            page
        )

    def test_an_amount_whose_currency_changed_too_is_shown_in_each_ones_currency(
        self, sent_back, browser
    ):
        browser("alice").post(f"/requests/{sent_back.pk}/revise/", {**CHANGED, "currency": "USD"})
        page = browser("alice").get(f"/requests/{sent_back.pk}/").content.decode()

        assert "<td><del>€120.00</del></td><td><ins>$95.00</ins>" in page
        assert "<td><del>EUR</del></td><td><ins>USD</ins>" in page
