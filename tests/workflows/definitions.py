"""Small workflow types that exercise one engine feature each (registered for tests only).

Their activities call the demo services, so every effect lands in the ledger and
tests can count it; `input["simulate"]` makes an activity misbehave by its name.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workflows import registry
from workflows.activity import ActivityContext, NonRetryableError
from workflows.calendars import BusinessTime
from workflows.dsl import (
    ANYONE,
    Activity,
    Approval,
    AttachedFile,
    Branch,
    ChildWorkflow,
    Escalation,
    GoBack,
    Join,
    Map,
    NoCompensation,
    Parallel,
    RetryPolicy,
    Revise,
    RunData,
    Sleep,
    Timeouts,
    Update,
    Updated,
    UpdateRefused,
    UserTask,
    WaitForSignal,
    Workflow,
)
from workflows.examples import services
from workflows.examples.order import ORDER

QUICK_RETRY = RetryPolicy(max_attempts=3, initial_interval=timedelta(milliseconds=100))


def effect(action: str):
    def activity(context: ActivityContext) -> dict[str, Any]:
        return services.call(
            service="test",
            action=action,
            context=context,
            behaviour=context.input.get("simulate", {}).get(action),
            data={"node": context.node},
        )

    activity.__name__ = action
    return activity


def undo_effect(action: str):
    def compensation(context: ActivityContext) -> dict[str, Any]:
        return services.undo(
            service="test",
            action=f"undo_{action}",
            undoes=action,
            context=context,
            behaviour=context.input.get("simulate", {}).get(f"undo_{action}"),
        )

    compensation.__name__ = f"undo_{action}"
    return compensation


def step(name: str, next: str | None = None, **options: Any) -> Activity:
    """A mutating test activity named `name`, undone by `undo_<name>`."""
    return Activity(
        name,
        run=effect(name),
        compensate=undo_effect(name),
        next=next,
        retry=QUICK_RETRY,
        compensation_retry=QUICK_RETRY,
        **options,
    )


LINEAR = Workflow(
    name="test_linear",
    version=1,
    start="first",
    nodes=(step("first", "second"), step("second", "third"), step("third")),
)

PARALLEL_ALL = Workflow(
    name="test_parallel_all",
    version=1,
    start="fan_out",
    nodes=(
        Parallel("fan_out", branches=("left", "right"), join="together"),
        step("left", "together"),
        step("right", "together"),
        Join("together", wait_for="all", next="after"),
        step("after"),
    ),
)

PARALLEL_ANY = Workflow(
    name="test_parallel_any",
    version=1,
    start="fan_out",
    nodes=(
        Parallel("fan_out", branches=("left", "gate"), join="first_wins"),
        step("left", "first_wins"),
        WaitForSignal("gate", signals={"open": "right"}),
        step("right", "first_wins"),
        Join("first_wins", wait_for="any", next="after"),
        step("after"),
    ),
)

BRANCHING = Workflow(
    name="test_branching",
    version=1,
    start="is_big",
    nodes=(
        Branch(
            "is_big",
            condition=lambda data: data.input["amount"] > 100,
            if_true="big",
            if_false="small",
        ),
        step("big"),
        step("small"),
    ),
)

SIGNALLED = Workflow(
    name="test_signalled",
    version=1,
    start="prepare",
    nodes=(
        step("prepare", "await_go"),
        WaitForSignal(
            "await_go",
            signals={"go": "went", "stop": None},
            timeout=timedelta(minutes=5),
            on_timeout="timed_out",
        ),
        step("went"),
        Activity("timed_out", run=effect("timed_out"), mutating=False),
    ),
)

SLEEPING = Workflow(
    name="test_sleeping",
    version=1,
    start="nap",
    nodes=(
        Sleep("nap", duration=timedelta(seconds=1), next="wake_up"),
        Activity("wake_up", run=effect("wake_up"), compensate=NoCompensation("a test")),
    ),
)


def kill_the_worker(context: ActivityContext) -> None:
    """Kill the process running it: a poison message. Never call it in the test process."""
    os.kill(os.getpid(), signal.SIGKILL)


POISON = Workflow(
    name="test_poison",
    version=1,
    start="prepare",
    nodes=(
        step("prepare", "poison"),
        Activity(
            "poison",
            run=kill_the_worker,
            mutating=False,
            retry=QUICK_RETRY,
            timeouts=Timeouts(start_to_close=timedelta(seconds=2)),
        ),
    ),
)

for workflow in (LINEAR, PARALLEL_ALL, PARALLEL_ANY, BRANCHING, SIGNALLED, SLEEPING, POISON):
    registry.register(workflow)

TWO_OF_THREE = Workflow(
    name="test_two_of_three",
    version=1,
    start="board",
    nodes=(
        Approval(
            "board",
            title="Board vote",
            assignees=("alice", "bob"),
            groups=("finance",),
            required=2,
            on_approve="after",
            on_reject=None,
        ),
        step("after"),
    ),
)
registry.register(TWO_OF_THREE)

# Two of alice, bob and carol, one share each: a run one of them starts has one
# share its requester may not decide (approvals' separation of duties).
TWO_OF_THREE_PEOPLE = Workflow(
    name="test_two_of_three_people",
    version=1,
    start="board",
    nodes=(
        Approval(
            "board",
            title="Board vote of three people",
            assignees=("alice", "bob", "carol"),
            required=2,
            on_approve="after",
            on_reject=None,
        ),
        step("after"),
    ),
)
registry.register(TWO_OF_THREE_PEOPLE)


class BoardVote(BaseModel):
    """What each board member records with their approval."""

    model_config = ConfigDict(extra="forbid")

    budget_line: str = Field(min_length=1, max_length=20, description="the budget line to use")
    remark: str = Field(default="", max_length=200)


# Two of three approve, each recording their own values (approvals' task forms).
TWO_OF_THREE_WITH_FORM = Workflow(
    name="test_two_of_three_with_form",
    version=1,
    start="board",
    nodes=(
        Approval(
            "board",
            title="Board vote with a form",
            assignees=("alice", "bob"),
            groups=("finance",),
            required=2,
            on_approve="after",
            on_reject=None,
            form=BoardVote,
        ),
        step("after"),
    ),
)
registry.register(TWO_OF_THREE_WITH_FORM)


class PaidWithReceipt(BaseModel):
    """What the payer records: which of the request's files is the receipt."""

    model_config = ConfigDict(extra="forbid")

    receipt: AttachedFile = Field(description="the receipt, one of the request's files")
    note: str = Field(default="", max_length=200)


