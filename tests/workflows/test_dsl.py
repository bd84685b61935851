"""The definition language: the static check and input validation."""

from __future__ import annotations

from datetime import timedelta

import pydantic
import pytest
from django.utils import translation

from workflows import registry
from workflows.apps import check_workflow_definitions
from workflows.dsl import (
    ANYONE,
    Activity,
    Approval,
    Branch,
    ChildWorkflow,
    GoBack,
    InvalidForm,
    InvalidInput,
    Join,
    Map,
    NoCompensation,
    Parallel,
    Revise,
    RunData,
    Update,
    WaitForSignal,
    Workflow,
    check_definition,
    node_words,
)
from workflows.examples.order import ORDER


def noop(context):
    return None


def read_only(name: str, next: str | None = None) -> Activity:
    return Activity(name, run=noop, next=next, mutating=False)


def workflow(*nodes, start: str = "a") -> Workflow:
    return Workflow(name="check_me", version=1, start=start, nodes=nodes)


UNBOUNDED = "with no GoBack to bound it (a loop must go back through a GoBack node with max_rounds)"


def always(data) -> bool:
    return True


class TestCheckDefinition:
    def test_shipped_definitions_pass(self):
        assert check_definition(ORDER) == []
        assert all(check_definition(w) == [] for w in registry.all_definitions())

    def test_unreachable_node_is_named(self):
        problems = check_definition(workflow(read_only("a"), read_only("orphan")))

        assert problems == ["node 'orphan' is unreachable from the start"]

    def test_cycle_is_a_path_with_no_end(self):
        problems = check_definition(workflow(read_only("a", "b"), read_only("b", "a")))

        assert problems == [f"path with no end: a -> b -> a loops back {UNBOUNDED}"]

    def test_a_cycle_at_the_end_of_a_long_chain_is_found(self):
        chain = [read_only(f"n{i}", f"n{i + 1}") for i in range(10_000)]
        loop_back = read_only("n10000", "n9999")

        problems = check_definition(workflow(*chain, loop_back, start="n0"))

        assert problems == [f"path with no end: n9999 -> n10000 -> n9999 loops back {UNBOUNDED}"]

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


class TestCheckLoops:
    def test_a_loop_through_a_bounded_go_back_passes(self):
        definition = workflow(
            read_only("a", "check"),
            Branch("check", condition=always, if_true=None, if_false="again"),
            GoBack("again", to="a", max_rounds=3, otherwise="done"),
            read_only("done"),
        )

        assert check_definition(definition) == []

    def test_an_unbounded_loop_is_refused_and_named(self):
        definition = workflow(
            read_only("a", "check"),
            Branch("check", condition=always, if_true=None, if_false="a"),
        )

        assert check_definition(definition) == [
            f"path with no end: a -> check -> a loops back {UNBOUNDED}"
        ]

    def test_a_go_back_without_max_rounds_is_refused(self):
        definition = workflow(read_only("a", "again"), GoBack("again", to="a"))

        assert check_definition(definition) == [
            "go back 'again' has no max_rounds: every loop must be bounded"
        ]

    @pytest.mark.parametrize("max_rounds", [1, 0, -2, 2.5, True])
    def test_max_rounds_must_allow_a_second_round(self, max_rounds):
        definition = workflow(
            read_only("a", "again"), GoBack("again", to="a", max_rounds=max_rounds)
        )

        assert check_definition(definition) == [
            f"go back 'again' has max_rounds={max_rounds!r}: it must be a whole number of at "
            "least 2 (the first round counts, so 1 would never go back)"
        ]

    def test_a_loop_through_the_otherwise_exit_is_unbounded(self):
        definition = workflow(
            read_only("a", "again"), GoBack("again", to="a", max_rounds=2, otherwise="a")
        )

        assert check_definition(definition) == [
            f"path with no end: a -> again -> a loops back {UNBOUNDED}"
        ]

    def test_going_back_to_a_node_that_never_leads_back_is_refused(self):
        definition = workflow(
            Branch("a", condition=always, if_true="b", if_false="again"),
            read_only("b"),
            GoBack("again", to="b", max_rounds=2),
        )

        assert check_definition(definition) == [
            "go back 'again' goes to 'b', which never leads back to it: use the node's own "
            "exit for a way forward"
        ]

    def test_going_back_to_itself_is_refused(self):
        definition = workflow(read_only("a", "again"), GoBack("again", to="again", max_rounds=2))

        assert "go back 'again' goes back to itself" in check_definition(definition)

    def test_a_loop_may_not_start_inside_a_parallel_region(self):
        definition = workflow(
            Parallel("a", branches=("left", "right"), join="j"),
            read_only("left", "j"),
            read_only("right", "j"),
            Join("j", next="again"),
            GoBack("again", to="left", max_rounds=2),
        )

        assert check_definition(definition) == [
            "go back 'again': 'left' is inside the parallel region closed by 'j'; a loop may "
            "contain a whole parallel region, never start or end inside one"
        ]

    def test_going_back_to_a_join_is_refused(self):
        definition = workflow(
            Parallel("a", branches=("left", "right"), join="j"),
            read_only("left", "j"),
            read_only("right", "j"),
            Join("j", next="again"),
            GoBack("again", to="j", max_rounds=2),
        )

        assert check_definition(definition) == [
            "go back 'again' goes back to the join 'j', which would wait for branches that "
            "never come: go back to its parallel instead"
        ]

    def test_loops_that_could_go_back_more_times_than_a_step_counts_are_refused(self):
        definition = workflow(
            read_only("a", "again"),
            GoBack("again", to="a", max_rounds=20_000, otherwise="b"),
            read_only("b", "more"),
            GoBack("more", to="b", max_rounds=20_000),
        )

        assert check_definition(definition) == [
            "the loops of 'check_me' may go back more than 32767 times in all, more rounds "
            "than a step can count: lower their max_rounds"
        ]

    def test_a_loop_around_a_whole_parallel_region_passes(self):
        definition = workflow(
            Parallel("a", branches=("left", "right"), join="j"),
            read_only("left", "j"),
            read_only("right", "j"),
            Join("j", next="again"),
            GoBack("again", to="a", max_rounds=2),
        )

        assert check_definition(definition) == []


