"""Throttling failed sign-ins, admin logins and email links: one client's failures never
lock out anyone else's good credentials."""

from __future__ import annotations

import ipaddress
import re
from io import StringIO

import pytest
from auditlog.models import LogEntry
from axes.models import AccessAttempt
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.audit import verify_audit_chain
from approvals.models import EmailLink
from approvals.notify import links
from workflows.tokens import issue_token

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

    def test_the_account_still_signs_in_from_another_address(self, people):
        guess("alice", address="10.0.0.1")

        response = sign_in("alice", "baton-demo", address="10.0.0.2")

        assert response.status_code == 302

    def test_another_account_signs_in_from_the_guessers_address(self, people):
        guess("alice", address="10.0.0.1")
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 429

        response = sign_in("bob", "baton-demo", address="10.0.0.1")

        assert response.status_code == 302
        assert response.url == "/"

    def test_guessing_an_account_from_several_addresses_locks_it_at_each(self, people):
        for address in ("10.0.0.1", "10.0.0.2"):
            guess("alice", address=address)

        refused = [
            sign_in("alice", "baton-demo", address=a).status_code for a in ("10.0.0.1", "10.0.0.2")
        ]

        assert refused == [429, 429]
        assert sign_in("alice", "baton-demo", address="10.0.0.3").status_code == 302

    def test_unknown_usernames_are_counted_like_known_ones(self, people):
        statuses = guess("nobody", address="10.0.0.1")

        assert statuses == [200] * (LIMIT - 1) + [429]
        assert sign_in("carol", "baton-demo", address="10.0.0.1").status_code == 302

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


PROXY = "127.0.0.1"


def sign_in_through_proxy(username: str, password: str, *, client: str, sent: str = ""):
    """Sign in as a client behind the proxy at PROXY, which appends the client's address
    to whatever X-Forwarded-For the client sent (as Caddy does)."""
    forwarded = f"{sent}, {client}" if sent else client
    return Client(REMOTE_ADDR=PROXY).post(
        LOGIN,
        {"username": username, "password": password},
        headers={"X-Forwarded-For": forwarded},
    )


class TestBehindATrustedProxy:
    @pytest.fixture(autouse=True)
    def trusted_proxy(self, settings):
        settings.BATON_TRUSTED_PROXY_COUNT = 1

    def test_failures_are_counted_against_the_client_the_proxy_names(self, people):
        for _ in range(LIMIT):
            sign_in_through_proxy("alice", "wrong", client="203.0.113.7")

        assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.7"}
        assert sign_in_through_proxy("alice", "baton-demo", client="203.0.113.7").status_code == 429
        assert (
            sign_in_through_proxy("alice", "baton-demo", client="198.51.100.2").status_code == 302
        )

    def test_a_client_cannot_pick_its_address_by_sending_its_own_forwarded_for(self, people):
        for fake in ("1.1.1.1", "2.2.2.2", "3.3.3.3"):
            sign_in_through_proxy("alice", "wrong", client="203.0.113.7", sent=fake)

        assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.7"}
        assert sign_in_through_proxy("alice", "baton-demo", client="203.0.113.7").status_code == 429

    def test_a_peer_outside_the_named_proxies_is_taken_at_its_own_address(self, people, settings):
        settings.BATON_TRUSTED_PROXY_COUNT = 0
        settings.BATON_TRUSTED_PROXIES = (ipaddress.ip_network(PROXY),)
        for _ in range(LIMIT):
            Client(REMOTE_ADDR="10.9.9.9").post(
                LOGIN,
                {"username": "alice", "password": "wrong"},
                headers={"X-Forwarded-For": "203.0.113.7"},
            )

        assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.9.9.9"}

    def test_the_audit_records_the_client_the_proxy_names(self, people):
        for _ in range(LIMIT):
            sign_in_through_proxy("alice", "wrong", client="203.0.113.7")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.remote_addr == "203.0.113.7"
        assert entry.object_repr == "Locked out: account alice at address 203.0.113.7"


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
        assert entry.object_repr == "Locked out: account alice at address 10.0.0.1"
        assert entry.remote_addr == "10.0.0.1"
        assert entry.additional_data["channel"] == "inbox"
        assert f"after {LIMIT} failed attempts" in entry.additional_data["comment"]
        assert verify_audit_chain().intact

    def test_a_lockout_of_an_unknown_username_keeps_no_typed_username(self, people):
        guess("Summer2024!", address="10.0.0.9")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_repr == "Locked out: an unknown username at address 10.0.0.9"
        assert "Summer2024!" not in str(entry.additional_data)
        assert "Summer2024!" not in entry.object_repr

    def test_a_sign_in_typing_a_tokens_counter_name_is_not_recorded_as_that_token(self, people):
        _, secret = issue_token(user=people["alice"])
        guess(f"api-token:{secret.split('_')[1]}", address="10.0.0.9")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_repr == "Locked out: an unknown username at address 10.0.0.9"
        assert entry.content_type.model == "accessattempt"

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
    def test_tampered_links_up_to_the_limit_then_more_are_refused_with_why(self):
        statuses = [open_link(TAMPERED, address="10.0.0.1").status_code for _ in range(LIMIT)]

        response = open_link(TAMPERED, address="10.0.0.1")

        assert statuses == [403] * (LIMIT - 1) + [429]
        assert response.status_code == 429
        assert "Too many failed attempts" in response.text
        assert "Nothing was changed" in response.text
        assert response["Referrer-Policy"] == "no-referrer"
        assert 0 < int(response["Retry-After"]) <= 15 * 60

    def test_a_good_link_still_opens_from_the_address_that_sent_tampered_ones(
        self, link_for, carol
    ):
        for _ in range(LIMIT):
            open_link(TAMPERED, address="10.0.0.1")

        response = open_link(link_for(carol), address="10.0.0.1")

        assert response.status_code == 200

    def test_opening_someone_elses_links_locks_the_account_that_opens_them_there(
        self, link_for, carol, people
    ):
        eve = people["eve"]
        for _ in range(LIMIT):
            open_link(link_for(carol), address="10.0.0.1", as_user=eve)

        refused = open_link(link_for(carol), address="10.0.0.1", as_user=eve)
        carols = open_link(link_for(carol), address="10.0.0.1", as_user=carol)

        assert refused.status_code == 429
        assert carols.status_code == 200
        assert sign_in("eve", "baton-demo", address="10.0.0.1").status_code == 429
        assert sign_in("carol", "baton-demo", address="10.0.0.1").status_code == 302

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

    def test_a_tampered_link_lockout_names_the_address_alone(self):
        for _ in range(LIMIT):
            open_link(TAMPERED, address="10.0.0.1")

        entry = LogEntry.objects.get(additional_data__event="locked_out")
        assert entry.object_repr == ("Locked out: address 10.0.0.1 (credentials naming no account)")