# An approval whose form requires one of the request's attached files.
RECEIPT_REQUIRED = Workflow(
    name="test_receipt_required",
    version=1,
    start="pay",
    nodes=(
        Approval(
            "pay",
            title="Pay against a receipt",
            assignees=("bob",),
            on_approve="after",
            on_reject=None,
            form=PaidWithReceipt,
        ),
        step("after"),
    ),
)
registry.register(RECEIPT_REQUIRED)


class BankDetails(BaseModel):
    """What finance types in before paying: where the money goes."""

    model_config = ConfigDict(extra="forbid")

    account_holder: str = Field(min_length=1, max_length=120, description="the name on the account")
    iban: str = Field(
        min_length=15,
        max_length=34,
        pattern=r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$",
        description="the IBAN, capitals and digits without spaces, e.g. DE89370400440532013000",
    )
    reference: str = Field(default="", max_length=140, description="on the transfer")


class PayeeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requester: str = Field(min_length=1, max_length=150)
    amount: str = Field(min_length=1, max_length=20)


def pay_to_account(context: ActivityContext) -> dict[str, Any]:
    """Pay to the account finance typed in: read from the user task's form values."""
    account = RunData(input=context.input, results=context.results).form_values(
        "collect_bank_details"
    )
    return services.call(
        service="test",
        action="pay",
        context=context,
        behaviour=None,
        data={"iban": account["iban"], "amount": context.input["amount"]},
    )


