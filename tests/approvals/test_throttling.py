"""Throttling failed sign-ins, admin logins and email links: per account and per address."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.audit import verify_audit_chain
from approvals.models import EmailLink
from approvals.notify import links

pytestmark = pytest.mark.django_db

LIMIT = 3
LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT


def sign_in(username: str, password: str, *, address: str, path: str = LOGIN):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def guess(username: str, *, address: str, times: int = LIMIT, path: str = LOGIN) -> list[int]:
    return [
        sign_in(username, "wrong-password", address=address, path=path).status_code
        for _ in range(times)
    ]


class TestSignInLockout:
    def test_wrong_passwords_up_to_the_limit_then_even_the_right_one_is_refused_with_why(
        self, people
    ):
        statuses = guess("alice", address="10.0.0.1")

        response = sign_in("alice", "baton-demo", address="10.0.0.1")

        assert statuses == [200] * (LIMIT - 1) + [429]
        assert response.status_code == 429
        assert "Too many failed attempts" in response.text
        assert "ask an operator to unlock it" in response.text
        assert 0 < int(response["Retry-After"]) <= 15 * 60
        assert "_auth_user_id" not in response.client.session

    def test_the_account_is_locked_from_every_address(self, people):
        guess("alice", address="10.0.0.1")

        response = sign_in("alice", "baton-demo", address="10.0.0.2")

        assert response.status_code == 429

    def test_the_address_is_locked_for_every_account(self, people):
        guess("alice", address="10.0.0.1")

        response = sign_in("bob", "baton-demo", address="10.0.0.1")

        assert response.status_code == 429

    def test_another_account_from_another_address_signs_in(self, people):
        guess("alice", address="10.0.0.1")
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 429

        response = sign_in("bob", "baton-demo", address="10.0.0.2")

        assert response.status_code == 302
        assert response.url == "/"

    def test_guessing_many_accounts_from_one_address_locks_the_address(self, people):
        for name in ("alice", "bob", "nobody"):
            guess(name, address="10.0.0.1", times=1)

        response = sign_in("carol", "baton-demo", address="10.0.0.1")

        assert response.status_code == 429
        assert sign_in("carol", "baton-demo", address="10.0.0.2").status_code == 302

    def test_attempts_while_locked_do_not_extend_the_lockout(self, people):
        guess("alice", address="10.0.0.1")
        first = int(sign_in("alice", "baton-demo", address="10.0.0.1")["Retry-After"])

        guess("alice", address="10.0.0.1", times=5)

        assert AccessAttempt.objects.get().failures_since_start == LIMIT
        assert int(sign_in("alice", "baton-demo", address="10.0.0.1")["Retry-After"]) <= first

    def test_a_forged_forwarded_for_header_does_not_change_the_address_counted(self, people):
        for fake in ("1.1.1.1", "2.2.2.2", "3.3.3.3"):
            Client(REMOTE_ADDR="10.0.0.1").post(
                LOGIN,
                {"username": "alice", "password": "wrong"},
                headers={"X-Forwarded-For": fake},
            )

        assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.0.0.1"}


class TestAdminLoginLockout:
    def test_the_admin_login_is_behind_the_same_throttle(self, people):
        statuses = guess("olga", address="10.0.0.1", path=ADMIN_LOGIN)

        response = sign_in("olga", "baton-demo", address="10.0.0.1", path=ADMIN_LOGIN)

        assert statuses[-1] == 429
        assert response.status_code == 429
        assert "Too many failed attempts" in response.text
        assert sign_in("olga", "baton-demo", address="10.0.0.1").status_code == 429


class TestLockoutAudit:
    def test_a_lockout_is_written_once_to_the_audit_log_naming_account_and_address(self, people):
        guess("alice", address="10.0.0.1")
        guess("alice", address="10.0.0.1")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_pk == str(people["alice"].pk)
        assert entry.object_repr == "Locked out: account alice and address 10.0.0.1"
        assert entry.remote_addr == "10.0.0.1"
        assert entry.additional_data["channel"] == "inbox"
        assert f"after {LIMIT} failed attempts" in entry.additional_data["comment"]
        assert verify_audit_chain().intact

    def test_an_address_lockout_over_unknown_usernames_keeps_no_typed_username(self, people):
        for typed in ("hunter2", "correct horse", "Summer2024!"):
            guess(typed, address="10.0.0.9", times=1)

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_repr == "Locked out: address 10.0.0.9"
        assert "Summer2024!" not in str(entry.additional_data)
        assert "Summer2024!" not in entry.object_repr

    def test_an_admin_lockout_is_recorded_with_the_admin_channel(self, people):
        guess("olga", address="10.0.0.1", path=ADMIN_LOGIN)

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.additional_data["channel"] == "admin"


@pytest.fixture
def link_for(manager_task):
    def make(user) -> str:
        _, token = links.create_link(task=manager_task, recipient=user, now=timezone.now())
        return reverse("approvals:email_link", args=[token])

    return make


def open_link(url: str, *, address: str, as_user=None):
    browser = Client(REMOTE_ADDR=address)
    if as_user is not None:
        browser.force_login(as_user)
    return browser.get(url)


TAMPERED = "/email/1:forged-signature/"


class TestEmailLinkLockout:
    def test_tampered_links_up_to_the_limit_then_even_a_good_one_is_refused_with_why(
        self, link_for, carol
    ):
        good = link_for(carol)
        statuses = [open_link(TAMPERED, address="10.0.0.1").status_code for _ in range(LIMIT)]

        response = open_link(good, address="10.0.0.1")

        assert statuses == [403] * (LIMIT - 1) + [429]
        assert response.status_code == 429
        assert "Too many failed attempts" in response.text
        assert "Nothing was changed" in response.text
        assert response["Referrer-Policy"] == "no-referrer"
        assert 0 < int(response["Retry-After"]) <= 15 * 60

    def test_a_good_link_from_another_address_still_opens(self, link_for, carol):
        for _ in range(LIMIT):
            open_link(TAMPERED, address="10.0.0.1")

        response = open_link(link_for(carol), address="10.0.0.2")

        assert response.status_code == 200

    def test_opening_someone_elses_links_locks_the_account_that_opens_them(
        self, link_for, carol, people
    ):
        eve = people["eve"]
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            open_link(link_for(carol), address=address, as_user=eve)

        refused = open_link(link_for(eve), address="10.0.0.4", as_user=eve)
        carols = open_link(link_for(carol), address="10.0.0.4", as_user=carol)

        assert refused.status_code == 429
        assert carols.status_code == 200
        assert sign_in("eve", "baton-demo", address="10.0.0.5").status_code == 429

    def test_used_links_do_not_count_towards_a_lockout(self, link_for, carol):
        url = link_for(carol)
        EmailLink.objects.update(used_at=timezone.now())

        statuses = [open_link(url, address="10.0.0.1").status_code for _ in range(LIMIT + 1)]

        assert statuses == [410] * (LIMIT + 1)
        assert not LogEntry.objects.filter(additional_data__event="locked_out").exists()

    def test_an_email_link_lockout_is_audited_with_the_email_channel(self, link_for, carol, people):
        for _ in range(LIMIT):
            open_link(link_for(carol), address="10.0.0.1", as_user=people["eve"])

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_pk == str(people["eve"].pk)
        assert entry.additional_data["channel"] == "email"

    def test_unlocking_the_address_lets_a_good_link_open_again(self, link_for, carol):
        good = link_for(carol)
        for _ in range(LIMIT):
            open_link(TAMPERED, address="10.0.0.1")
        assert open_link(good, address="10.0.0.1").status_code == 429

        call_command("axes_reset_ip", "10.0.0.1")

        assert open_link(good, address="10.0.0.1").status_code == 200


class TestUnlock:
    def test_resetting_the_username_restores_access(self, people):
        guess("alice", address="10.0.0.1")
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 429

        call_command("axes_reset_username", "alice")

        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 302

    def test_resetting_the_address_restores_access_from_it(self, people):
        for name in ("x", "y", "z"):
            guess(name, address="10.0.0.1", times=1)
        assert sign_in("bob", "baton-demo", address="10.0.0.1").status_code == 429

        call_command("axes_reset_ip", "10.0.0.1")

        assert sign_in("bob", "baton-demo", address="10.0.0.1").status_code == 302

    def test_an_admin_deleting_the_access_attempts_restores_access(self, people, admin_user):
        guess("alice", address="10.0.0.1")
        admin = Client(REMOTE_ADDR="10.0.0.5")
        admin.force_login(admin_user)

        response = admin.post(
            "/admin/axes/accessattempt/",
            {
                "action": "delete_selected",
                "_selected_action": list(AccessAttempt.objects.values_list("pk", flat=True)),
                "post": "yes",
            },
        )

        assert response.status_code == 302
        assert not AccessAttempt.objects.exists()
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 302
