"""Throttling failed sign-ins: per account and per address, audited, and unlockable."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client

from approvals.audit import verify_audit_chain

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
        assert verify_audit_chain() is None

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