# A data-entry task: finance types the payee's bank details, then the payment uses them.
BANK_DETAILS = Workflow(
    name="test_bank_details",
    version=1,
    input_schema=PayeeInput,
    requester_field="requester",
    starters=ANYONE,
    start="collect_bank_details",
    nodes=(
        UserTask(
            "collect_bank_details",
            title="Bank details for a payment",
            groups=("finance",),
            form=BankDetails,
            next="pay",
        ),
        Activity(
            "pay",
            run=pay_to_account,
            compensate=undo_effect("pay"),
            retry=QUICK_RETRY,
            needs=("collect_bank_details",),
        ),
    ),
)
registry.register(BANK_DETAILS)


# Definitions that reproduce races found in review (see tests/workflows/test_edge_cases.py).
SLEEP_RACE = Workflow(
    name="test_sleep_race",
    version=1,
    start="fan_out",
    nodes=(
        Parallel("fan_out", branches=("short", "also_short"), join="first_wins"),
        Sleep("short", duration=timedelta(seconds=5), next="first_wins"),
        Sleep("also_short", duration=timedelta(seconds=5), next="first_wins"),
        Join("first_wins", wait_for="any", next="after"),
        step("after"),
    ),
)

RACE_ANY = Workflow(
    name="test_race_any",
    version=1,
    start="fan_out",
    nodes=(
        Parallel("fan_out", branches=("fast", "slow"), join="first_wins"),
        step("fast", "first_wins"),
        step("slow", "first_wins"),
        Join("first_wins", wait_for="any", next="after"),
        step("after"),
    ),
)

PROMPT = Workflow(
    name="test_prompt",
    version=1,
    start="first",
    nodes=(
        step("first", "second", timeouts=Timeouts(schedule_to_start=timedelta(seconds=10))),
        step("second", timeouts=Timeouts(schedule_to_start=timedelta(seconds=10))),
    ),
)

for workflow in (SLEEP_RACE, RACE_ANY, PROMPT):
    registry.register(workflow)

DEADLINE_FAILS = Workflow(
    name="test_deadline_fails",
    version=1,
    start="prepare",
    nodes=(
        step("prepare", "sign_off"),
        Approval(
            "sign_off",
            title="Sign off",
            assignees=("carol",),
            deadline=timedelta(hours=1),
            on_deadline="fail",
            on_approve=None,
            on_reject=None,
        ),
    ),
)

DEADLINE_WAITS = Workflow(
    name="test_deadline_waits",
    version=1,
    start="sign_off",
    nodes=(
        Approval(
            "sign_off",
            title="Sign off",
            assignees=("carol",),
            escalations=(Escalation(after=timedelta(days=3), to_groups=("finance",)),),
            deadline=timedelta(hours=1),
            on_deadline="keep_waiting",
            on_approve=None,
            on_reject=None,
        ),
    ),
)

# A deadline in business time on a calendar of its own, which tests create (or not).
BUSINESS_DEADLINE = Workflow(
    name="test_business_deadline",
    version=1,
    start="sign_off",
    nodes=(
        Approval(
            "sign_off",
            title="Sign off",
            assignees=("carol",),
            deadline=BusinessTime(hours=4, calendar="berlin-office"),
            on_deadline="reject",
            on_approve=None,
            on_reject=None,
        ),
    ),
)

# Timers in business time: a nap of two working hours, then a wait of one working day.
BUSINESS_TIMERS = Workflow(
    name="test_business_timers",
    version=1,
    start="nap",
    nodes=(
        Sleep("nap", duration=BusinessTime(hours=2), next="await_go"),
        WaitForSignal(
            "await_go",
            signals={"go": None},
            timeout=BusinessTime(days=1),
            on_timeout="timed_out",
        ),
        Activity("timed_out", run=effect("timed_out"), mutating=False),
    ),
)

for workflow in (DEADLINE_FAILS, DEADLINE_WAITS, BUSINESS_DEADLINE, BUSINESS_TIMERS):
    registry.register(workflow)