def items(data) -> list:
    return []


class TestCheckMapsAndChildren:
    def test_a_map_runs_an_activity_or_a_child_workflow_not_both_nor_neither(self):
        both = Map("a", items=items, activity=noop, workflow="other", mutating=False)
        neither = Map("a", items=items)

        for node in (both, neither):
            assert check_definition(workflow(node)) == [
                "map 'a' must run either an activity or a child workflow (give one)"
            ]

    def test_a_map_over_a_mutating_activity_names_its_compensation(self):
        problems = check_definition(workflow(Map("a", items=items, activity=noop)))

        assert problems == [
            "map 'a' runs a mutating activity with no compensation: name one, or pass "
            "NoCompensation(reason) to say why it needs none"
        ]

    @pytest.mark.parametrize("concurrency", [0, -1, 1.5, True])
    def test_max_concurrency_is_a_whole_number_of_at_least_one(self, concurrency):
        node = Map("a", items=items, workflow="other", max_concurrency=concurrency)

        assert check_definition(workflow(node)) == [
            f"map 'a' has max_concurrency={concurrency!r}: it must be a whole number of at least 1"
        ]

    def test_an_unknown_failure_policy_is_refused_naming_the_two(self):
        node = Map("a", items=items, workflow="other", on_failure="ignore")  # type: ignore[arg-type]

        assert check_definition(workflow(node)) == [
            "map 'a' has on_failure='ignore': choose 'fail_fast' or 'finish_all'"
        ]

    def test_a_child_workflow_names_its_type(self):
        node = ChildWorkflow("a", workflow="", input=lambda data: {})

        assert check_definition(workflow(node)) == [
            "child workflow 'a' names no workflow type to start"
        ]

    def test_the_system_check_names_a_child_type_that_is_not_registered(self):
        parent = Workflow(
            name="orphaned_parent",
            version=1,
            start="a",
            nodes=(
                ChildWorkflow("a", workflow="no_such_type", input=lambda data: {}, next="b"),
                Map("b", items=items, workflow="test_child"),
            ),
        )
        registry.register(parent)
        try:
            errors = check_workflow_definitions()
        finally:
            registry.unregister(parent)

        assert [(error.id, error.obj, error.msg) for error in errors] == [
            (
                "workflows.E001",
                "orphaned_parent v1",
                "child workflow 'a' starts runs of 'no_such_type', which is not registered "
                "(add its module to BATON_WORKFLOW_MODULES)",
            )
        ]

    def test_a_map_over_an_activity_is_claimed_as_one_activity_per_item(self):
        node = Map("a", items=items, activity=noop, mutating=False, max_concurrency=3)

        item = workflow(node).activity("a")

        assert (item.name, item.run, item.mutating) == ("a", noop, False)


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
            {
                "field": "coupon",
                "message": "Extra inputs are not permitted",
                "type": "extra_forbidden",
            }
        ]

    def test_text_with_a_nul_character_is_refused(self, order_input):
        with pytest.raises(InvalidInput) as raised:
            ORDER.validate_input(order_input(order_id="A\x00B"))

        assert raised.value.errors == [
            {"field": "input", "message": "text must not contain NUL characters"}
        ]


