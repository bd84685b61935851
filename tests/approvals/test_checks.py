"""The system checks of approvals: the groups approvals name (an error before deploying
when one does not exist), and single sign-on set up by half."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from approvals.checks import MISSING_GROUP, check_named_groups, check_single_sign_on

pytestmark = pytest.mark.django_db


def missing(messages) -> dict[str, str]:
    return {message.obj: message.msg for message in messages if message.id == MISSING_GROUP}


class TestCheckNamedGroups:
    def test_reads_nothing_unless_told_which_databases(self, audited, django_assert_num_queries):
        with django_assert_num_queries(0):
            assert check_named_groups() == []

    def test_a_group_that_does_not_exist_is_an_error_saying_where_it_is_named(self, audited):
        found = missing(check_named_groups(databases=["default"]))

        assert found["auditors"] == (
            "Group 'auditors' does not exist, but test_audited v1, approval 'review' names it:"
            " its tasks would reach nobody in it."
        )
        assert "test_audited v1, approval 'review' (escalation 1)" in found["audit_board"]

    def test_a_group_that_exists_passes(self, audited):
        Group.objects.create(name="auditors")
        Group.objects.create(name="audit_board")

        found = missing(check_named_groups(databases=["default"]))

        assert "auditors" not in found
        assert "audit_board" not in found

    def test_the_deployment_check_with_the_database_fails_on_it(self, audited):
        with pytest.raises(SystemCheckError, match=r"approvals\.E002.*'auditors'"):
            call_command("check", "--deploy", "--database", "default")

    def test_the_check_migrate_runs_leaves_it_out_so_a_new_installation_can_start(self, audited):
        call_command("check", "--database", "default")  # raises on any error


class TestCheckSingleSignOn:
    def test_sso_off_and_passwords_on_is_quiet(self):
        assert check_single_sign_on() == []

    def test_a_client_id_without_the_provider_s_endpoints_warns_naming_them(self, settings):
        settings.BATON_OIDC_ENABLED = True
        settings.OIDC_RP_CLIENT_SECRET = "secret"

        (warning,) = check_single_sign_on()

        assert warning.id == "approvals.W003"
        assert "BATON_OIDC_ISSUER" in warning.msg
        assert "BATON_OIDC_CLIENT_SECRET" not in warning.msg

    def test_passwords_off_without_a_provider_warns_that_nobody_can_sign_in(self, settings):
        settings.BATON_LOCAL_LOGIN = False

        (warning,) = check_single_sign_on()

        assert "nobody can sign in" in warning.msg