def answer(value: str):
    """A read-only activity that touches nothing and returns `value`."""

    def activity(context: ActivityContext) -> str:
        return value

    activity.__name__ = f"answer_{value}"
    return activity


REMOTE_THEN_LOCAL = Workflow(
    name="remote_then_local",
    version=1,
    start="remote",
    nodes=(
        Activity("remote", run=answer("remote"), mutating=False, next="local"),
        Activity("local", run=answer("local"), mutating=False, local=True),
    ),
)
registry.register(REMOTE_THEN_LOCAL)

LOCAL_CHAIN = Workflow(
    name="local_chain",
    version=1,
    start="first",
    nodes=(
        Activity("first", run=answer("first"), mutating=False, local=True, next="second"),
        Activity("second", run=answer("second"), mutating=False, local=True),
    ),
)
registry.register(LOCAL_CHAIN)


# Loops: a GoBack sends the run back for another round (see tests/workflows/test_loops.py).
def round_effect(action: str):
    """Like `effect`, but `input["simulate"]` may name one round: `{"draft@1": "slow"}`."""

    def activity(context: ActivityContext) -> dict[str, Any]:
        simulate = context.input.get("simulate", {})
        return services.call(
            service="test",
            action=action,
            context=context,
            behaviour=simulate.get(f"{action}@{context.round}", simulate.get(action)),
            data={"node": context.node, "round": context.round},
        )

    activity.__name__ = action
    return activity


def enough_rounds(data: RunData) -> bool:
    """Whether the run has drafted `input["rounds"]` times (the loop's own count says so)."""
    gone_back = data.results.get("send_back", {}).get("rounds_run", 0)
    return gone_back + 1 >= data.input.get("rounds", 1)


def looping(name: str, *, otherwise: str | None) -> Workflow:
    """Draft until `input["rounds"]` drafts are done, at most three; then publish."""
    return Workflow(
        name=name,
        version=1,
        start="prepare",
        nodes=(
            step("prepare", "draft"),
            Activity(
                "draft",
                run=round_effect("draft"),
                compensate=undo_effect("draft"),
                next="check",
                retry=QUICK_RETRY,
                compensation_retry=QUICK_RETRY,
                timeouts=Timeouts(heartbeat=timedelta(seconds=2)),
            ),
            Branch("check", condition=enough_rounds, if_true="publish", if_false="send_back"),
            GoBack("send_back", to="draft", max_rounds=3, otherwise=otherwise),
            step("publish"),
            *([Activity("give_up", run=effect("give_up"), mutating=False)] if otherwise else []),
        ),
    )


LOOPING = looping("test_looping", otherwise="give_up")
LOOPING_FAILS = looping("test_looping_fails", otherwise=None)

REVISED = Workflow(
    name="test_revised",
    version=1,
    start="revise",
    nodes=(
        step("revise", "sign_off"),
        Approval(
            "sign_off",
            title="Sign off the revision",
            assignees=("carol",),
            on_approve="publish",
            on_reject="send_back",
        ),
        GoBack("send_back", to="revise", max_rounds=2, otherwise=None),
        step("publish"),
    ),
)


class Draft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    author: str = Field(min_length=1)
    text: str = Field(min_length=1, max_length=200)


# Sent back for changes through a Revise node, with an activity before the GoBack, so the
# approval cannot tell its rounds in advance: past them, the run goes the otherwise way.
REWORKED = Workflow(
    name="test_reworked",
    version=1,
    start="review",
    input_schema=Draft,
    requester_field="author",
    nodes=(
        Approval(
            "review",
            title="Review the draft",
            assignees=("carol",),
            on_approve="publish",
            on_reject=None,
            on_changes_requested="rework",
        ),
        Revise("rework", next="log_rework"),
        step("log_rework", "again"),
        GoBack("again", to="review", max_rounds=2, otherwise="give_up"),
        step("publish"),
        step("give_up"),
    ),
)

