"""The migration plan (workflows.versions): which runs can move to another version, and why
not, judged from the two definitions and where each run is. Pure: no database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel

from workflows.dsl import (
    Activity,
    Approval,
    Join,
    NoCompensation,
    Parallel,
    Sleep,
    WaitForSignal,
    Workflow,
    check_definition,
)
from workflows.states import RunState, StepState
from workflows.versions import InvalidMigration, RunPosition, StepAt, parse_renames, plan_migration


def act(name: str, next: str | None = None, **options) -> Activity:
    return Activity(
        name, run=lambda context: None, compensate=lambda context: None, next=next, **options
    )


def wait(name: str, next: str | None = None, **options) -> WaitForSignal:
    return WaitForSignal(name, signals={"go": next}, **options)


def workflow(version: int, *nodes, start: str = "reserve", **options) -> Workflow:
    return Workflow(name="shop", version=version, start=start, nodes=nodes, **options)


V1 = workflow(1, act("reserve", "await_payment"), wait("await_payment", "ship"), act("ship"))


def waiting_at(node: str, *done: str, state: str = RunState.WAITING, input=None) -> RunPosition:
    steps = [StepAt(name, StepState.SUCCEEDED) for name in done]
    steps.append(StepAt(node, StepState.WAITING))
    return RunPosition(run_id="r1", state=state, input=input or {}, steps=tuple(steps))


class TestPlanMigration:
    def test_nodes_keep_their_names_unless_renamed(self):
        v2 = workflow(2, act("reserve", "await_funds"), wait("await_funds", "ship"), act("ship"))

        plan = plan_migration(source=V1, target=v2, renames={"await_payment": "await_funds"})

        assert plan.target_name("reserve") == "reserve"
        assert plan.target_name("await_payment") == "await_funds"
        assert plan.step_renames() == {"await_payment": "await_funds"}

    def test_every_problem_with_the_renames_is_named(self):
        v2 = workflow(2, act("reserve", "await_funds"), wait("await_funds", "ship"), act("ship"))

        with pytest.raises(InvalidMigration) as refused:
            plan_migration(
                source=V1,
                target=v2,
                renames={"nowhere": "ship", "await_payment": "await_money", "reserve": "ship"},
            )

        assert refused.value.problems == [
            "rename nowhere=ship: shop v1 has no node 'nowhere'",
            "rename nowhere=ship: shop v1 has a node 'ship' of its own; a swap or a chain of "
            "names cannot be done in one move (go through a version in between)",
            "rename await_payment=await_money: shop v2 has no node 'await_money'",
            "rename reserve=ship: shop v1 has a node 'ship' of its own; a swap or a chain of "
            "names cannot be done in one move (go through a version in between)",
            "'nowhere' and 'reserve' are all renamed to 'ship'",
        ]

    def test_moving_to_the_same_version_is_refused(self):
        with pytest.raises(InvalidMigration, match="on shop v1 already"):
            plan_migration(source=V1, target=V1)

    def test_renames_are_read_from_old_equals_new(self):
        assert parse_renames(["a=b", " c = d "]) == {"a": "b", "c": "d"}
        with pytest.raises(InvalidMigration) as refused:
            parse_renames(["a", "=b", "c=d", "c=e"])
        assert refused.value.problems == [
            "rename 'a' is not of the form old=new",
            "rename '=b' is not of the form old=new",
            "'c' is renamed twice: to 'd' and to 'e'",
        ]


class TestPosition:
    def test_a_run_waiting_at_a_renamed_node_can_move(self):
        v2 = workflow(2, act("reserve", "await_funds"), wait("await_funds", "ship"), act("ship"))
        plan = plan_migration(source=V1, target=v2, renames={"await_payment": "await_funds"})

        verdict = plan.judge(waiting_at("await_payment", "reserve"))

        assert verdict.can_move
        assert verdict.at == ("await_payment",)

    def test_a_position_missing_in_the_target_is_named_with_the_way_out(self):
        v2 = workflow(2, act("reserve", "await_funds"), wait("await_funds", "ship"), act("ship"))
        plan = plan_migration(source=V1, target=v2)

        verdict = plan.judge(waiting_at("await_payment", "reserve"))

        assert verdict.reasons == (
            "it is at 'await_payment', and shop v2 has no node 'await_payment' "
            "(name the node it becomes with a rename: await_payment=NEW)",
        )

    def test_a_position_of_another_kind_in_the_target_cannot_take_the_run(self):
        v2 = workflow(
            2,
            act("reserve", "await_payment"),
            Sleep("await_payment", duration=timedelta(hours=1), next="ship"),
            act("ship"),
        )

        verdict = plan_migration(source=V1, target=v2).judge(waiting_at("await_payment", "reserve"))

        assert verdict.reasons == (
            "it is at 'await_payment', a WaitForSignal in shop v1, but shop v2's "
            "'await_payment' is a Sleep",
        )

    def test_a_running_activity_keeps_the_run_where_it_is(self):
        plan = plan_migration(source=V1, target=workflow(2, *V1.nodes))
        running = RunPosition(
            run_id="r1",
            state=RunState.RUNNING,
            input={},
            steps=(StepAt("reserve", StepState.RUNNING, attempt=2),),
        )

        verdict = plan.judge(running)

        assert verdict.reasons == (
            "its activity 'reserve' is running (attempt 2): try again once it has finished",
        )

    def test_a_scheduled_activity_may_move_and_run_on_the_target(self):
        plan = plan_migration(source=V1, target=workflow(2, *V1.nodes))
        scheduled = RunPosition(
            run_id="r1",
            state=RunState.RUNNING,
            input={},
            steps=(StepAt("reserve", StepState.RETRY_WAIT, attempt=1),),
        )

        assert plan.judge(scheduled).can_move

    @pytest.mark.parametrize(
        "state", [RunState.COMPENSATING, RunState.CANCELLING, RunState.DEAD_LETTERED]
    )
    def test_a_run_that_is_undoing_its_steps_stays(self, state):
        plan = plan_migration(source=V1, target=workflow(2, *V1.nodes))

        verdict = plan.judge(RunPosition(run_id="r1", state=state, input={}))

        assert verdict.reasons == (
            f"it is {state}: only a pending, running, waiting or paused run can move "
            "(one that is undoing its steps finishes on shop v1)",
        )

    def test_a_pending_run_can_move_when_the_target_takes_its_input(self):
        plan = plan_migration(source=V1, target=workflow(2, *V1.nodes))

        verdict = plan.judge(RunPosition(run_id="r1", state=RunState.PENDING, input={"a": 1}))

        assert verdict.can_move
        assert verdict.at == ()

    def test_a_waiting_approval_must_ask_for_as_many_approvals(self):
        def board(required: int) -> Approval:
            return Approval("board", assignees=("alice", "bob"), required=required, on_approve=None)

        v1 = workflow(1, board(1), start="board")
        v2 = workflow(2, board(2), start="board")

        verdict = plan_migration(source=v1, target=v2).judge(waiting_at("board"))

        assert verdict.reasons == (
            "it waits at the approval 'board', which takes 1 approval(s) in shop v1 but 2 in "
            "shop v2: its open tasks were made for 1",
        )


def parallel(version: int, *branches: str, wait_for="all") -> Workflow:
    return workflow(
        version,
        Parallel("fan_out", branches=branches, join="together"),
        *(wait(branch, "together") for branch in branches),
        Join("together", wait_for=wait_for, next="done"),
        act("done"),
        start="fan_out",
    )


class TestParallelRegions:
    def test_a_branch_must_still_lead_to_a_join_waiting_for_as_many_branches(self):
        plan = plan_migration(
            source=parallel(1, "left", "right"), target=parallel(2, "left", "right", "middle")
        )
        position = RunPosition(
            run_id="r1",
            state=RunState.WAITING,
            input={},
            steps=(
                StepAt("fan_out", StepState.SUCCEEDED),
                StepAt("left", StepState.WAITING),
                StepAt("right", StepState.WAITING),
            ),
        )

        verdict = plan.judge(position)

        assert (
            verdict.reasons
            == (
                "its parallel branches meet at 'together', which waits for 2 of them in shop v1 "
                "but for 3 in shop v2",
            )
            * 2
        )

    def test_the_same_region_in_the_target_takes_the_run(self):
        plan = plan_migration(
            source=parallel(1, "left", "right"), target=parallel(2, "left", "right")
        )
        position = RunPosition(
            run_id="r1",
            state=RunState.WAITING,
            input={},
            steps=(StepAt("left", StepState.WAITING), StepAt("together", StepState.WAITING)),
        )

        assert plan.judge(position).can_move

    def test_a_branch_moved_out_of_its_region_is_named(self):
        v2 = workflow(
            2,
            Parallel("fan_out", branches=("right",), join="together"),
            wait("right", "together"),
            Join("together", next="left"),
            wait("left", "done"),
            act("done"),
            start="fan_out",
        )
        plan = plan_migration(source=parallel(1, "left", "right"), target=v2)

        verdict = plan.judge(waiting_at("left", "fan_out"))

        assert verdict.reasons == (
            "it is at 'left', inside the parallel region closed by 'together' in shop v1, but "
            "shop v2's 'left' is outside any parallel region",
        )


class TestUndo:
    def test_a_done_step_the_target_could_not_undo_keeps_the_run(self):
        v2 = workflow(
            2,
            Activity(
                "reserve", run=lambda c: None, compensate=NoCompensation("no"), next="await_payment"
            ),
            wait("await_payment", "ship"),
            act("ship"),
        )

        verdict = plan_migration(source=V1, target=v2).judge(waiting_at("await_payment", "reserve"))

        assert verdict.reasons == (
            "its step 'reserve' took effect and would be undone if the run failed, but shop v2's "
            "'reserve' has no compensation to undo it with",
        )

    def test_a_done_step_whose_node_is_gone_keeps_the_run(self):
        v2 = workflow(2, wait("await_payment", "ship"), act("ship"), start="await_payment")

        verdict = plan_migration(source=V1, target=v2).judge(waiting_at("await_payment", "reserve"))

        assert verdict.reasons == (
            "its step 'reserve' took effect and would be undone if the run failed, but shop v2 "
            "has no node 'reserve' to undo it with",
        )

    def test_a_cleanly_failed_step_needs_no_undo(self):
        v2 = workflow(2, wait("await_payment", "ship"), act("ship"), start="await_payment")
        position = RunPosition(
            run_id="r1",
            state=RunState.WAITING,
            input={},
            steps=(
                StepAt("reserve", StepState.CANCELLED, may_have_applied=False),
                StepAt("await_payment", StepState.WAITING),
            ),
        )

        assert plan_migration(source=V1, target=v2).judge(position).can_move


class Amount(BaseModel):
    amount: int
    currency: str = "EUR"


class TestData:
    def test_the_targets_input_schema_must_take_the_input(self):
        plan = plan_migration(source=V1, target=workflow(2, *V1.nodes, input_schema=Amount))

        verdict = plan.judge(waiting_at("await_payment", "reserve", input={"note": "x"}))

        assert verdict.reasons == (
            "its input does not fit shop v2's input schema (amount: Field required)",
        )

    def test_the_input_is_kept_as_the_target_reads_it(self):
        plan = plan_migration(source=V1, target=workflow(2, *V1.nodes, input_schema=Amount))

        verdict = plan.judge(waiting_at("await_payment", "reserve", input={"amount": "12"}))

        assert verdict.input == {"amount": 12, "currency": "EUR"}

    def test_a_later_node_needing_a_result_the_run_never_made_keeps_it(self):
        v2 = workflow(
            2,
            act("check_credit", "reserve"),
            act("reserve", "await_payment"),
            wait("await_payment", "ship"),
            act("ship", needs=("check_credit",)),
            start="check_credit",
        )

        verdict = plan_migration(source=V1, target=v2).judge(waiting_at("await_payment", "reserve"))

        assert verdict.reasons == (
            "shop v2's 'ship' needs the result of 'check_credit', which this run has not got "
            "and will not reach",
        )

    def test_a_need_met_by_a_done_step_or_one_still_ahead_is_fine(self):
        v2 = workflow(
            2,
            act("reserve", "await_payment"),
            wait("await_payment", "label"),
            act("label", "ship"),
            act("ship", needs=("reserve", "label")),
        )

        assert (
            plan_migration(source=V1, target=v2)
            .judge(waiting_at("await_payment", "reserve"))
            .can_move
        )

    def test_a_need_met_under_its_old_name_counts(self):
        v2 = workflow(
            2,
            act("hold_stock", "await_payment"),
            wait("await_payment", "ship"),
            act("ship", needs=("hold_stock",)),
            start="hold_stock",
        )
        plan = plan_migration(source=V1, target=v2, renames={"reserve": "hold_stock"})

        assert plan.judge(waiting_at("await_payment", "reserve")).can_move


class TestNeedsInTheStaticCheck:
    def test_a_need_must_be_a_node_that_runs_before(self):
        bad = workflow(
            1,
            act("reserve", "ship", needs=("ship",)),
            act("ship", needs=("nowhere", "ship")),
        )

        assert check_definition(bad) == [
            "'reserve' needs 'ship', which never runs before it",
            "'ship' needs 'nowhere', which is not a node",
            "'ship' needs its own result",
        ]

    def test_a_bare_name_is_refused(self):
        bad = workflow(1, act("reserve", "ship"), act("ship", needs="reserve"))

        assert check_definition(bad) == [
            "'ship' has needs='reserve': it must be a tuple of node names "
            "(write ('submit',) for one node)"
        ]
