"""Who may see and act, and separation of duties: pure predicates, no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pydantic

from approvals.permissions import (
    Conflict,
    Duties,
    DutyConflict,
    Person,
    Reviewer,
    StageDecision,
    TaskFacts,
    can_claim,
    can_decide,
    can_delegate,
    can_reassign,
    can_release,
    can_see,
    console_refusal,
    duty_conflict,
    may_hand_to,
    operate_refusal,
    run_requesters,
    task_overview_scope,
)
from approvals.states import TaskState
from workflows.dsl import Workflow

ALICE, BOB, CAROL, OLGA, EVE = 1, 2, 3, 4, 5
FINANCE, LEGAL, SECURITY = 10, 11, 12
NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


class ExpenseLike(pydantic.BaseModel):
    requester: str


def workflow(**options) -> Workflow:
    return Workflow(name="expense_like", version=1, start="a", nodes=(), **options)


def reviewer(user_id: int, username: str, *, operator: bool = False) -> Reviewer:
    groups = frozenset({FINANCE}) if user_id in (BOB, CAROL) else frozenset()
    return Reviewer(
        user_id=user_id,
        group_ids=groups,
        managed_group_ids=frozenset({FINANCE}) if user_id == CAROL else frozenset(),
        is_operator=operator,
        username=username,
    )


def finance_task(duties: Duties, *, state: str = TaskState.OPEN, assignee: int | None = None):
    return TaskFacts(
        state=state,
        assignee_id=assignee,
        owner_id=None,
        decided_by_id=None,
        candidate_user_ids=frozenset(),
        candidate_group_ids=frozenset({FINANCE}),
        duties=duties,
    )


def carol_approved_as_manager() -> StageDecision:
    return StageDecision(
        node="manager_approval", outcome="approved", decided_by_id=CAROL, decided_at=NOON
    )


class TestRunRequesters:
    def test_whoever_started_the_run_and_the_person_its_input_names(self):
        requesters = run_requesters(
            workflow=workflow(input_schema=ExpenseLike, requester_field="requester"),
            run_input={"requester": "bob"},
            started_by="carol",
        )

        assert requesters == {"bob", "carol"}

    def test_without_a_requester_field_only_the_starter(self):
        requesters = run_requesters(
            workflow=workflow(), run_input={"requester": "bob"}, started_by="alice"
        )

        assert requesters == {"alice"}

    def test_a_run_started_by_the_system_for_nobody_has_no_requesters(self):
        assert run_requesters(workflow=workflow(), run_input={}, started_by=None) == frozenset()

    def test_a_missing_or_non_text_requester_names_nobody(self):
        definition = workflow(requester_field="requester")

        missing = run_requesters(workflow=definition, run_input={}, started_by=None)
        odd = run_requesters(workflow=definition, run_input={"requester": 7}, started_by=None)

        assert (missing, odd) == (frozenset(), frozenset())


class TestDutyConflict:
    def test_the_requester_is_in_conflict_whatever_their_role(self):
        duties = Duties(node="finance_approval", requesters=frozenset({"bob"}))

        conflict = duty_conflict(user_id=BOB, username="bob", duties=duties)

        assert conflict == DutyConflict(Conflict.REQUESTER)

    def test_a_decision_at_another_stage_is_a_conflict_when_approvers_must_differ(self):
        duties = Duties(
            node="finance_approval",
            distinct_approvers=True,
            decisions=(carol_approved_as_manager(),),
        )

        conflict = duty_conflict(user_id=CAROL, username="carol", duties=duties)

        assert conflict == DutyConflict(Conflict.EARLIER_STAGE, earlier=carol_approved_as_manager())

    def test_without_the_flag_one_person_may_decide_two_stages(self):
        duties = Duties(node="finance_approval", decisions=(carol_approved_as_manager(),))

        assert duty_conflict(user_id=CAROL, username="carol", duties=duties) is None

    def test_a_decision_at_the_same_stage_is_left_to_the_n_of_m_rule(self):
        duties = Duties(
            node="manager_approval",
            distinct_approvers=True,
            decisions=(carol_approved_as_manager(),),
        )

        assert duty_conflict(user_id=CAROL, username="carol", duties=duties) is None

    def test_someone_else_is_free(self):
        duties = Duties(
            node="finance_approval",
            requesters=frozenset({"alice"}),
            distinct_approvers=True,
            decisions=(carol_approved_as_manager(),),
        )

        assert duty_conflict(user_id=BOB, username="bob", duties=duties) is None


class TestPredicatesHonourSeparationOfDuties:
    def test_a_requester_in_the_group_sees_the_task_but_may_not_claim_or_decide_it(self):
        bob = reviewer(BOB, "bob")
        task = finance_task(Duties(requesters=frozenset({"bob"})))

        assert can_see(bob, task)
        assert not can_claim(bob, task)
        assert not can_decide(bob, task)
        assert not can_delegate(bob, task)

    def test_an_operator_may_not_decide_or_reassign_their_own_request(self):
        olga = reviewer(OLGA, "olga", operator=True)
        task = finance_task(Duties(requesters=frozenset({"olga"})))

        assert can_see(olga, task)
        assert not can_decide(olga, task)
        assert not can_reassign(olga, task)

    def test_an_operator_may_decide_someone_elses_request(self):
        olga = reviewer(OLGA, "olga", operator=True)
        task = finance_task(Duties(requesters=frozenset({"alice"})))

        assert can_decide(olga, task)
        assert can_reassign(olga, task)

    def test_the_manager_who_approved_one_stage_may_still_reassign_the_next(self):
        carol = reviewer(CAROL, "carol")
        task = finance_task(
            Duties(
                node="finance_approval",
                distinct_approvers=True,
                decisions=(carol_approved_as_manager(),),
            ),
            state=TaskState.CLAIMED,
            assignee=BOB,
        )

        assert not can_decide(carol, task)
        assert can_reassign(carol, task)

    def test_a_requester_holding_the_task_may_still_give_it_back(self):
        bob = reviewer(BOB, "bob")
        task = TaskFacts(
            state=TaskState.CLAIMED,
            assignee_id=BOB,
            owner_id=None,
            decided_by_id=None,
            candidate_user_ids=frozenset({BOB}),
            candidate_group_ids=frozenset({FINANCE}),
            duties=Duties(requesters=frozenset({"bob"})),
        )

        assert not can_decide(bob, task)
        assert can_release(bob, task)


class TestMayHandTo:
    """carol manages finance and has alice and bob as reports; bob is in finance."""

    carol = Person(
        user_id=CAROL, group_ids=frozenset({FINANCE}), managed_group_ids=frozenset({FINANCE})
    )
    bob = Person(user_id=BOB, group_ids=frozenset({FINANCE, SECURITY}), manager_id=CAROL)
    alice = Person(user_id=ALICE, group_ids=frozenset({LEGAL}), manager_id=CAROL)
    eve = Person(user_id=EVE)
    olga = Person(user_id=OLGA, is_operator=True)

    def test_someone_in_one_of_my_groups(self):
        assert may_hand_to(self.carol, self.bob)
        assert may_hand_to(self.bob, self.carol)

    def test_my_manager_and_my_reports(self):
        assert may_hand_to(self.alice, self.carol)
        assert may_hand_to(self.carol, self.alice)

    def test_not_a_peer_in_another_group_nor_a_stranger(self):
        assert not may_hand_to(self.alice, self.bob)
        assert not may_hand_to(self.bob, self.eve)
        assert not may_hand_to(self.eve, self.alice)

    def test_the_members_of_a_group_i_manage_without_being_in_it(self):
        manager = Person(user_id=99, managed_group_ids=frozenset({SECURITY}))

        assert may_hand_to(manager, self.bob)

    def test_an_operator_anyone(self):
        assert may_hand_to(self.olga, self.eve)


class TestTheRunConsole:
    def test_is_for_staff_who_may_view_or_operate_runs(self):
        assert console_refusal(is_staff=True, may_view_runs=True, may_operate_runs=False) == ""
        assert console_refusal(is_staff=True, may_view_runs=False, may_operate_runs=True) == ""

    def test_refuses_anyone_else_saying_what_they_lack(self):
        assert console_refusal(is_staff=False, may_view_runs=True, may_operate_runs=True) == (
            "The run console is for operators (staff) only."
        )
        assert "permission to view or to operate" in console_refusal(
            is_staff=True, may_view_runs=False, may_operate_runs=False
        )

    def test_acting_on_runs_needs_the_operate_permission_and_says_what(self):
        assert operate_refusal(may_operate_runs=True, what="pause a run") == ""
        assert operate_refusal(may_operate_runs=False, what="pause a run").startswith(
            "Only operators may pause a run: it needs the permission to operate workflow runs"
        )


class TestTheTaskOverviews:
    """The SLA dashboard and the console's task list, seen by whom."""

    def test_an_operator_sees_every_group(self):
        assert task_overview_scope(
            console_refusal="", managed_group_ids=frozenset({3}), page="The SLA dashboard"
        ) == (None, "")

    def test_a_group_manager_sees_the_groups_they_manage(self):
        assert task_overview_scope(
            console_refusal="The run console is for operators (staff) only.",
            managed_group_ids=frozenset({3, 4}),
            page="The SLA dashboard",
        ) == (frozenset({3, 4}), "")

    def test_anyone_else_is_refused_saying_why_and_naming_the_page(self):
        groups, refusal = task_overview_scope(
            console_refusal="The run console is for operators (staff) only.",
            managed_group_ids=frozenset(),
            page="The task list",
        )

        assert groups == frozenset()
        assert refusal == (
            "The task list is for operators and for group managers: you manage no group, "
            "and the run console is for operators (staff) only."
        )