for workflow in (LOOPING, LOOPING_FAILS, REVISED, REWORKED):
    registry.register(workflow)


# Child workflows and maps (see tests/workflows/test_child.py and test_map.py).
def _holds(data: RunData) -> bool:
    return bool(data.input.get("hold"))


def _child_done(context: ActivityContext) -> dict[str, Any]:
    return {"done": True, "label": context.input.get("label", "")}


# A child: does its work (undone by undo_child_work), may hold until a `go` signal,
# then answers. `input["simulate"]` makes child_work misbehave, as elsewhere.
CHILD = Workflow(
    name="test_child",
    version=1,
    start="child_work",
    nodes=(
        # A heartbeat timeout, so a worker killed mid-work is noticed within seconds.
        step("child_work", "maybe_hold", timeouts=Timeouts(heartbeat=timedelta(seconds=2))),
        Branch("maybe_hold", condition=_holds, if_true="hold", if_false="child_done"),
        WaitForSignal("hold", signals={"go": "child_done"}),
        Activity("child_done", run=_child_done, mutating=False),
    ),
)


def _child_input(data: RunData) -> dict[str, Any]:
    return {
        "simulate": data.input.get("child_simulate", {}),
        "hold": data.input.get("hold", False),
        "label": "only",
    }


CHILD_RETRY = RetryPolicy(max_attempts=2, initial_interval=timedelta(milliseconds=100))

# A parent: before, then a child run of test_child, then after (which may decline,
# failing the run so that everything before it is undone, the child included).
PARENT = Workflow(
    name="test_parent",
    version=1,
    start="before",
    nodes=(
        step("before", "call"),
        ChildWorkflow(
            "call", workflow="test_child", input=_child_input, next="after", retry=CHILD_RETRY
        ),
        step("after"),
    ),
)


def item_effect(context: ActivityContext) -> dict[str, Any]:
    """One item's effect: `input["simulate"]` may name an item, `{"item1": "decline"}`."""
    return services.call(
        service="test",
        action="item",
        context=context,
        behaviour=context.input.get("simulate", {}).get(f"item{context.item_index}"),
        data={"item": context.item, "index": context.item_index},
    )


def undo_item_effect(context: ActivityContext) -> dict[str, Any]:
    return services.undo(
        service="test", action="undo_item", undoes="item", context=context, behaviour=None
    )


def _items(data: RunData) -> list[Any]:
    return list(data.input.get("items", []))


def mapping(name: str, *, on_failure: str) -> Workflow:
    """A map over `input["items"]`, two at a time, then `after`."""
    return Workflow(
        name=name,
        version=1,
        start="each",
        nodes=(
            Map(
                "each",
                items=_items,
                activity=item_effect,
                compensate=undo_item_effect,
                max_concurrency=2,
                on_failure=on_failure,  # type: ignore[arg-type]
                retry=QUICK_RETRY,
                compensation_retry=QUICK_RETRY,
                next="after",
            ),
            step("after"),
        ),
    )


MAP_FAIL_FAST = mapping("test_map", on_failure="fail_fast")
MAP_FINISH_ALL = mapping("test_map_finish_all", on_failure="finish_all")


def _item_child_input(data: RunData, item: dict[str, Any]) -> dict[str, Any]:
    return {"label": item["label"], "hold": item.get("hold", False), **item.get("child", {})}


# A map over child workflows: a test_child run per item, two at a time.
MAP_CHILDREN = Workflow(
    name="test_map_children",
    version=1,
    start="each",
    nodes=(
        Map(
            "each",
            items=_items,
            workflow="test_child",
            input=_item_child_input,
            max_concurrency=2,
            next="after",
        ),
        step("after"),
    ),
)

