"""The groups approvals name: an error before deploying when one does not exist."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from approvals.checks import MISSING_GROUP, check_named_groups

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
