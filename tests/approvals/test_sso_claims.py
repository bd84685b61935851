"""What a provider's claims say about an account (approvals.sso.claims): pure."""

from __future__ import annotations

import pytest

from approvals.sso.claims import Rule, UnusableClaims, groups_in, holds, parse_rule, read_account


def read(claims, *, staff: str = "", operator: str = ""):
    return read_account(
        claims,
        username_claim="preferred_username",
        groups_claim="groups",
        staff_rule=parse_rule(staff),
        operator_rule=parse_rule(operator),
    )


class TestParseRule:
    def test_a_claim_alone_is_a_boolean_claim(self):
        assert parse_rule(" baton_staff ") == Rule(claim="baton_staff")

    def test_claim_equals_value_is_a_value_the_claim_must_hold(self):
        assert parse_rule("roles=baton-operator") == Rule(claim="roles", value="baton-operator")

    def test_an_empty_setting_is_no_rule(self):
        assert parse_rule("  ") is None


class TestHolds:
    def test_a_boolean_claim_holds_when_true_or_the_string_true(self):
        rule = Rule(claim="staff")

        assert holds(rule, {"staff": True})
        assert holds(rule, {"staff": "True"})
        assert not holds(rule, {"staff": "yes please"})
        assert not holds(rule, {})

    def test_a_value_holds_in_a_list_or_as_the_whole_claim(self):
        rule = Rule(claim="roles", value="baton-operator")

        assert holds(rule, {"roles": ["reader", "baton-operator"]})
        assert holds(rule, {"roles": "baton-operator"})
        assert not holds(rule, {"roles": ["baton-operator-in-training"]})


class TestGroupsIn:
    def test_no_groups_claim_is_none_so_groups_are_left_alone(self):
        assert groups_in({"sub": "x"}, "groups") is None

    def test_an_empty_list_is_no_group(self):
        assert groups_in({"groups": []}, "groups") == frozenset()

    def test_names_are_trimmed_and_what_no_django_group_can_hold_is_left_out(self):
        found = groups_in({"groups": [" finance ", "", 7, "x" * 151, "legal"]}, "groups")

        assert found == {"finance", "legal"}


class TestReadAccount:
    def test_reads_the_username_names_email_and_groups(self):
        account = read(
            {
                "preferred_username": "alice",
                "email": "alice@example.com",
                "given_name": "Alice",
                "family_name": "Archer",
                "groups": ["legal"],
            }
        )

        assert (account.username, account.email, account.first_name) == (
            "alice",
            "alice@example.com",
            "Alice",
        )
        assert account.groups == {"legal"}
        assert (account.is_staff, account.is_operator) == (None, None)

    def test_rights_are_read_only_where_a_rule_is_configured(self):
        account = read(
            {"preferred_username": "olga", "roles": ["baton-operator"]},
            staff="baton_staff",
            operator="roles=baton-operator",
        )

        assert (account.is_staff, account.is_operator) == (False, True)

    def test_claims_without_the_username_claim_name_no_account(self):
        with pytest.raises(UnusableClaims, match="preferred_username"):
            read({"sub": "1234", "email": "alice@example.com"})