# A child and a map in flight at once (tests/e2e kills a worker in the middle).
CHILD_AND_MAP = Workflow(
    name="test_child_and_map",
    version=1,
    start="split",
    nodes=(
        Parallel("split", branches=("call", "each"), join="joined"),
        ChildWorkflow("call", workflow="test_child", input=_child_input, next="joined"),
        Map(
            "each",
            items=_items,
            activity=item_effect,
            compensate=undo_item_effect,
            max_concurrency=2,
            retry=QUICK_RETRY,
            compensation_retry=QUICK_RETRY,
            timeouts=Timeouts(heartbeat=timedelta(seconds=2)),
            next="joined",
        ),
        Join("joined", next="after"),
        step("after"),
    ),
)

for workflow in (CHILD, PARENT, MAP_FAIL_FAST, MAP_FINISH_ALL, MAP_CHILDREN, CHILD_AND_MAP):
    registry.register(workflow)


# Two versions of one type, for moving live runs between them (tests/workflows/test_migrate.py).
# v1 is registered with the others; a test deploys v2 beside it with the `versions`
# fixture there. `input["path"]` picks where a v1 run waits.
def _path_is(path: str):
    def condition(data: RunData) -> bool:
        return data.input.get("path") == path

    condition.__name__ = f"path_is_{path}"
    return condition


VERSIONED_V1 = Workflow(
    name="test_versioned",
    version=1,
    start="route",
    nodes=(
        Branch("route", condition=_path_is("side"), if_true="side_track", if_false="work_or_not"),
        WaitForSignal("side_track", signals={"go": "finish"}),
        Branch("work_or_not", condition=_path_is("work"), if_true="work", if_false="check"),
        step("work", "await_go"),
        Branch("check", condition=_path_is("approve"), if_true="sign_off", if_false="await_go"),
        Approval(
            "sign_off",
            title="Sign off",
            assignees=("carol",),
            on_approve="await_go",
            on_reject=None,
        ),
        WaitForSignal("await_go", signals={"go": "finish"}),
        step("finish"),
    ),
)
registry.register(VERSIONED_V1)


class VersionedInput(BaseModel):
    """v2 needs an amount, which v1 never asked for."""

    path: str = ""
    amount: int = Field(ge=0)


# v2 has no side track, renames sign_off to review and await_go to await_signal, and
# wants an amount in the input; `finish` declares that it reads `route`'s result.
VERSIONED_V2 = Workflow(
    name="test_versioned",
    version=2,
    start="route",
    input_schema=VersionedInput,
    nodes=(
        Branch("route", condition=_path_is("work"), if_true="work", if_false="check"),
        step("work", "await_signal"),
        Branch("check", condition=_path_is("approve"), if_true="review", if_false="await_signal"),
        Approval(
            "review",
            title="Review",
            assignees=("carol",),
            on_approve="await_signal",
            on_reject=None,
        ),
        WaitForSignal("await_signal", signals={"go": "finish"}),
        step("finish", needs=("route",)),
    ),
)
VERSIONED_RENAMES = {"sign_off": "review", "await_go": "await_signal"}


# Catch paths (see tests/workflows/test_catch.py): a declined charge goes to a manual
# review instead of undoing the run; so does a charge that runs out of time.
CATCHING = Workflow(
    name="test_catching",
    version=1,
    start="prepare",
    nodes=(
        step("prepare", "charge"),
        Activity(
            "charge",
            run=effect("charge"),
            compensate=undo_effect("charge"),
            next="ship",
            on_error={"PaymentDeclined": "manual_review", "Timeout": "manual_review"},
            retry=RetryPolicy(max_attempts=1),
            compensation_retry=QUICK_RETRY,
        ),
        step("ship"),
        step("manual_review"),
    ),
)

# Run deadlines (see tests/workflows/test_deadlines.py): a wait that may outlive its run.
RUN_DEADLINE_CANCELS = Workflow(
    name="test_run_deadline_cancels",
    version=1,
    start="prepare",
    deadline=timedelta(days=30),
    nodes=(
        step("prepare", "await_go"),
        WaitForSignal("await_go", signals={"go": "went"}),
        step("went"),
    ),
)

