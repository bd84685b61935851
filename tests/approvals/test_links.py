"""Email links: GET changes nothing; only the signed-in recipient decides, once."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from auditlog.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from approvals import human_tasks
from approvals.models import EmailLink
from approvals.notify import links
from approvals.states import Channel, TaskState
from workflows import engine

pytestmark = pytest.mark.django_db


@pytest.fixture
def link_for(manager_task):
    def make(user, *, now=None):
        _, token = links.create_link(task=manager_task, recipient=user, now=now or timezone.now())
        return reverse("approvals:email_link", args=[token])

    return make


def confirm(client, url: str, **data: str):
    """Open the link page signed in, then press its button, as the recipient would."""
    page = client.get(url)
    token = re.search(r'name="confirm" value="(\w+)"', page.text).group(1)
    return client.post(url, {"confirm": token, **data})


def problem_of(response) -> str:
    match = re.search(r'data-problem="(\w+)"', response.text)
    return match.group(1) if match else ""


class TestOpeningALink:
    def test_get_shows_the_task_and_changes_nothing(self, client, manager_task, link_for, carol):
        url = link_for(carol)
        before = LogEntry.objects.count()

        response = client.get(url)

        manager_task.refresh_from_db()
        assert response.status_code == 200
        assert response["Referrer-Policy"] == "no-referrer"
        assert manager_task.title in response.text
        assert "Sign in to decide" in response.text
        assert manager_task.state == TaskState.CLAIMED
        assert EmailLink.objects.get().used_at is None
        assert LogEntry.objects.count() == before

    def test_a_signed_in_recipient_sees_the_confirm_buttons(self, client, link_for, carol):
        client.force_login(carol)

        response = client.get(link_for(carol))

        assert "Confirm: approve" in response.text
        assert "Confirm: reject" in response.text

    def test_a_post_without_signing_in_goes_through_login_and_changes_nothing(
        self, client, manager_task, link_for, carol
    ):
        url = link_for(carol)

        response = client.post(url, {"outcome": "approved"})

        manager_task.refresh_from_db()
        assert response.status_code == 302
        assert response["Location"] == f"{reverse('login')}?next={quote(url)}"
        assert manager_task.state == TaskState.CLAIMED


class TestDecidingByLink:
    def test_the_recipient_decides_once_through_the_email_channel(
        self, client, manager_task, link_for, carol, drive
    ):
        client.force_login(carol)
        url = link_for(carol)

        response = confirm(client, url, outcome="approved", comment="From my phone")
        again = client.post(url, {"outcome": "approved"})

        manager_task.refresh_from_db()
        assert response.status_code == 200
        assert "You approved" in response.text
        assert (manager_task.outcome, manager_task.channel) == ("approved", Channel.EMAIL)
        assert LogEntry.objects.filter(additional_data__channel="email").count() == 1
        assert problem_of(again) == "used"
        assert again.status_code == 410
        assert drive(manager_task.run).state == "succeeded"

    def test_rejecting_by_link_needs_a_reason(self, client, manager_task, link_for, carol):
        client.force_login(carol)

        response = confirm(client, link_for(carol), outcome="rejected", comment="")

        manager_task.refresh_from_db()
        assert response.status_code == 422
        assert "a reason is required" in response.text
        assert manager_task.state == TaskState.CLAIMED
        assert EmailLink.objects.get().used_at is None

    def test_the_recipient_may_send_it_back_for_changes_with_a_reason(
        self, client, manager_task, link_for, carol, drive
    ):
        client.force_login(carol)
        url = link_for(carol)
        assert "Confirm: request changes" in client.get(url).text

        without = confirm(client, url, outcome="changes_requested", comment="")
        response = confirm(client, url, outcome="changes_requested", comment="Which train?")

        manager_task.refresh_from_db()
        assert without.status_code == 422
        assert "a reason is required" in without.text
        assert "You sent back for changes" in response.text
        assert (manager_task.outcome, manager_task.channel) == ("changes_requested", "email")
        assert drive(manager_task.run).human_tasks.get(kind="revision").assignee.username == (
            "alice"
        )


class TestRefusedLinks:
    def test_a_post_without_the_pages_confirmation_is_refused(
        self, client, manager_task, link_for, carol
    ):
        client.force_login(carol)

        response = client.post(link_for(carol), {"outcome": "approved"})

        manager_task.refresh_from_db()
        assert response.status_code == 403
        assert "Please confirm again" in response.text
        assert manager_task.state == TaskState.CLAIMED

    def test_an_expired_link(self, client, link_for, carol):
        url = link_for(carol, now=timezone.now() - timedelta(days=4))

        response = client.get(url)

        assert (response.status_code, problem_of(response)) == (410, "expired")
        assert "has expired" in response.text

    def test_a_tampered_link(self, client, link_for, carol):
        url = link_for(carol)

        response = client.get(url[:-3] + "xyz/")

        assert (response.status_code, problem_of(response)) == (403, "tampered")

    @pytest.mark.parametrize("token", ["a%00b", "a%00b:c", "a%01b", "a%20b", "a%7Fb", "%C3%A9"])
    def test_a_token_with_a_character_no_link_holds_gets_the_not_valid_page(
        self, client, carol, token
    ):
        client.force_login(carol)

        response = client.get(f"/email/{token}/")

        assert (response.status_code, problem_of(response)) == (400, "malformed")
        assert "This link is not valid" in response.text
        assert response["Referrer-Policy"] == "no-referrer"

    def test_a_malformed_token_is_refused_signed_out_and_on_post_alike(self, client, carol):
        opened = client.get("/email/a%00b/")
        client.force_login(carol)
        posted = client.post("/email/a%00b/", {"outcome": "approved", "confirm": "x"})

        assert (opened.status_code, problem_of(opened)) == (400, "malformed")
        assert (posted.status_code, problem_of(posted)) == (400, "malformed")

    def test_a_stale_link_after_the_task_was_reassigned(
        self, client, manager_task, link_for, carol
    ):
        url = link_for(carol)
        human_tasks.reassign_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=Channel.INBOX
        )
        client.force_login(carol)

        response = client.post(url, {"outcome": "approved"})

        manager_task.refresh_from_db()
        assert (response.status_code, problem_of(response)) == (410, "stale")
        assert manager_task.state == TaskState.CLAIMED
        assert manager_task.assignee.username == "bob"

    def test_a_forwarded_link(self, client, manager_task, link_for, carol, bob):
        url = link_for(carol)
        client.force_login(bob)

        response = client.post(url, {"outcome": "approved"})

        manager_task.refresh_from_db()
        assert (response.status_code, problem_of(response)) == (403, "forwarded")
        assert manager_task.state == TaskState.CLAIMED


class TestEscalationEmail:
    def test_the_emailed_link_opens_the_task(
        self, client, manager_task, bob, mailoutbox, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=manager_task.escalate_at + timedelta(minutes=1))
        to_bob = next(m for m in mailoutbox if m.to == ["bob@example.com"])
        path = re.search(r"http://[^/]+(/email/\S+/)", to_bob.body).group(1)
        client.force_login(bob)

        response = confirm(client, path, outcome="approved")

        manager_task.refresh_from_db()
        assert "You approved" in response.text
        assert manager_task.decided_by == bob


class TestALinkToATaskWithAForm:
    @pytest.fixture
    def url(self, finance_task, bob):
        _, token = links.create_link(task=finance_task, recipient=bob, now=timezone.now())
        return reverse("approvals:email_link", args=[token])

    def test_the_confirm_page_shows_the_form(self, client, url, bob):
        client.force_login(bob)

        page = client.get(url).text

        assert 'name="form-cost_centre"' in page
        assert "required to approve; rejecting needs only a reason" in page

    def test_approving_without_the_form_is_refused_beside_the_box_and_the_link_stays_unused(
        self, client, url, bob, finance_task
    ):
        client.force_login(bob)

        response = confirm(client, url, outcome="approved", comment="ok")

        assert response.status_code == 422
        assert "Fill in the form to approve: Cost centre: This is required." in response.text
        assert 'id="field-form-cost_centre-error">This is required.' in response.text
        assert ">ok</textarea>" in response.text
        assert EmailLink.objects.get().used_at is None
        finance_task.refresh_from_db()
        assert finance_task.state == TaskState.OPEN

    def test_the_link_approves_with_the_values_once_they_fit(self, client, url, bob, finance_task):
        client.force_login(bob)
        confirm(client, url, outcome="approved", **{"form-cost_centre": "12"})

        response = confirm(client, url, outcome="approved", **{"form-cost_centre": "FIN-1200"})

        assert response.status_code == 200
        assert "You approved" in response.text
        finance_task.refresh_from_db()
        assert (finance_task.channel, finance_task.form_values) == (
            Channel.EMAIL,
            {"cost_centre": "FIN-1200"},
        )
        assert EmailLink.objects.get().used_at is not None

    def test_rejecting_by_link_ignores_the_empty_form(self, client, url, bob, finance_task):
        client.force_login(bob)

        response = confirm(client, url, outcome="rejected", comment="No budget left")

        assert response.status_code == 200
        finance_task.refresh_from_db()
        assert (finance_task.outcome, finance_task.form_values) == ("rejected", {})
