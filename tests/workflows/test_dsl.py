"""The definition language: the static check and input validation."""

from __future__ import annotations

from datetime import timedelta

import pydantic
import pytest

from workflows import registry
from workflows.apps import check_workflow_definitions
from workflows.dsl import (
    ANYONE,
    Activity,
    InvalidInput,
    Join,
    NoCompensation,
    Parallel,
    WaitForSignal,
    Workflow,
    check_definition,
)
from workflows.examples.order import ORDER


def noop(context):
    return None


def read_only(name: str, next: str | None = None) -> Activity:
    return Activity(name, run=noop, next=next, mutating=False)


def workflow(*nodes, start: str = "a") -> Workflow:
    return Workflow(name="check_me", version=1, start=start, nodes=nodes)


class TestCheckDefinition:
    def test_shipped_definitions_pass(self):
        assert check_definition(ORDER) == []
        assert all(check_definition(w) == [] for w in registry.all_definitions())

    def test_unreachable_node_is_named(self):
        problems = check_definition(workflow(read_only("a"), read_only("orphan")))

        assert problems == ["node 'orphan' is unreachable from the start"]

    def test_cycle_is_a_path_with_no_end(self):
        problems = check_definition(workflow(read_only("a", "b"), read_only("b", "a")))

        assert problems == ["path with no end: a -> b -> a loops back"]

    def test_a_cycle_at_the_end_of_a_long_chain_is_found(self):
        chain = [read_only(f"n{i}", f"n{i + 1}") for i in range(10_000)]
        loop_back = read_only("n10000", "n9999")

        problems = check_definition(workflow(*chain, loop_back, start="n0"))

        assert problems == ["path with no end: n9999 -> n10000 -> n9999 loops back"]

    def test_a_chain_of_ten_thousand_nodes_passes(self):
        chain = [read_only(f"n{i}", f"n{i + 1}" if i < 9_999 else None) for i in range(10_000)]

        assert check_definition(workflow(*chain, start="n0")) == []

    def test_undefined_successor_is_named(self):
        problems = check_definition(workflow(read_only("a", "nowhere")))

        assert problems == ["'a' leads to undefined node 'nowhere'"]

    def test_mutating_activity_needs_a_compensation_decision(self):
        problems = check_definition(workflow(Activity("a", run=noop)))

        assert len(problems) == 1
        assert "mutating activity 'a' has no compensation" in problems[0]

    def test_explicit_no_compensation_is_accepted(self):
        definition = workflow(Activity("a", run=noop, compensate=NoCompensation("idempotent")))

        assert check_definition(definition) == []

    def test_parallel_branch_must_reach_its_join(self):
        definition = workflow(
            Parallel("a", branches=("left", "right"), join="j"),
            read_only("left", "j"),
            read_only("right"),
            Join("j"),
        )

        assert check_definition(definition) == ["'right' ends a branch of 'a' before its join 'j'"]

    def test_join_cannot_wait_for_more_branches_than_exist(self):
        definition = workflow(
            Parallel("a", branches=("left",), join="j"),
            read_only("left", "j"),
            Join("j", wait_for=2),
        )

        assert check_definition(definition) == ["join 'j' waits for 2 of 1 branches"]

    def test_parallel_branch_count_is_capped(self):
        branches = tuple(f"b{i}" for i in range(3))
        definition = Workflow(
            name="wide",
            version=1,
            start="a",
            max_parallel_branches=2,
            nodes=(
                Parallel("a", branches=branches, join="j"),
                *(read_only(name, "j") for name in branches),
                Join("j"),
            ),
        )

        assert check_definition(definition) == [
            "parallel 'a' has 3 branches, more than the cap of 2"
        ]

    def test_wait_timeout_leads_somewhere_or_fails_the_step(self):
        definition = workflow(
            WaitForSignal("a", signals={"go": None}, timeout=timedelta(hours=1)),
        )

        assert check_definition(definition) == []

    def test_system_check_reports_a_registered_bad_definition(self):
        bad = Workflow(name="bad", version=1, start="a", nodes=(read_only("a"), read_only("b")))
        registry.register(bad)
        try:
            errors = check_workflow_definitions()
        finally:
            registry.unregister(bad)

        assert [(error.id, error.msg) for error in errors] == [
            ("workflows.E001", "node 'b' is unreachable from the start")
        ]

    def test_a_requester_field_must_be_a_field_of_the_input(self):
        class Input(pydantic.BaseModel):
            requester: str

        misspelt = Workflow(
            name="check_me",
            version=1,
            start="a",
            nodes=(read_only("a"),),
            input_schema=Input,
            requester_field="requestor",
        )

        assert check_definition(misspelt) == [
            "requester_field 'requestor' is not a field of the input schema"
        ]

    def test_searchable_fields_must_be_fields_of_the_input(self):
        class Input(pydantic.BaseModel):
            order_id: str

        misspelt = Workflow(
            name="check_me",
            version=1,
            start="a",
            nodes=(read_only("a"),),
            input_schema=Input,
            searchable=("order_id", "orderid"),
        )

        assert check_definition(misspelt) == [
            "searchable field 'orderid' is not a field of the input schema"
        ]


class TestCheckStarters:
    def test_groups_or_anyone_are_accepted(self):
        by_groups = Workflow(
            name="check_me", version=1, start="a", nodes=(read_only("a"),), starters=("finance",)
        )
        by_anyone = Workflow(
            name="check_me", version=1, start="a", nodes=(read_only("a"),), starters=ANYONE
        )

        assert (check_definition(by_groups), check_definition(by_anyone)) == ([], [])

    def test_a_bare_group_name_is_refused_with_the_fix(self):
        bare = Workflow(
            name="check_me", version=1, start="a", nodes=(read_only("a"),), starters="finance"
        )

        assert check_definition(bare) == [
            "starters must be a tuple of group names or ANYONE, not 'finance' "
            "(write ('finance',) for one group)"
        ]

    def test_blank_and_repeated_group_names_are_named(self):
        sloppy = Workflow(
            name="check_me",
            version=1,
            start="a",
            nodes=(read_only("a"),),
            starters=("finance", " ", "finance"),
        )

        assert check_definition(sloppy) == [
            "starters names ' ', which is not a group name",
            "starters names a group twice: finance",
        ]

    def test_the_shipped_types_say_who_starts_them(self):
        starters = {w.name: w.starters for w in registry.all_definitions()}

        assert (starters["order"], starters["expense"], starters["vendor_onboarding"]) == (
            ANYONE,
            ("employees",),
            ("procurement",),
        )


class TestValidateInput:
    def test_valid_order_input_is_returned_as_json(self, order_input):
        assert ORDER.validate_input(order_input())["amount"] == "42.50"

    def test_each_problem_names_its_field(self, order_input):
        bad = order_input(items=[{"sku": "X", "quantity": 0}], currency="euro", amount="-1")

        with pytest.raises(InvalidInput) as raised:
            ORDER.validate_input(bad)

        fields = {error["field"] for error in raised.value.errors}
        assert fields == {"items.0.quantity", "currency", "amount"}

    def test_unknown_fields_are_refused(self, order_input):
        with pytest.raises(InvalidInput) as raised:
            ORDER.validate_input(order_input(coupon="FREE"))

        assert raised.value.errors == [
            {"field": "coupon", "message": "Extra inputs are not permitted"}
        ]

    def test_text_with_a_nul_character_is_refused(self, order_input):
        with pytest.raises(InvalidInput) as raised:
            ORDER.validate_input(order_input(order_id="A\x00B"))

        assert raised.value.errors == [
            {"field": "input", "message": "text must not contain NUL characters"}
        ]