class CostCentre(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    cost_centre: str = pydantic.Field(pattern=r"^[A-Z]{2,4}-[0-9]{3,6}$")
    note: str = ""


def approval_with(form) -> Workflow:
    return workflow(Approval("a", title="Decide", assignees=("carol",), form=form))


class TestApprovalForms:
    def test_a_pydantic_model_is_accepted_as_a_form(self):
        assert check_definition(approval_with(CostCentre)) == []

    def test_a_form_that_is_not_a_pydantic_model_is_refused_by_the_static_check(self):
        problems = check_definition(approval_with({"cost_centre": str}))

        assert problems == [
            "approval 'a' has a form that is not a pydantic model: {'cost_centre': <class 'str'>}"
        ]

    def test_an_instance_instead_of_the_model_is_refused(self):
        problems = check_definition(approval_with(CostCentre(cost_centre="FIN-100")))

        assert len(problems) == 1
        assert "has a form that is not a pydantic model" in problems[0]

    def test_a_form_without_a_json_schema_is_refused(self):
        class Odd(pydantic.BaseModel):
            model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
            when: object = pydantic.Field(default_factory=object)
            check: type = int

        problems = check_definition(approval_with(Odd))

        assert len(problems) == 1
        assert problems[0].startswith("approval 'a' has a form without a JSON Schema")

    def test_values_are_read_by_the_form_and_each_problem_is_named(self):
        node = Approval("a", form=CostCentre)

        assert node.validate_form({"cost_centre": "FIN-100"}) == {
            "cost_centre": "FIN-100",
            "note": "",
        }
        with pytest.raises(InvalidForm) as refused:
            node.validate_form({"cost_centre": "nope", "colour": "red"})
        assert [error["field"] for error in refused.value.errors] == ["cost_centre", "colour"]
        assert str(refused.value).startswith("Invalid form values: cost_centre: String should")

    def test_an_approval_without_a_form_takes_no_values(self):
        node = Approval("a")

        assert node.validate_form({}) == {}
        with pytest.raises(InvalidForm, match="this decision has no form"):
            node.validate_form({"cost_centre": "FIN-100"})

    def test_a_form_is_required_when_a_field_has_no_default(self):
        class Optional(pydantic.BaseModel):
            note: str = ""

        assert Approval("a", form=CostCentre).form_is_required
        assert not Approval("a", form=Optional).form_is_required
        assert not Approval("a").form_is_required

    def test_conditions_read_the_deciders_values_from_the_run_data(self):
        data = RunData(
            input={},
            results={
                "legal": {"signal": "legal.approved", "payload": {"values": {"risk": "high"}}}
            },
        )

        assert data.form_values("legal") == {"risk": "high"}
        assert data.form_values("elsewhere") == {}


class TestRevise:
    def definition(self, schema=None) -> Workflow:
        return Workflow(
            name="check_me",
            version=1,
            start="review",
            input_schema=schema,
            nodes=(
                Approval(
                    "review", assignees=("carol",), on_changes_requested="revise", on_approve=None
                ),
                Revise("revise", next="again"),
                GoBack("again", to="review", max_rounds=3),
            ),
        )

    def test_an_approval_sending_back_through_revise_and_go_back_passes(self):
        assert check_definition(self.definition(CostCentre)) == []

    def test_an_approval_gains_a_changes_requested_exit_only_when_it_names_one(self):
        asking = self.definition(CostCentre).node("review")
        plain = Approval("plain", on_approve=None, on_reject=None)

        assert asking.signals["review.changes_requested"] == "revise"
        assert "plain.changes_requested" not in plain.signals
        assert (asking.may_request_changes, plain.may_request_changes) == (True, False)

    def test_revise_waits_for_its_resubmission_and_goes_on_to_next(self):
        revise = Revise("revise", next="again")

        assert revise.signals == {"revise.resubmitted": "again"}
        assert revise.resubmitted_signal == "revise.resubmitted"

    def test_a_revise_without_an_input_schema_is_refused(self):
        assert check_definition(self.definition()) == [
            "revise 'revise' needs the workflow's input_schema: its form is the start form, "
            "and a resubmission is validated with it"
        ]


class TestApprovalReminders:
    def test_a_reminder_before_the_deadline_passes(self):
        node = Approval("a", deadline=timedelta(days=2), remind_before=timedelta(hours=4))

        assert check_definition(workflow(node)) == []

    def test_a_reminder_without_a_deadline_is_refused(self):
        node = Approval("a", remind_before=timedelta(hours=4))

        assert check_definition(workflow(node)) == [
            "a: remind_before needs a deadline to remind of."
        ]

    def test_a_reminder_that_is_not_a_positive_timedelta_is_refused(self):
        node = Approval("a", deadline=timedelta(days=2), remind_before=timedelta(0))

        assert check_definition(workflow(node)) == [
            "a: remind_before must be a positive timedelta."
        ]


class TestCatchTarget:
    """Which catch path a failure for good takes: the most specific name wins."""

    ACTIVITY = Activity(
        "charge",
        run=noop,
        mutating=False,
        on_error={
            "CreditDeclined": "manual_review",
            "NonRetryableError": "give_up",
            "Timeout": "chase",
        },
    )

    def test_the_error_class_itself_is_matched_first(self):
        error = {"type": "CreditDeclined", "bases": ["NonRetryableError"]}

        assert self.ACTIVITY.catch_target(error) == "manual_review"

    def test_a_subclass_is_caught_by_its_base_class_name(self):
        error = {"type": "CardExpired", "bases": ["NonRetryableError"]}

        assert self.ACTIVITY.catch_target(error) == "give_up"

    def test_every_engine_timeout_is_caught_as_timeout(self):
        targets = [
            self.ACTIVITY.catch_target({"type": kind})
            for kind in ("StartToCloseTimeout", "HeartbeatTimeout", "ScheduleToStartTimeout")
        ]

        assert targets == ["chase"] * 3

    def test_an_error_nothing_names_is_not_caught(self):
        assert self.ACTIVITY.catch_target({"type": "ValueError"}) is None


class TestCatchPathsCheck:
    def test_a_catch_target_counts_as_reachable_and_may_end_the_run(self):
        definition = workflow(
            Activity("a", run=noop, mutating=False, next="b", on_error={"Boom": "review"}),
            read_only("b"),
            read_only("review"),
        )

        assert check_definition(definition) == []

    def test_a_catch_target_that_is_not_a_node_is_named(self):
        definition = workflow(
            Activity("a", run=noop, mutating=False, on_error={"Boom": "nowhere"}),
        )

        assert check_definition(definition) == ["'a' leads to undefined node 'nowhere'"]

    def test_a_catch_key_that_is_not_a_class_name_is_named(self):
        definition = workflow(
            Activity("a", run=noop, mutating=False, next="b", on_error={"credit declined": "b"}),
            read_only("b"),
        )

        assert check_definition(definition) == [
            "activity 'a' catches 'credit declined', which is not an exception class name "
            "(or 'Timeout')"
        ]

    def test_a_catch_path_back_to_an_earlier_node_is_a_loop_like_any_other(self):
        definition = workflow(
            read_only("a", "b"),
            Activity("b", run=noop, mutating=False, on_error={"Boom": "a"}),
        )

        assert check_definition(definition) == [
            f"path with no end: a -> b -> a loops back {UNBOUNDED}"
        ]


class TestRunDeadlineCheck:
    def test_a_deadline_path_of_its_own_passes_and_counts_as_reachable(self):
        definition = Workflow(
            name="check_me",
            version=1,
            start="a",
            deadline=timedelta(days=30),
            on_deadline="expire",
            nodes=(read_only("a"), read_only("expire", "tell"), read_only("tell")),
        )

        assert check_definition(definition) == []

    def test_a_deadline_node_that_does_not_exist_is_named(self):
        definition = Workflow(
            name="check_me",
            version=1,
            start="a",
            deadline=timedelta(days=30),
            on_deadline="expire",
            nodes=(read_only("a"),),
        )

        assert check_definition(definition) == [
            "on_deadline names 'expire', which is not a node (or say 'cancel' to cancel the run)"
        ]

    def test_a_deadline_path_that_joins_the_runs_own_path_is_refused(self):
        definition = Workflow(
            name="check_me",
            version=1,
            start="a",
            deadline=timedelta(days=30),
            on_deadline="expire",
            nodes=(read_only("a", "tell"), read_only("expire", "tell"), read_only("tell")),
        )

        assert check_definition(definition) == [
            "the deadline path from 'expire' shares 'tell' with the run's own path: "
            "a deadline path needs nodes of its own"
        ]

    def test_on_deadline_without_a_deadline_is_named(self):
        definition = Workflow(
            name="check_me", version=1, start="a", on_deadline="a", nodes=(read_only("a"),)
        )

        assert check_definition(definition) == ["on_deadline='a' needs a deadline to fire at"]

    def test_a_deadline_that_is_not_a_positive_duration_is_named(self):
        definition = Workflow(
            name="check_me",
            version=1,
            start="a",
            deadline=timedelta(0),
            nodes=(read_only("a"),),
        )

        assert check_definition(definition) == [
            "the deadline must be a positive duration, not 0:00:00"
        ]


class Change(pydantic.BaseModel):
    amount: int


def answer(data, payload):
    return None


def waiting(**options) -> Workflow:
    return Workflow(
        name="check_me",
        version=1,
        start="a",
        nodes=(WaitForSignal("a", signals={"go": None}),),
        **options,
    )


class TestQueriesAndUpdatesCheck:
    def test_queries_and_updates_that_name_waiting_nodes_pass(self):
        definition = waiting(
            queries={"quote": lambda data: {}},
            updates={"change": Update(answer, schema=Change, waiting_at=("a",))},
        )

        assert check_definition(definition) == []

    def test_a_query_that_is_no_function_is_named(self):
        assert check_definition(waiting(queries={"quote": 42})) == [
            "query 'quote' is 42, not a function of the run's data"
        ]

    def test_a_name_that_cannot_be_part_of_a_path_is_refused(self):
        problems = check_definition(
            waiting(
                queries={"the quote": lambda data: {}},
                updates={"a/b": Update(answer, schema=Change)},
            )
        )

        assert problems == [
            "query name 'the quote' must be 1 to 100 letters, digits, '_', '.' or '-' "
            "(it is part of the API's path)",
            "update name 'a/b' must be 1 to 100 letters, digits, '_', '.' or '-' "
            "(it is part of the API's path)",
        ]

    def test_an_update_that_is_not_an_update_is_named(self):
        assert check_definition(waiting(updates={"change": answer})) == [
            f"update 'change' is {answer!r}, not an Update(handler, schema=...)"
        ]

    def test_an_update_schema_must_be_a_pydantic_model(self):
        assert check_definition(waiting(updates={"change": Update(answer, schema=dict)})) == [
            "update 'change' has a schema that is not a pydantic model: <class 'dict'>"
        ]

    def test_an_update_accepted_at_a_node_that_does_not_exist_is_named(self):
        definition = waiting(updates={"change": Update(answer, schema=Change, waiting_at=("b",))})

        assert check_definition(definition) == [
            "update 'change' is accepted while waiting at 'b', which is not a node"
        ]

    def test_a_bare_node_name_for_waiting_at_is_refused(self):
        definition = waiting(updates={"change": Update(answer, schema=Change, waiting_at="a")})

        assert check_definition(definition) == [
            "update 'change' has waiting_at='a': it must be a tuple of node names "
            "(write ('review',) for one node)"
        ]

    def test_an_update_may_not_take_a_human_decisions_name(self):
        definition = Workflow(
            name="check_me",
            version=1,
            start="review",
            nodes=(Approval("review", groups=("finance",)),),
            updates={"review.approved": Update(answer, schema=Change)},
        )

        assert check_definition(definition) == [
            "update 'review.approved' is the decision of the human task of 'review': "
            "choose another name"
        ]


class TestNodeWords:
    def test_a_labelled_node_is_said_in_the_readers_language(self):
        with translation.override("de"):
            said = node_words(ORDER, "reserve_inventory")

        assert said == "Bestand reservieren"

    def test_a_node_without_a_label_is_its_name_with_spaces(self):
        definition = Workflow(
            name="plain", version=1, start="send_it", nodes=(Activity("send_it", run=noop),)
        )

        assert node_words(definition, "send_it") == "send it"

    def test_a_node_or_a_definition_that_is_gone_is_its_name_with_spaces(self):
        assert node_words(ORDER, "old_step") == "old step"
        assert node_words(None, "manager_approval") == "manager approval"
