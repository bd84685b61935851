"""The account a provider's sign-in describes (approvals.sso.accounts), and the backends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from auditlog.models import LogEntry
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group

from approvals import audit
from approvals.sso.accounts import sign_in_account
from approvals.sso.claims import Account

User = get_user_model()
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def account(**overrides) -> Account:
    values = {
        "username": "dana",
        "email": "dana@example.com",
        "first_name": "Dana",
        "last_name": "Doe",
        "groups": frozenset({"finance"}),
        "is_staff": None,
        "is_operator": None,
    }
    return Account(**{**values, **overrides})


@pytest.mark.django_db
class TestSignInAccount:
    def test_the_first_sign_in_makes_the_account_without_a_password_and_its_new_groups(self):
        user = sign_in_account(account=account(groups=frozenset({"finance", "auditors"})), now=NOW)

        assert (user.username, user.email, user.last_name) == ("dana", "dana@example.com", "Doe")
        assert not user.has_usable_password()
        assert set(user.groups.values_list("name", flat=True)) == {"auditors", "finance"}

    def test_groups_follow_the_claim_the_ones_it_no_longer_names_are_left(self, groups, bob):
        sign_in_account(account=account(username="bob", groups=frozenset({"legal"})), now=NOW)

        assert list(bob.groups.values_list("name", flat=True)) == ["legal"]
        assert set(Group.objects.values_list("name", flat=True)) >= {"finance", "security"}

    def test_without_the_groups_claim_groups_are_left_as_they_are(self, bob):
        sign_in_account(account=account(username="bob", groups=None), now=NOW)

        assert set(bob.groups.values_list("name", flat=True)) == {"finance", "security"}

    def test_an_operator_claim_grants_staff_and_operating(self):
        sign_in_account(account=account(is_operator=True, is_staff=False), now=NOW)

        operator = User.objects.get(username="dana")
        assert operator.is_staff
        assert operator.has_perm("workflows.operate_workflowrun")
        assert operator.has_perm("approvals.operate_humantask")

    def test_an_operator_whose_claim_is_gone_loses_staff_and_operating(self):
        sign_in_account(account=account(is_operator=True, is_staff=False), now=NOW)

        sign_in_account(account=account(is_operator=False, is_staff=False), now=NOW)

        former = User.objects.get(username="dana")
        assert not former.is_staff
        assert not former.has_perm("workflows.operate_workflowrun")

    def test_rights_without_a_rule_are_left_to_the_admin(self, olga):
        olga.is_staff = True
        olga.save()

        sign_in_account(account=account(username="olga", is_staff=None, is_operator=None), now=NOW)

        olga.refresh_from_db()
        assert olga.is_staff


@pytest.mark.django_db
class TestAuditOfSignIns:
    def entries(self) -> list[LogEntry]:
        return list(LogEntry.objects.filter(additional_data__event="account_synced").order_by("pk"))

    def test_a_sign_in_that_changes_groups_writes_what_changed_to_the_chain(self, bob):
        sign_in_account(
            account=account(username="bob", groups=frozenset({"legal"})),
            now=NOW,
            remote_addr="203.0.113.7",
        )

        (entry,) = self.entries()
        assert entry.actor == bob
        assert entry.remote_addr == "203.0.113.7"
        assert entry.changes_dict["groups"] == [["finance", "security"], ["legal"]]
        assert set(entry.changes_dict) == {"groups"}
        assert audit.verify_audit_chain().broken_entry is None

    def test_a_sign_in_that_changes_nothing_writes_nothing(self, bob):
        unchanged = account(username="bob", groups=frozenset({"finance", "security"}))

        sign_in_account(account=unchanged, now=NOW)

        assert self.entries() == []

    def test_the_first_sign_in_is_written_as_the_account_made(self):
        sign_in_account(account=account(), now=NOW)

        (entry,) = self.entries()
        assert "first sign-in" in entry.additional_data["comment"]


@pytest.mark.django_db
class TestPasswords:
    def test_a_right_password_signs_in_while_local_login_is_on(self, rf, bob):
        assert authenticate(rf.post("/"), username="bob", password="baton-demo") == bob

    def test_no_password_signs_in_while_local_login_is_off(self, rf, settings, bob):
        settings.BATON_LOCAL_LOGIN = False

        assert authenticate(rf.post("/"), username="bob", password="baton-demo") is None

    def test_the_admins_sign_in_sends_to_baton_s_page_while_passwords_are_off(
        self, client, settings
    ):
        settings.BATON_LOCAL_LOGIN = False

        answer = client.get("/admin/login/?next=/admin/")

        assert answer.status_code == 302
        assert answer["Location"] == "/accounts/login/?next=/admin/"

    def test_the_provider_s_pages_answer_404_while_no_provider_is_configured(self, client):
        assert client.get("/oidc/authenticate/").status_code == 404
        assert client.get("/oidc/callback/?code=x&state=y").status_code == 404


@pytest.mark.django_db
class TestSignInPage:
    @pytest.fixture
    def provider_configured(self, settings):
        settings.BATON_OIDC_ENABLED = True
        settings.BATON_OIDC_PROVIDER_NAME = "Acme SSO"

    def test_without_a_provider_the_page_is_the_password_form_alone(self, client):
        page = client.get("/accounts/login/").content.decode()

        assert 'name="password"' in page
        assert "Sign in with" not in page

    def test_with_a_provider_the_page_offers_its_button_beside_passwords(
        self, client, provider_configured
    ):
        page = client.get("/accounts/login/?next=/console/").content.decode()

        assert 'href="/oidc/authenticate/?next=/console/"' in page
        assert "Sign in with Acme SSO" in page
        assert 'name="password"' in page

    def test_a_failed_provider_sign_in_is_said_on_the_page(self, client, provider_configured):
        page = client.get("/accounts/login/?sso=failed").content.decode()

        assert "Single sign-on did not sign you in." in page
