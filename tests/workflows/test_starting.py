"""Starting a run for a person: who may start which type, and whose request it is."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

from approvals.examples import EXPENSE, VENDOR_ONBOARDING
from tests.conftest import ORDER_INPUT
from workflows.dsl import InvalidInput
from workflows.examples.order import ORDER
from workflows.models import WorkflowRun
from workflows.starting import (
    KeyTaken,
    Starter,
    StartRefused,
    may_start,
    requester_input,
    start_for,
    startable,
    why_not_starter,
)

ALICE = Starter(username="alice", group_names=frozenset({"employees", "legal"}), is_operator=False)
EVE = Starter(username="eve", group_names=frozenset(), is_operator=False)
OLGA = Starter(username="olga", group_names=frozenset(), is_operator=True)


def expense_input(**overrides):
    return {"title": "Train to Lyon", "amount": "120.00", "currency": "EUR", **overrides}


class TestMayStart:
    def test_a_member_of_a_starter_group_may_start_the_type(self):
        assert may_start(EXPENSE, ALICE)

    def test_anyone_else_may_not_and_is_told_who_may(self):
        assert not may_start(EXPENSE, EVE)
        assert why_not_starter(EXPENSE) == (
            "Only members of employees, or operators, may start an expense."
        )

    def test_operators_may_start_every_type(self):
        assert may_start(EXPENSE, OLGA)
        assert may_start(VENDOR_ONBOARDING, OLGA)

    def test_a_type_open_to_anyone_needs_no_group(self):
        assert may_start(ORDER, EVE)

    def test_the_types_offered_are_those_the_person_may_start(self):
        offered = [workflow.name for workflow in startable(ALICE)]

        # The suite registers test types open to anyone beside the shipped ones.
        assert {"expense", "order"} <= set(offered)
        assert "vendor_onboarding" not in offered
        assert offered == sorted(offered)
        assert "vendor_onboarding" in [workflow.name for workflow in startable(OLGA)]


class TestRequesterInput:
    def test_a_missing_requester_is_whoever_starts_it(self):
        data, acting_for = requester_input(EXPENSE, expense_input(), ALICE)

        assert (data["requester"], acting_for) == ("alice", None)

    def test_naming_yourself_is_your_own_request(self):
        data, acting_for = requester_input(EXPENSE, expense_input(requester="alice"), ALICE)

        assert (data["requester"], acting_for) == ("alice", None)

    def test_naming_someone_else_is_refused_with_the_reason(self):
        with pytest.raises(StartRefused) as refused:
            requester_input(EXPENSE, expense_input(requester="bob"), ALICE)

        assert str(refused.value) == (
            "You can only request an expense for yourself (alice); "
            "only an operator may request one for bob."
        )

    def test_an_operator_may_name_someone_else_and_is_told_for_whom(self):
        data, acting_for = requester_input(EXPENSE, expense_input(requester="alice"), OLGA)

        assert (data["requester"], acting_for) == ("alice", "alice")

    def test_a_type_without_a_requester_field_is_left_alone(self):
        data, acting_for = requester_input(ORDER, {"order_id": "A-1"}, ALICE)

        assert (data, acting_for) == ({"order_id": "A-1"}, None)


@pytest.mark.django_db
class TestStartFor:
    def test_the_starter_is_the_requester_and_fills_the_requester_field(self, alice, employees):
        run, created = start_for(
            user=alice, workflow_type="expense", input=expense_input(), channel="inbox"
        )

        assert created
        assert (run.started_by, run.input["requester"]) == (alice, "alice")

    def test_someone_outside_the_starters_is_refused_and_nothing_is_written(self, eve, employees):
        with pytest.raises(StartRefused, match="Only members of employees"):
            start_for(user=eve, workflow_type="expense", input=expense_input(), channel="inbox")

        assert WorkflowRun.objects.count() == 0

    def test_naming_another_requester_writes_nothing(self, alice, employees):
        with pytest.raises(StartRefused):
            start_for(
                user=alice,
                workflow_type="expense",
                input=expense_input(requester="bob"),
                channel="inbox",
            )

        assert WorkflowRun.objects.count() == 0
        assert LogEntry.objects.count() == 0

    def test_an_operator_acting_for_someone_is_audited_as_such(self, operator, alice):
        run, _ = start_for(
            user=operator,
            workflow_type="expense",
            input=expense_input(requester="alice"),
            channel="api",
            remote_addr="10.0.0.7",
        )

        entry = LogEntry.objects.get_for_object(run).get()
        assert run.started_by == operator
        assert (entry.actor, entry.remote_addr) == (operator, "10.0.0.7")
        assert entry.additional_data["event"] == "started_on_behalf"
        assert entry.additional_data["channel"] == "api"
        assert entry.additional_data["comment"] == "for alice"

    def test_an_operators_own_request_is_not_acting_for_anyone(self, operator, people):
        run, _ = start_for(user=operator, workflow_type="order", input=ORDER_INPUT, channel="inbox")

        assert LogEntry.objects.get_for_object(run).count() == 0

    def test_a_replayed_key_starts_nothing_and_audits_nothing_more(self, operator, alice):
        def start():
            return start_for(
                user=operator,
                workflow_type="expense",
                input=expense_input(requester="alice"),
                channel="inbox",
                idempotency_key="form-1",
            )

        first, _ = start()
        again, created = start()

        assert (again, created) == (first, False)
        assert LogEntry.objects.get_for_object(first).count() == 1

    def test_a_key_that_started_someone_elses_run_is_refused(self, alice, bob, employees):
        start_for(
            user=alice,
            workflow_type="expense",
            input=expense_input(),
            channel="api",
            idempotency_key="shared",
        )

        with pytest.raises(KeyTaken):
            start_for(
                user=bob,
                workflow_type="expense",
                input=expense_input(),
                channel="api",
                idempotency_key="shared",
            )

        assert WorkflowRun.objects.get().started_by == alice

    def test_invalid_input_is_refused_after_the_rules(self, alice, employees):
        with pytest.raises(InvalidInput) as invalid:
            start_for(
                user=alice,
                workflow_type="expense",
                input=expense_input(amount="-3"),
                channel="inbox",
            )

        assert [error["field"] for error in invalid.value.errors] == ["amount"]
        assert WorkflowRun.objects.count() == 0