RUN_DEADLINE_MOVES = Workflow(
    name="test_run_deadline_moves",
    version=1,
    start="prepare",
    deadline=BusinessTime(days=2),
    on_deadline="expire",
    nodes=(
        step("prepare", "await_go"),
        WaitForSignal("await_go", signals={"go": "went"}),
        step("went"),
        step("expire"),
    ),
)

# Two of three branches (see TestNOfMJoin in tests/workflows/test_engine.py): each
# branch does its work in two steps, so a losing branch may have completed one.
TWO_OF_THREE_BRANCHES = Workflow(
    name="test_two_of_three_branches",
    version=1,
    start="fan_out",
    nodes=(
        Parallel("fan_out", branches=("a1", "b1", "c1"), join="two_of_three"),
        step("a1", "a2"),
        step("a2", "two_of_three"),
        step("b1", "b2"),
        step("b2", "two_of_three"),
        # Heartbeats, so a straggler stopped mid-call is undone within seconds.
        step("c1", "c2", timeouts=Timeouts(heartbeat=timedelta(seconds=2))),
        step("c2", "two_of_three", timeouts=Timeouts(heartbeat=timedelta(seconds=30))),
        Join("two_of_three", wait_for=2, next="after"),
        step("after"),
    ),
)

# A deadline real workers see pass (tests/e2e): two seconds, then the run expires.
RUN_DEADLINE_SOON = Workflow(
    name="test_run_deadline_soon",
    version=1,
    start="prepare",
    deadline=timedelta(seconds=2),
    on_deadline="expire",
    nodes=(
        step("prepare", "await_go"),
        WaitForSignal("await_go", signals={"go": "went"}),
        step("went"),
        step("expire"),
    ),
)

for workflow in (
    CATCHING,
    RUN_DEADLINE_CANCELS,
    RUN_DEADLINE_MOVES,
    RUN_DEADLINE_SOON,
    TWO_OF_THREE_BRANCHES,
):
    registry.register(workflow)


# The kit's own check of catch paths, run deadlines and maps together (see
# tests/workflows/test_loan_with_kit.py): a loan is paid out in tranches, two at a
# time. A declined credit check goes to an underwriter instead of undoing the
# application; an application still open after 30 days expires, whatever it waits for.
class CreditDeclined(NonRetryableError):
    """The credit bureau said no: a business answer, not a fault, so never retried."""


def _tranches(data: RunData) -> list[int]:
    return list(data.input.get("tranches", [100, 100, 100]))


LOAN = Workflow(
    name="test_loan",
    version=1,
    start="open_file",
    deadline=timedelta(days=30),
    on_deadline="expire",
    nodes=(
        step("open_file", "check_credit"),
        Activity(
            "check_credit",
            run=effect("check_credit"),
            mutating=False,
            next="disburse",
            on_error={"CreditDeclined": "underwriting", "Timeout": "underwriting"},
            retry=QUICK_RETRY,
        ),
        WaitForSignal("underwriting", signals={"approve": "disburse", "decline": "close_file"}),
        Map(
            "disburse",
            items=_tranches,
            activity=item_effect,
            compensate=undo_item_effect,
            max_concurrency=2,
            retry=QUICK_RETRY,
            compensation_retry=QUICK_RETRY,
            next="notify",
        ),
        Activity("notify", run=effect("notify"), mutating=False),
        Activity("close_file", run=effect("close_file"), mutating=False),
        Activity("expire", run=effect("expire"), mutating=False),
    ),
)
registry.register(LOAN)


