"""Data-entry tasks in the inbox's pages: the Complete form, its draft kept as typed, errors."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.models import HumanTask
from approvals.notify import links
from approvals.states import TaskState

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
GOOD = {"form-account_holder": "Alice Archer", "form-iban": "DE89370400440532013000"}


@pytest.fixture
def entry_task(people, start) -> HumanTask:
    run = start("test_bank_details", {"requester": "alice", "amount": "120.00"})
    return run.human_tasks.get()


class TestThePage:
    def test_it_offers_complete_with_a_debounced_draft_and_no_approve_or_reject(
        self, client, bob, entry_task
    ):
        client.force_login(bob)

        page = client.get(reverse("approvals:task", args=[entry_task.pk])).text

        assert ">Complete</button>" in page
        assert 'hx-trigger="input changed delay:500ms"' in page
        assert f'hx-post="{reverse("approvals:save_draft", args=[entry_task.pk])}"' in page
        assert ">Approve</button>" not in page
        assert ">Reject</button>" not in page

    def test_the_inbox_row_says_complete_instead_of_approve(self, client, bob, entry_task):
        client.force_login(bob)

        page = client.get(reverse("approvals:inbox"), {"tab": "queue"}).text

        assert "Complete…" in page
        assert 'aria-label="Approve Bank details' not in page
        assert f'value="{entry_task.pk}:' not in page  # not offered to bulk approval

    def test_the_requester_sees_why_they_may_not(self, client, alice, groups, entry_task):
        alice.groups.add(groups["finance"])
        client.force_login(alice)

        page = client.get(reverse("approvals:task", args=[entry_task.pk])).text

        assert "You requested this test bank details, so you cannot decide it." in page
        assert ">Complete</button>" not in page


class TestDrafts:
    def test_htmx_saves_the_draft_and_a_reload_shows_it(self, client, bob, entry_task):
        client.force_login(bob)

        saved = client.post(
            reverse("approvals:save_draft", args=[entry_task.pk]),
            {"form-iban": "DE89 3704", "form-account_holder": ""},
            **HTMX,
        )
        page = client.get(reverse("approvals:task", args=[entry_task.pk])).text

        assert saved.status_code == 200
        assert saved.text.strip().startswith('<p id="draft-status"')
        assert "Draft saved at" in saved.text
        assert 'value="DE89 3704"' in page
        entry_task.refresh_from_db()
        assert entry_task.draft == {"iban": "DE89 3704"}

    def test_without_htmx_it_saves_and_comes_back_to_the_task(self, client, bob, entry_task):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:save_draft", args=[entry_task.pk]), {"form-iban": "DE"}
        )

        assert response.status_code == 302
        assert response["Location"] == reverse("approvals:task", args=[entry_task.pk])

    def test_someone_who_may_not_complete_it_gets_the_reason_in_the_status_line(
        self, client, alice, groups, entry_task
    ):
        alice.groups.add(groups["finance"])
        client.force_login(alice)

        response = client.post(
            reverse("approvals:save_draft", args=[entry_task.pk]), {"form-iban": "DE"}, **HTMX
        )

        assert response.status_code == 403
        assert "The draft was not saved: You requested this" in response.text
        entry_task.refresh_from_db()
        assert entry_task.draft == {}


class TestCompleting:
    def test_invalid_values_come_back_beside_their_boxes_and_are_kept_as_the_draft(
        self, client, bob, entry_task
    ):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:complete", args=[entry_task.pk]),
            {"form-account_holder": "Alice Archer", "form-iban": "DE89 oops"},
            **HTMX,
        )

        assert response.status_code == 422
        assert "Nothing was completed" in response.text
        assert 'value="DE89 oops"' in response.text
        assert 'value="Alice Archer"' in response.text
        entry_task.refresh_from_db()
        assert entry_task.state == TaskState.OPEN
        assert entry_task.draft == {"account_holder": "Alice Archer", "iban": "DE89 oops"}

    def test_valid_values_complete_it_and_the_run_goes_on(self, client, bob, entry_task, drive):
        client.force_login(bob)

        response = client.post(reverse("approvals:complete", args=[entry_task.pk]), GOOD)

        assert response.status_code == 302
        entry_task.refresh_from_db()
        assert (entry_task.state, entry_task.outcome) == (TaskState.COMPLETED, "completed")
        run = drive(entry_task.run)
        assert run.results["pay"]["iban"] == GOOD["form-iban"]
        page = client.get(reverse("approvals:task", args=[entry_task.pk])).text
        assert "Completed</strong> by Bob" in page
        assert "DE89370400440532013000" in page


class TestAnEmailedLink:
    def test_it_sends_the_recipient_to_the_task_page_instead_of_deciding(
        self, client, bob, entry_task
    ):
        _, token = links.create_link(task=entry_task, recipient=bob, now=timezone.now())
        client.force_login(bob)

        page = client.get(reverse("approvals:email_link", args=[token])).text

        assert "fill in a form and complete it" in page
        assert reverse("approvals:task", args=[entry_task.pk]) in page
        assert "Confirm: approve" not in page


class TestInGerman:
    GERMAN = {"Accept-Language": "de-DE,de;q=0.9"}

    def test_the_page_offers_complete_and_save_draft_in_german(self, client, bob, entry_task):
        client.force_login(bob)

        page = client.get(reverse("approvals:task", args=[entry_task.pk]), headers=self.GERMAN).text

        assert ">Abschließen</button>" in page
        assert ">Entwurf speichern</button>" in page
        assert "Was Sie eingeben, wird als Entwurf behalten" in page

    def test_a_refused_completion_says_why_in_german_and_keeps_the_draft(
        self, client, bob, entry_task
    ):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:complete", args=[entry_task.pk]),
            {"form-account_holder": "Alice Archer", "form-iban": "DE89 oops"},
            headers=self.GERMAN,
            **HTMX,
        )

        assert response.status_code == 422
        assert "Nichts wurde abgeschlossen" in response.text
        entry_task.refresh_from_db()
        assert entry_task.draft == {"account_holder": "Alice Archer", "iban": "DE89 oops"}