def unlock(**options):
    out = StringIO()
    call_command("unlock", stdout=out, **options)
    return out.getvalue()


def unlocks():
    return LogEntry.objects.filter(additional_data__event="unlocked")


class TestUnlock:
    def test_unlocking_an_account_restores_it_and_audits_who_and_why(self, people):
        guess("alice", address="10.0.0.1")
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 429

        said = unlock(username="alice", by="olga", reason="Ticket 42: alice forgot her password")

        assert "Unlocked" in said
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 302
        entry = unlocks().get()
        assert entry.actor == people["olga"]
        assert entry.object_pk == str(people["alice"].pk)
        assert entry.object_repr == "Unlocked: account alice"
        assert entry.additional_data["comment"] == "Ticket 42: alice forgot her password"
        assert entry.additional_data["channel"] == "admin"
        assert verify_audit_chain().intact

    def test_unlocking_an_address_clears_only_that_address(self, people):
        guess("alice", address="10.0.0.1")
        guess("alice", address="10.0.0.2")

        unlock(address="10.0.0.1", by="olga", reason="The office's NAT")

        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 302
        assert sign_in("alice", "baton-demo", address="10.0.0.2").status_code == 429
        assert unlocks().get().object_repr == "Unlocked: address 10.0.0.1"

    def test_unlocking_an_account_at_an_address_clears_that_pair_only(self, people):
        guess("alice", address="10.0.0.1")
        guess("alice", address="10.0.0.2")

        unlock(username="alice", address="10.0.0.2", by="olga", reason="Her laptop")

        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 429
        assert sign_in("alice", "baton-demo", address="10.0.0.2").status_code == 302
        assert unlocks().get().object_repr == "Unlocked: account alice at address 10.0.0.2"

    @pytest.mark.parametrize(
        ("options", "refusal"),
        [
            ({"username": "alice", "reason": "Ticket 42"}, "Say who you are with --by USERNAME"),
            ({"username": "alice", "by": "olga"}, "Say why (--reason)"),
            ({"username": "alice", "by": "olga", "reason": "   "}, "Say why (--reason)"),
            ({"username": "alice", "by": "nobody", "reason": "x"}, "--by names no active account"),
            ({"by": "olga", "reason": "Ticket 42"}, "Name what to unlock"),
        ],
    )
    def test_a_missing_who_why_or_what_is_refused_and_nothing_is_unlocked(
        self, people, options, refusal
    ):
        guess("alice", address="10.0.0.1")

        with pytest.raises(CommandError, match=re.escape(refusal)) as refused:
            unlock(**options)

        assert str(refused.value).startswith("Nothing was unlocked.")
        assert sign_in("alice", "baton-demo", address="10.0.0.1").status_code == 429
        assert not unlocks().exists()

    def test_nothing_locked_is_said_and_not_audited(self, people):
        with pytest.raises(CommandError, match="no failures are counted for account bob"):
            unlock(username="bob", by="olga", reason="Asked to")

        assert not unlocks().exists()

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