# Queries, updates and signals by business key (tests/workflows/test_queries.py,
# test_updates.py, test_business_keys.py): a quote is prepared, waits for the
# customer's go, then charges. While it waits, its amount may change (an update
# validated by AmountChange); anyone may ask for the quote (a query).
class QuotedOrder(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(min_length=1)
    amount: int = Field(gt=0)
    currency: str = "EUR"


class AmountChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    amount: int = Field(gt=0)
    reason: str = Field(min_length=1)


class Acceptance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accepted_by: str = Field(min_length=1)


def quote(data: RunData) -> dict[str, Any]:
    return {
        "order_id": data.input["order_id"],
        "amount": data.input["amount"],
        "currency": data.input["currency"],
        "prepared": "prepare" in data.results,
    }


def change_amount(data: RunData, change: AmountChange) -> Updated:
    was = data.input["amount"]
    if change.amount > 10 * was:
        raise UpdateRefused(f"{change.amount} is more than ten times the quoted {was}.")
    return Updated(
        result={"was": was, "now": change.amount}, input={**data.input, "amount": change.amount}
    )


def accept(data: RunData, acceptance: Acceptance) -> dict[str, Any]:
    return {"accepted": data.input["amount"], "by": acceptance.accepted_by}


QUOTED = Workflow(
    name="test_quoted",
    version=1,
    start="prepare",
    input_schema=QuotedOrder,
    searchable=("order_id",),
    starters=ANYONE,
    nodes=(
        step("prepare", "await_go"),
        WaitForSignal("await_go", signals={"go": "charge", "accept": "charge", "stop": None}),
        step("charge"),
    ),
    queries={"quote": quote, "broken": lambda data: data.input["missing"]},
    updates={
        "change_amount": Update(change_amount, schema=AmountChange, waiting_at=("await_go",)),
        # An update whose name the wait listens for: answered, then the run goes on.
        "accept": Update(accept, schema=Acceptance),
    },
)
registry.register(QUOTED)


def which_worker(context: ActivityContext) -> dict[str, Any]:
    """Say which worker ran the attempt (its process group: one per worker the e2e tests
    start), after `input["seconds"]` of work."""
    time.sleep(float(context.input.get("seconds", 0)))
    return {"worker": os.getpgid(0), "item": context.item}


# Charges on the PCI workers (`-Q payments`), the receipt on any worker.
PAYMENTS = Workflow(
    name="test_payments",
    version=1,
    start="charge",
    nodes=(
        Activity(
            "charge",
            run=which_worker,
            compensate=NoCompensation("reads only"),
            queue="payments",
            next="receipt",
        ),
        Activity("receipt", run=which_worker, compensate=NoCompensation("reads only")),
    ),
)
registry.register(PAYMENTS)


def _count(data: RunData) -> list[int]:
    return list(range(int(data.input["count"])))


# A map whose items call a rate-limited service: at most 5 at once and 10 a second,
# across every run and worker, on workers of their own (`-Q limited`).
LIMITED_MAP = Workflow(
    name="test_limited_map",
    version=1,
    start="call_each",
    nodes=(
        Map(
            "call_each",
            items=_count,
            activity=which_worker,
            compensate=NoCompensation("reads only"),
            max_concurrency=50,
            queue="limited",
            rate_limit="10/s",
            concurrency=5,
        ),
    ),
)
registry.register(LIMITED_MAP)


# Brief-lease twins of a few types, named `<type>_brief`, for tests/e2e/test_two_of_everything.py:
# every attempt that reports no heartbeat holds its step for BRIEF_LEASE instead of
# start_to_close's default five minutes, so an attempt lost with a SIGKILLed worker is
# taken back by the sweep within seconds. Children are started as their brief twins.
BRIEF_LEASE = timedelta(seconds=15)


def brief(workflow: Workflow) -> Workflow:
    def briefer(node: Any) -> Any:
        timeouts = getattr(node, "timeouts", None)
        if timeouts is not None and timeouts.heartbeat is None:
            node = replace(node, timeouts=replace(timeouts, start_to_close=BRIEF_LEASE))
        if isinstance(getattr(node, "workflow", None), str):
            node = replace(node, workflow=f"{node.workflow}_brief")
        return node

    nodes = tuple(briefer(node) for node in workflow.nodes)
    return replace(workflow, name=f"{workflow.name}_brief", nodes=nodes)


for workflow in (ORDER, LINEAR, SLEEPING, TWO_OF_THREE_PEOPLE, CHILD, CHILD_AND_MAP):
    registry.register(brief(workflow))
