"""The definition language: a workflow is a small graph of frozen nodes, checked statically.

A definition says *what* happens in which order; business logic lives in the
activity functions it names. The graph has no cycle except through a `GoBack`,
a bounded back edge: a node runs at most once per round (retries repeat an
attempt, never a node), and each time a run goes back a new round begins, which
is what lets the engine key every step on (run, node, round) and never replay
history.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Annotated, Any, Literal
from uuid import UUID

import pydantic
from django.utils.translation import gettext

from workflows import field_errors, personal, queues
from workflows.activity import ActivityContext
from workflows.calendars import BusinessTime, Duration
from workflows.cleaning import Refused, refuse_unstorable

ActivityFunction = Callable[[ActivityContext], Any]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failing activity is tried again."""

    max_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    max_interval: timedelta = timedelta(minutes=1)
    # Exception class names that fail the step at once, whatever attempts remain.
    non_retryable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timeouts:
    """Temporal's three activity timeouts; the sweep enforces them from database times."""

    # Scheduled but not picked up by a worker within this: counts as a failed attempt.
    schedule_to_start: timedelta | None = None
    # One attempt may run at most this long.
    start_to_close: timedelta = timedelta(minutes=5)
    # An attempt that reports no heartbeat within this is presumed dead.
    heartbeat: timedelta | None = None

    @property
    def first_lease(self) -> timedelta:
        """How long a new attempt holds its step before the sweep may take it back."""
        if self.heartbeat is None:
            return self.start_to_close
        return min(self.start_to_close, self.heartbeat)


@dataclass(frozen=True)
class NoCompensation:
    """An explicit decision that a mutating activity needs no undo, with the reason."""

    reason: str


@dataclass(frozen=True)
class RunData:
    """What conditions see: the run's validated input and the results so far, by node."""

    input: Mapping[str, Any]
    results: Mapping[str, Any]

    def __post_init__(self) -> None:
        # Conditions, titles and assignees read personal fields as their values, not
        # their sealed envelopes (nothing to open, nothing copied, for other types).
        object.__setattr__(self, "input", personal.reveal_fields(self.input))

    def form_values(self, node: str) -> dict[str, Any]:
        """Return what the decider of approval `node` entered in its form ({} if nothing).

        Only an approval decided by one person has these; with `required` above 1,
        each decision in `results[node]["payload"]["decisions"]` carries its own.
        """
        result = self.results.get(node) or {}
        return dict(personal.reveal_fields((result.get("payload") or {}).get("values") or {}))


# ---------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    name: str
    # The nodes whose results this one reads (in its activity, condition, title or
    # assignees). Declaring them lets an operator move live runs to this definition
    # only when the results are there (see workflows.versions); keyword-only, so
    # every kind takes it: `Activity("pay", run=pay, needs=("finance_approval",))`.
    needs: tuple[str, ...] = field(default=(), kw_only=True)
    # What people read for this node (the timeline, the picture, where a request
    # stands): "Manager approval". It may be a lazy translation (gettext_lazy), said in
    # the reader's language; without one, the name with spaces. The name stays the
    # node's id in URLs, the API and the stored rows.
    label: str = field(default="", kw_only=True)

    def exits(self) -> tuple[str | None, ...]:
        """Return where this node can lead; None means the run ends there."""
        return ()

    def successors(self) -> tuple[str, ...]:
        """Return every node this one can lead to (for the static check and drawing)."""
        return tuple(name for name in self.exits() if name is not None)


@dataclass(frozen=True)
class Activity(Node):
    """Run a function on a worker, with retries, timeouts and (if it mutates) a compensation."""

    run: ActivityFunction
    next: str | None = None
    # Mutating activities must name their undo or say why they need none.
    compensate: ActivityFunction | NoCompensation | None = None
    mutating: bool = True
    retry: RetryPolicy = RetryPolicy()
    compensation_retry: RetryPolicy = RetryPolicy(max_attempts=5)
    timeouts: Timeouts = Timeouts()
    # Run on the worker that finished the previous step, without a broker round trip.
    local: bool = False
    # Catch paths (a BPMN error boundary): where the run goes when the step fails for
    # good with an error of this type, instead of being undone. Keys are exception
    # class names (see `catch_target`); values are node names.
    on_error: Mapping[str, str] = field(default_factory=dict)
    # The Celery queue its steps go to (None: Baton's steps queue); see workflows.queues.
    queue: str | None = None
    # At most this many attempts start per window ("50/m"), and run at once, counted
    # across every worker by the database (see workflows.queues).
    rate_limit: str | None = None
    concurrency: int | None = None

    def exits(self) -> tuple[str | None, ...]:
        return (self.next, *self.on_error.values())

    @property
    def compensation(self) -> ActivityFunction | None:
        return None if isinstance(self.compensate, NoCompensation) else self.compensate

    def catch_target(self, error: Mapping[str, Any]) -> str | None:
        """Return the node a failure for good with `error` goes to, or None to undo the run.

        `error` is what the step recorded: its `type` (the exception's class name, or
        the engine's name for a timeout) and `bases` (the names of that class's own
        base classes, nearest first, `Exception` and above left out). The most
        specific match wins: the type itself, then each base in turn, then
        `"Timeout"` for any of the engine's timeouts (TIMEOUT_ERRORS).
        """
        if not self.on_error:
            return None
        names = [error.get("type", ""), *error.get("bases", ())]
        if error.get("type") in TIMEOUT_ERRORS:
            names.append(CATCH_TIMEOUT)
        for name in names:
            if name in self.on_error:
                return self.on_error[name]
        return None


# The errors the engine records when an activity runs out of time (a failed attempt
# that is retried like any other); `on_error={"Timeout": ...}` catches them all.
TIMEOUT_ERRORS = ("StartToCloseTimeout", "HeartbeatTimeout", "ScheduleToStartTimeout")
CATCH_TIMEOUT = "Timeout"


@dataclass(frozen=True)
class Branch(Node):
    """Go one way or the other on a condition over the run's data."""

    condition: Callable[[RunData], bool]
    if_true: str | None
    if_false: str | None

    def exits(self) -> tuple[str | None, ...]:
        return (self.if_true, self.if_false)


@dataclass(frozen=True)
class Parallel(Node):
    """Start every branch at once; each branch's path must lead into `join`."""

    branches: tuple[str, ...]
    join: str

    def exits(self) -> tuple[str | None, ...]:
        return self.branches


@dataclass(frozen=True)
class Join(Node):
    """Continue once enough branches arrived: all of them, any one, or N of them.

    With `any` or N of M, the join goes on as soon as enough branches arrived; the
    others lose the race: their steps not yet done are cancelled (a running one
    hears it at its next heartbeat), and their steps that completed are undone,
    most recent first, while the run goes on. The run ends only once that undo is over.
    """

    wait_for: Literal["all", "any"] | int = "all"
    next: str | None = None

    def exits(self) -> tuple[str | None, ...]:
        return (self.next,)

    def required(self, branch_count: int) -> int:
        if self.wait_for == "all":
            return branch_count
        if self.wait_for == "any":
            return 1
        return self.wait_for


@dataclass(frozen=True)
class Sleep(Node):
    """Wait for a fixed time, kept in the database and fired by the sweep."""

    duration: Duration  # a timedelta, or BusinessTime counted on a business calendar
    next: str | None = None

    def exits(self) -> tuple[str | None, ...]:
        return (self.next,)


@dataclass(frozen=True)
class WaitForSignal(Node):
    """Wait for the first of several signals, or a timeout, and go where it says."""

    signals: Mapping[str, str | None]
    timeout: Duration | None = None  # a timedelta or BusinessTime
    on_timeout: str | None = None

    def exits(self) -> tuple[str | None, ...]:
        # A timeout with nowhere to go fails the step (it does not end the run).
        timeout = (self.on_timeout,) if self.on_timeout is not None else ()
        return (*self.signals.values(), *timeout)

    def next_after(self, signal_name: str | None) -> str | None:
        """Return the node that follows `signal_name` (None means the timeout fired)."""
        return self.on_timeout if signal_name is None else self.signals[signal_name]


@dataclass(frozen=True)
class GoBack(Node):
    """Go back to an earlier node for another round, at most `max_rounds` rounds in all.

    The only way a definition may loop (send a request back for changes, try a
    negotiation again). Every node entered again gets a new step in the next round,
    with its own idempotency key; earlier rounds' steps stay as they were. Once
    the loop has run `max_rounds` times (the first round included, counted per
    run), the run goes to `otherwise` instead, or with no `otherwise` the step
    fails and the run's completed steps are undone.
    """

    to: str
    max_rounds: int | None = None
    otherwise: str | None = None

    def exits(self) -> tuple[str | None, ...]:
        # Exhausted rounds with nowhere to go fail the step (they do not end the run).
        return (self.to, *((self.otherwise,) if self.otherwise is not None else ()))

    def forward_exits(self) -> tuple[str, ...]:
        """Return where this node leads other than back (the static check's acyclic graph)."""
        return (self.otherwise,) if self.otherwise is not None else ()


@dataclass(frozen=True)
class ChildWorkflow(Node):
    """Start a run of the type `workflow` as this run's child, wait for it and take its result.

    The child's input is `input` of the run's data (validated by the child's schema);
    it records its parent, shares its correlation id, and is cancelled with it. A
    child that fails fails this step, unless `retry` starts a new child (only once the
    failed one has ended, so never two at once). Undoing this step after the child
    succeeded compensates the child (it ends compensated).
    """

    workflow: str
    input: Callable[[RunData], Mapping[str, Any]]
    next: str | None = None
    retry: RetryPolicy = RetryPolicy(max_attempts=1)

    def exits(self) -> tuple[str | None, ...]:
        return (self.next,)


MapFailurePolicy = Literal["fail_fast", "finish_all"]


@dataclass(frozen=True)
class Map(Node):
    """Run an activity, or a child workflow, once per item of a list in the run's data.

    `items` reads the list when the run enters the node; each item is a step of its
    own (its own row, result and idempotency key: run, node, round and item index),
    at most `max_concurrency` of them in flight. The node's result is the items'
    results in item order. On an item's failure (after its retries), `fail_fast`
    fails the node at once and cancels the items not yet done; `finish_all` lets the
    others finish, then fails the node if any failed. Undoing the node undoes its
    completed items, most recently completed first.

    Give `activity` (with `compensate`, as for an Activity, and the item in
    `context.item`), or `workflow` (a child run per item, its input `input(data, item)`,
    by default the item itself).
    """

    items: Callable[[RunData], Sequence[Any]]
    activity: ActivityFunction | None = None
    workflow: str | None = None
    input: Callable[[RunData, Any], Mapping[str, Any]] | None = None
    max_concurrency: int = 10
    on_failure: MapFailurePolicy = "fail_fast"
    next: str | None = None
    compensate: ActivityFunction | NoCompensation | None = None
    mutating: bool = True
    retry: RetryPolicy = RetryPolicy()
    compensation_retry: RetryPolicy = RetryPolicy(max_attempts=5)
    timeouts: Timeouts = Timeouts()
    # As for an Activity: each item's queue, and limits counted across every run and
    # worker (max_concurrency counts this run's items only).
    queue: str | None = None
    rate_limit: str | None = None
    concurrency: int | None = None

    def exits(self) -> tuple[str | None, ...]:
        return (self.next,)

    @property
    def runs_children(self) -> bool:
        return self.workflow is not None

    @cached_property
    def item_activity(self) -> Activity:
        """What a worker runs for one item: an Activity of this node's name and settings."""
        assert self.activity is not None, f"map {self.name!r} runs child workflows"
        return Activity(
            self.name,
            run=self.activity,
            compensate=self.compensate,
            mutating=self.mutating,
            retry=self.retry,
            compensation_retry=self.compensation_retry,
            timeouts=self.timeouts,
            needs=self.needs,
            queue=self.queue,
            rate_limit=self.rate_limit,
            concurrency=self.concurrency,
        )

    def child_input(self, data: RunData, item: Any) -> Mapping[str, Any]:
        """The input of the child run for `item`."""
        if self.input is not None:
            return self.input(data, item)
        return item


@dataclass(frozen=True)
class Escalation:
    """One level of escalation: when still undecided `after` this, widen who may decide."""

    # A duration (a timedelta, or BusinessTime counted on a business calendar), or a
    # function returning one (read when the task is created, so a setting can decide it).
    after: Duration | Callable[[], Duration]
    to_groups: tuple[str, ...] = ()
    to_manager: bool = False

    def delay(self) -> Duration:
        return self.after() if callable(self.after) else self.after


DeadlineChoice = Literal["reject", "fail", "keep_waiting"]


@dataclass(frozen=True)
class Approval(WaitForSignal):
    """A human decision: a wait whose signals are `<node>.approved` and `<node>.rejected`.

    The approvals app registers what entering it does (creating the human tasks)
    and fires escalations and deadlines; the engine only waits for the outcome.
    With `required` above 1, each assignee and each group gets a task of its own
    and the node is approved once `required` of them approve.
    """

    signals: Mapping[str, str | None] = field(default_factory=dict)
    title: str | Callable[[RunData], str] = ""
    # Usernames, or a function of the run's data returning them.
    assignees: tuple[str, ...] | Callable[[RunData], Sequence[str]] = ()
    groups: tuple[str, ...] = ()
    required: int = 1
    priority: int = 2
    escalations: tuple[Escalation, ...] = ()
    # The final deadline, counted from the task's creation, and what happens then:
    # reject it, fail the run (its saga undoes what was done), or keep waiting
    # after one more escalation. A timedelta or BusinessTime, as for escalations.
    deadline: Duration | Callable[[], Duration] | None = None
    on_deadline: DeadlineChoice = "reject"
    on_approve: str | None = None
    on_reject: str | None = None
    # Where a reviewer's "request changes" (a reason required) leads: usually a
    # `Revise` node, which sends the request back to its requester. None: reviewers
    # may only approve or reject.
    on_changes_requested: str | None = None
    # What the reviewer fills in to approve (a contract id, a cost centre): a pydantic
    # model, validated when they approve; the values are kept on their decision and
    # reach the run's data (RunData.form_values).
    form: type[pydantic.BaseModel] | None = None
    # Remind whoever holds the task this long before its deadline (none without one).
    remind_before: timedelta | None = None

    def __post_init__(self) -> None:
        signals = {
            f"{self.name}.approved": self.on_approve,
            f"{self.name}.rejected": self.on_reject,
        }
        if self.on_changes_requested is not None:
            signals[f"{self.name}.changes_requested"] = self.on_changes_requested
        object.__setattr__(self, "signals", signals)

    @property
    def approved_signal(self) -> str:
        return f"{self.name}.approved"

    @property
    def changes_requested_signal(self) -> str:
        return f"{self.name}.changes_requested"

    @property
    def may_request_changes(self) -> bool:
        return self.on_changes_requested is not None

    @property
    def rejected_signal(self) -> str:
        return f"{self.name}.rejected"

    def title_for(self, data: RunData) -> str:
        return self.title(data) if callable(self.title) else self.title or self.name

    def assignees_for(self, data: RunData) -> list[str]:
        return list(self.assignees(data) if callable(self.assignees) else self.assignees)

    def deadline_delay(self) -> Duration | None:
        return self.deadline() if callable(self.deadline) else self.deadline

    @property
    def form_is_required(self) -> bool:
        """Whether approving needs values: the form has a field without a default."""
        return self.form is not None and any(
            field.is_required() for field in self.form.model_fields.values()
        )

    @property
    def personal_form(self) -> tuple[str, ...]:
        """The form's fields marked personal (`Field(json_schema_extra=PERSONAL)`)."""
        return personal.personal_fields(self.form)

    def validate_form(self, values: Any) -> dict[str, Any]:
        """Return the form's values as its schema reads them, personal ones sealed, or raise
        InvalidForm naming each problem (an approval without a form takes no values)."""
        if self.form is None:
            if values:
                raise InvalidForm(
                    [{"field": "form", "message": "this decision has no form: send no values"}]
                )
            return {}
        data = _validated(self.form, personal.reveal_fields(values), InvalidForm)
        return personal.seal_fields(
            data, self.personal_form, previous=values if isinstance(values, dict) else None
        )


# What a data-entry task past its final deadline does: fail the run (its saga undoes
# what was done) or keep waiting after one more escalation. Nobody may "reject" it.
UserTaskDeadlineChoice = Literal["fail", "keep_waiting"]


@dataclass(frozen=True)
class UserTask(Approval):
    """A person fills in a form and completes it: data entry, not a decision.

    It opens a human task as an approval does (the same `assignees`, `groups`,
    `priority`, `escalations`, `deadline` and `remind_before`, the same separation
    of duties, delegation, claim and reassignment), but its task is completed, never
    approved or rejected: its one signal is `<node>.completed`, and the run goes on
    to `next`. `form` (a pydantic model) is required; what is entered is validated
    on completion and reaches the run's data as an approval's form values do
    (`RunData.form_values(node)`). While it is filled in, a draft is kept on the task.
    """

    next: str | None = None
    on_deadline: UserTaskDeadlineChoice = "fail"  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "signals", {f"{self.name}.completed": self.next})

    @property
    def completed_signal(self) -> str:
        return f"{self.name}.completed"

    @property
    def may_request_changes(self) -> bool:
        return False


@dataclass(frozen=True)
class Revise(WaitForSignal):
    """Send the request back to whoever asked for it, to change its input and resubmit.

    The approvals app opens a human task for the run's requesters whose form is the
    type's start form, filled in with the run's current input. Resubmitting
    validates the new input with the definition's schema, replaces the run's input
    (the step's result keeps the previous one and the changes, so every round's
    input stays in the history) and goes on to `next`: usually a `GoBack` to the
    approval that asked for the changes. Withdrawing the request cancels the run.
    """

    signals: Mapping[str, str | None] = field(default_factory=dict)
    next: str | None = None
    # The task's title; by default "Changes requested by <reviewer>: <reason>".
    title: str | Callable[[RunData], str] = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "signals", {f"{self.name}.resubmitted": self.next})

    @property
    def resubmitted_signal(self) -> str:
        return f"{self.name}.resubmitted"


# Nodes whose signals only their human tasks send (the engine refuses them from anyone
# else: a requester could otherwise approve their own request, or slip in input the
# schema never saw).
HUMAN_NODES = (Approval, Revise)


# ---------------------------------------------------------------------------
# Queries and updates: reading and changing a live run from outside
# ---------------------------------------------------------------------------

# A query reads the run's data and returns JSON-able data; it never writes or runs a step.
QueryFunction = Callable[[RunData], Any]


class UpdateRefused(Exception):
    """Raised by an update handler to refuse an update; the message is the caller's answer."""


@dataclass(frozen=True)
class Updated:
    """What an update handler returns when the update changes the run's input.

    `result` is the caller's answer; `input` is the run's whole new input, validated
    by the definition's input schema and written with the update, in one transaction.
    A handler that changes nothing may return its answer alone.
    """

    result: Any = None
    input: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Update:
    """A signal with a schema and an answer (Temporal's update): validated, handled, answered.

    `schema` (a pydantic model) validates the payload; `handler(data, payload)` gets the
    run's data and the validated payload, and returns the caller's answer, or an
    `Updated` that also replaces the run's input; it raises `UpdateRefused` to say no.
    The update is then recorded as a signal of the same name (de-duplicated by its id,
    so a repeated id gets the first answer), and, like any signal, resumes a wait for
    that name. Accepted while the run is running or waiting; with `waiting_at`, only
    while it waits at one of those nodes.
    """

    handler: Callable[[RunData, Any], Any]
    schema: type[pydantic.BaseModel]
    waiting_at: tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# Workflows
# ---------------------------------------------------------------------------


# `Workflow(starters=ANYONE)`: every signed-in person may start it.
ANYONE: Literal["anyone"] = "anyone"
# `Workflow(on_deadline=DEADLINE_CANCELS)`: a run still live at its deadline is cancelled.
DEADLINE_CANCELS = "cancel"


class InvalidInput(ValueError):
    """The input does not fit the workflow's schema; `errors` lists each field's problem."""

    what = "workflow input"

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        problems = "; ".join(f"{error['field']}: {error['message']}" for error in errors)
        super().__init__(f"Invalid {self.what}: {problems}")


# The JSON Schema format of a form field that names a file attached to the request.
ATTACHMENT_FORMAT = "baton-attachment"
# A task form's field holding one of the request's attached files (its id): the task
# page offers the request's files in it, and approving checks that it names one of
# them. `receipt: AttachedFile` requires one; `receipt: AttachedFile | None = None` not.
AttachedFile = Annotated[
    UUID,
    pydantic.WithJsonSchema(
        {
            "type": "string",
            "format": ATTACHMENT_FORMAT,
            "description": "the id of a file attached to the request",
        }
    ),
]


class InvalidForm(InvalidInput):
    """An approval's form values do not fit its form; `errors` lists each field's problem."""

    what = "form values"


def _validated(
    schema: type[pydantic.BaseModel], data: Any, invalid: type[InvalidInput]
) -> dict[str, Any]:
    """Return `data` as `schema` reads it, as JSON; raise `invalid` naming each problem."""
    try:
        data = schema.model_validate(data).model_dump(mode="json")
    except pydantic.ValidationError as error:
        raise invalid(
            [
                field_errors.described(
                    problem, field=".".join(str(part) for part in problem["loc"]) or "input"
                )
                for problem in error.errors()
            ]
        ) from None
    try:
        refuse_unstorable(data)
    except Refused as error:
        raise invalid([{"field": "input", "message": str(error)}]) from None
    return data


@dataclass(frozen=True)
class Workflow:
    name: str
    version: int
    start: str
    nodes: tuple[Node, ...]
    input_schema: type[pydantic.BaseModel] | None = None
    # What people read about the type on the New request page and its start form; both
    # may be lazy translations (gettext_lazy), said in the reader's language. The
    # title is the type's name in words, as it fits in a sentence ("expense": "New
    # expense", "an expense"); without one, the name with spaces.
    description: str = ""
    title: str = ""
    # Runs of this type allowed to be live at once; more wait in `pending`.
    concurrency_limit: int | None = None
    max_parallel_branches: int = 16
    # Separation of duties, enforced by the approvals app. Whoever started a run never
    # decides its approvals; nor does the person named (by username) in the input
    # field `requester_field`, for a type that runs on someone's behalf (an expense).
    requester_field: str | None = None
    # One person decides at most one approval node of a run (a manager who approved
    # an expense cannot approve it again as finance).
    distinct_approvers: bool = False
    # Who may start runs of this type, through the API or the New request page: the
    # members of these groups (by name), or ANYONE signed in. Operators may start
    # every type; nobody else may start a type that names no starters.
    starters: tuple[str, ...] | Literal["anyone"] = ()
    # Input fields operators find runs by in the console (an order id, a vendor's
    # name): matched exactly, through the GIN index on the run's input.
    searchable: tuple[str, ...] = ()
    # How long a run may live (a timedelta, or BusinessTime on a business calendar),
    # counted from its start; what happens to one still live then: "cancel" (undo
    # it, as an operator's cancel does) or the name of a node to move it to (what
    # is in flight is cancelled, and the run goes on from that node).
    deadline: Duration | None = None
    on_deadline: str = DEADLINE_CANCELS
    # Questions a live run answers from its stored data (GET .../queries/<name>), and
    # updates it accepts (POST .../updates/<name>): see `QueryFunction` and `Update`.
    queries: Mapping[str, QueryFunction] = field(default_factory=dict)
    updates: Mapping[str, Update] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @cached_property
    def nodes_by_name(self) -> dict[str, Node]:
        return {node.name: node for node in self.nodes}

    def node(self, name: str) -> Node:
        return self.nodes_by_name[name]

    def activity(self, name: str) -> Activity:
        """The activity node `name`: the kind a step is claimed, retried or undone for
        (for a map over an activity, what each of its items runs)."""
        node = self.nodes_by_name[name]
        if isinstance(node, Map) and node.activity is not None:
            return node.item_activity
        if not isinstance(node, Activity):
            raise TypeError(f"{name!r} is a {type(node).__name__}, not an activity")
        return node

    @cached_property
    def join_of(self) -> dict[str, str]:
        """Map each node inside a parallel region to the join that closes it."""
        regions: dict[str, str] = {}
        for parallel in self.nodes:
            if isinstance(parallel, Parallel):
                for name in _reachable(self, parallel.branches, stop_at=parallel.join):
                    regions[name] = parallel.join
        return regions

    @cached_property
    def branch_regions(self) -> dict[str, tuple[frozenset[str], ...]]:
        """Map each join to its branches' nodes (a branch's own nodes, the join left out)."""
        return {
            node.join: tuple(
                frozenset(_reachable(self, (branch,), stop_at=node.join))
                for branch in node.branches
            )
            for node in self.nodes
            if isinstance(node, Parallel)
        }

    def lost_nodes(self, join: str, arrived: Collection[str | None]) -> frozenset[str]:
        """The nodes of `join`'s branches that did not arrive (lost its race)."""
        return frozenset().union(
            *(region for region in self.branch_regions[join] if not region & set(arrived))
        )

    @cached_property
    def has_racing_joins(self) -> bool:
        """Whether a join may go on before every branch arrived (`any`, or N of M)."""
        return any(
            isinstance(node, Join)
            and node.required(self.branch_count.get(node.name, 0))
            < self.branch_count.get(node.name, 0)
            for node in self.nodes
        )

    @property
    def deadline_node(self) -> str | None:
        """The node a run still live at its deadline moves to (None: it is cancelled)."""
        if self.deadline is None or self.on_deadline == DEADLINE_CANCELS:
            return None
        return self.on_deadline

    @cached_property
    def branch_count(self) -> dict[str, int]:
        """Map each join to the number of branches that lead into it."""
        return {node.join: len(node.branches) for node in self.nodes if isinstance(node, Parallel)}

    @cached_property
    def personal_input(self) -> tuple[str, ...]:
        """The input's fields marked personal (`Field(json_schema_extra=PERSONAL)`)."""
        return personal.personal_fields(self.input_schema)

    @cached_property
    def has_personal_data(self) -> bool:
        """Whether runs of this type hold personal values: input or form fields marked so."""
        return bool(self.personal_input) or any(
            isinstance(node, Approval) and node.personal_form for node in self.nodes
        )

    def validate_input(self, data: Any, *, previous: Any = None) -> dict[str, Any]:
        """Return the input as the schema reads it, its personal fields sealed, or raise
        InvalidInput naming each problem.

        `data` may be a stored input (its envelopes are opened to validate it); a value
        unchanged from `previous` (by default `data` itself) keeps its envelope.
        """
        if self.input_schema is not None:
            if not self.personal_input:
                return _validated(self.input_schema, data, InvalidInput)
            validated = _validated(self.input_schema, personal.reveal_fields(data), InvalidInput)
            before = previous if previous is not None else data
            if not isinstance(before, dict):
                before = None
            return personal.seal_fields(validated, self.personal_input, previous=before)
        if not isinstance(data, dict):
            raise InvalidInput(
                [
                    {
                        "field": "input",
                        "message": gettext("must be a JSON object"),
                        "type": "dict_type",
                    }
                ]
            )
        try:
            refuse_unstorable(data)
        except Refused as error:
            raise InvalidInput([{"field": "input", "message": str(error)}]) from None
        return data


def node_words(definition: Workflow | None, name: str) -> str:
    """Node `name` as people read it, in the reader's language: its label, or its name
    with spaces (for a node its definition lacks, or a run whose definition is gone)."""
    node = definition.nodes_by_name.get(name) if definition is not None else None
    if node is not None and node.label:
        return str(node.label)
    return name.replace("_", " ")


def _reachable(workflow: Workflow, starts: tuple[str, ...], stop_at: str | None = None) -> set[str]:
    seen: set[str] = set()
    pending = [name for name in starts if name in workflow.nodes_by_name]
    while pending:
        name = pending.pop()
        if name in seen or name == stop_at:
            continue
        seen.add(name)
        pending.extend(
            successor
            for successor in workflow.nodes_by_name[name].successors()
            if successor in workflow.nodes_by_name
        )
    return seen


# ---------------------------------------------------------------------------
# The static check
# ---------------------------------------------------------------------------


def check_definition(workflow: Workflow) -> list[str]:
    """Return every problem that would stop a run of `workflow` from ending well."""
    problems: list[str] = []
    names = [node.name for node in workflow.nodes]
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        problems.append(f"node names used twice: {', '.join(duplicates)}")
    if workflow.start not in workflow.nodes_by_name:
        return [*problems, f"start node {workflow.start!r} is not defined"]

    for node in workflow.nodes:
        for successor in node.successors():
            if successor not in workflow.nodes_by_name:
                problems.append(f"{node.name!r} leads to undefined node {successor!r}")
        if isinstance(node, Activity) and node.mutating and node.compensate is None:
            problems.append(
                f"mutating activity {node.name!r} has no compensation: name one, or pass "
                "NoCompensation(reason) to say why it needs none"
            )
        if isinstance(node, Activity) and node.on_error:
            problems.extend(_catch_problems(node))
        if isinstance(node, Activity):
            problems.extend(queues.problems(node, kind="activity", local=node.local))
        if isinstance(node, Parallel):
            problems.extend(_parallel_problems(workflow, node))
        if isinstance(node, UserTask):
            problems.extend(_user_task_problems(node))
        if isinstance(node, Approval) and node.form is not None:
            problems.extend(_form_problems(node))
        if isinstance(node, Approval) and node.remind_before is not None:
            problems.extend(_reminder_problems(node))
        if isinstance(node, GoBack):
            problems.extend(_go_back_problems(workflow, node))
        if isinstance(node, Map):
            problems.extend(_map_problems(node))
        if isinstance(node, ChildWorkflow) and not node.workflow:
            problems.append(f"child workflow {node.name!r} names no workflow type to start")
        problems.extend(_needs_problems(workflow, node))
        if isinstance(node, Revise) and workflow.input_schema is None:
            problems.append(
                f"revise {node.name!r} needs the workflow's input_schema: its form is the "
                "start form, and a resubmission is validated with it"
            )
    go_backs = [
        node.max_rounds
        for node in workflow.nodes
        if isinstance(node, GoBack) and isinstance(node.max_rounds, int)
    ]
    if sum(rounds - 1 for rounds in go_backs) > MAX_ROUND:
        problems.append(
            f"the loops of {workflow.name!r} may go back more than {MAX_ROUND} times in all, "
            "more rounds than a step can count: lower their max_rounds"
        )

    schema = workflow.input_schema
    if workflow.requester_field and schema and workflow.requester_field not in schema.model_fields:
        # A misspelt field would quietly let the requester decide their own request.
        problems.append(
            f"requester_field {workflow.requester_field!r} is not a field of the input schema"
        )

    problems.extend(_starters_problems(workflow.starters))
    if schema:
        problems.extend(
            f"searchable field {name!r} is not a field of the input schema"
            for name in workflow.searchable
            if name not in schema.model_fields
        )

    problems.extend(_personal_problems(workflow))
    problems.extend(_deadline_problems(workflow))
    problems.extend(_query_problems(workflow))
    problems.extend(_update_problems(workflow))
    starts = (workflow.start, *_defined(workflow, workflow.deadline_node))
    unreachable = set(names) - _reachable(workflow, starts)
    problems.extend(f"node {name!r} is unreachable from the start" for name in sorted(unreachable))
    cycle = next(filter(None, (_find_cycle(workflow, start) for start in starts)), None)
    if cycle:
        problems.append(
            f"path with no end: {' -> '.join(cycle)} loops back with no GoBack to bound it "
            "(a loop must go back through a GoBack node with max_rounds)"
        )
    return problems


# The highest round a step can record (StepRun.round is a small integer); each
# time a run goes back it starts one round up.
MAX_ROUND = 32767


def _defined(workflow: Workflow, name: str | None) -> tuple[str, ...]:
    return (name,) if name is not None and name in workflow.nodes_by_name else ()


def _catch_problems(node: Activity) -> list[str]:
    if not isinstance(node.on_error, Mapping):
        return [
            f"activity {node.name!r} has on_error={node.on_error!r}: it must map error type "
            "names to node names, e.g. {'CreditDeclined': 'manual_review'}"
        ]
    problems = []
    for error_type, target in node.on_error.items():
        if not isinstance(error_type, str) or not error_type.isidentifier():
            problems.append(
                f"activity {node.name!r} catches {error_type!r}, which is not an exception "
                f"class name (or {CATCH_TIMEOUT!r})"
            )
        if not isinstance(target, str):
            problems.append(
                f"activity {node.name!r} sends {error_type!r} to {target!r}, which is not "
                "a node name"
            )
    return problems


def _deadline_problems(workflow: Workflow) -> list[str]:
    """A run deadline is a positive duration; a deadline path is a path of its own."""
    deadline, target = workflow.deadline, workflow.on_deadline
    if deadline is None:
        if target != DEADLINE_CANCELS:
            return [f"on_deadline={target!r} needs a deadline to fire at"]
        return []
    if isinstance(deadline, timedelta):
        if deadline <= timedelta(0):
            return [f"the deadline must be a positive duration, not {deadline}"]
    elif not isinstance(deadline, BusinessTime):
        return [f"the deadline must be a timedelta or a BusinessTime, not {deadline!r}"]
    if target == DEADLINE_CANCELS:
        return []
    if target not in workflow.nodes_by_name:
        return [
            f"on_deadline names {target!r}, which is not a node "
            f"(or say {DEADLINE_CANCELS!r} to cancel the run)"
        ]
    # The run may be anywhere when its deadline passes, so the deadline path must not
    # run a node the run may already have run (each node runs once per round).
    shared = _reachable(workflow, (target,)) & _reachable(workflow, (workflow.start,))
    if shared:
        return [
            f"the deadline path from {target!r} shares {', '.join(map(repr, sorted(shared)))} "
            "with the run's own path: a deadline path needs nodes of its own"
        ]
    return []


# What a query's or an update's name may hold: it is a segment of the API's paths.
_CALL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def _name_problem(kind: str, name: object) -> str | None:
    if isinstance(name, str) and _CALL_NAME.fullmatch(name):
        return None
    return (
        f"{kind} name {name!r} must be 1 to 100 letters, digits, '_', '.' or '-' "
        "(it is part of the API's path)"
    )


def _query_problems(workflow: Workflow) -> list[str]:
    if not isinstance(workflow.queries, Mapping):
        return [f"queries must map names to functions, not {workflow.queries!r}"]
    problems = []
    for name, function in workflow.queries.items():
        if problem := _name_problem("query", name):
            problems.append(problem)
        if not callable(function):
            problems.append(f"query {name!r} is {function!r}, not a function of the run's data")
    return problems


def _update_problems(workflow: Workflow) -> list[str]:
    """An update has a handler, a schema with a JSON Schema, and nodes that may wait; its
    name is a signal's, so it may not be a human task's decision."""
    if not isinstance(workflow.updates, Mapping):
        return [f"updates must map names to Update(handler, schema=...), not {workflow.updates!r}"]
    reserved = {
        signal: node.name
        for node in workflow.nodes
        if isinstance(node, HUMAN_NODES)
        for signal in node.signals
    }
    problems = []
    for name, update in workflow.updates.items():
        if problem := _name_problem("update", name):
            problems.append(problem)
        if not isinstance(update, Update):
            problems.append(f"update {name!r} is {update!r}, not an Update(handler, schema=...)")
            continue
        if name in reserved:
            problems.append(
                f"update {name!r} is the decision of the human task of {reserved[name]!r}: "
                "choose another name"
            )
        if not callable(update.handler):
            problems.append(f"update {name!r} has a handler that is not a function")
        schema = update.schema
        if not (isinstance(schema, type) and issubclass(schema, pydantic.BaseModel)):
            problems.append(
                f"update {name!r} has a schema that is not a pydantic model: {schema!r}"
            )
        else:
            try:
                schema.model_json_schema()
            except pydantic.PydanticUserError as error:
                problems.append(f"update {name!r} has a schema without a JSON Schema: {error}")
        if not isinstance(update.waiting_at, tuple):
            problems.append(
                f"update {name!r} has waiting_at={update.waiting_at!r}: it must be a tuple of "
                "node names (write ('review',) for one node)"
            )
            continue
        problems.extend(
            f"update {name!r} is accepted while waiting at {node!r}, which is not a node"
            for node in update.waiting_at
            if node not in workflow.nodes_by_name
        )
    return problems


def _go_back_problems(workflow: Workflow, go_back: GoBack) -> list[str]:
    max_rounds = go_back.max_rounds
    if max_rounds is None:
        return [f"go back {go_back.name!r} has no max_rounds: every loop must be bounded"]
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 2:
        return [
            f"go back {go_back.name!r} has max_rounds={max_rounds!r}: it must be a whole "
            "number of at least 2 (the first round counts, so 1 would never go back)"
        ]
    problems = []
    if go_back.to == go_back.name:
        problems.append(f"go back {go_back.name!r} goes back to itself")
    elif isinstance(workflow.nodes_by_name.get(go_back.to), Join):
        problems.append(
            f"go back {go_back.name!r} goes back to the join {go_back.to!r}, which would wait "
            "for branches that never come: go back to its parallel instead"
        )
    elif go_back.to in workflow.nodes_by_name and go_back.name not in _reachable(
        workflow, (go_back.to,)
    ):
        problems.append(
            f"go back {go_back.name!r} goes to {go_back.to!r}, which never leads back to it: "
            "use the node's own exit for a way forward"
        )
    # Every branch of a parallel region must arrive at its join in the same round.
    for name in (go_back.name, go_back.to):
        if name in workflow.join_of:
            problems.append(
                f"go back {go_back.name!r}: {name!r} is inside the parallel region closed by "
                f"{workflow.join_of[name]!r}; a loop may contain a whole parallel region, "
                "never start or end inside one"
            )
    return problems


def child_type_problems(workflow: Workflow, *, registered: Collection[str]) -> list[str]:
    """Return a problem for each child workflow type `workflow` starts that is not among
    the `registered` type names (the registry knows them; the static check alone cannot)."""
    problems = []
    for node in workflow.nodes:
        child_type = node.workflow if isinstance(node, ChildWorkflow | Map) else None
        if child_type and child_type not in registered:
            kind = "map" if isinstance(node, Map) else "child workflow"
            problems.append(
                f"{kind} {node.name!r} starts runs of {child_type!r}, which is not registered "
                "(add its module to BATON_WORKFLOW_MODULES)"
            )
    return problems


def _map_problems(node: Map) -> list[str]:
    problems = []
    if (node.activity is None) == (node.workflow is None):
        problems.append(
            f"map {node.name!r} must run either an activity or a child workflow (give one)"
        )
    elif node.activity is not None and node.mutating and node.compensate is None:
        problems.append(
            f"map {node.name!r} runs a mutating activity with no compensation: name one, or "
            "pass NoCompensation(reason) to say why it needs none"
        )
    concurrency = node.max_concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        problems.append(
            f"map {node.name!r} has max_concurrency={concurrency!r}: it must be a whole "
            "number of at least 1"
        )
    problems.extend(queues.problems(node, kind="map"))
    if node.runs_children and (node.queue is not None or queues.is_limited(node)):
        problems.append(
            f"map {node.name!r} runs child workflows: give queue, rate_limit and concurrency "
            "to the activities of the child workflow instead"
        )
    if node.on_failure not in ("fail_fast", "finish_all"):
        problems.append(
            f"map {node.name!r} has on_failure={node.on_failure!r}: "
            "choose 'fail_fast' or 'finish_all'"
        )
    return problems


def _needs_problems(workflow: Workflow, node: Node) -> list[str]:
    """A node can only need the result of another node that may run before it."""
    if not isinstance(node.needs, tuple):
        return [
            f"{node.name!r} has needs={node.needs!r}: it must be a tuple of node names "
            "(write ('submit',) for one node)"
        ]
    problems = []
    for need in node.needs:
        if need == node.name:
            problems.append(f"{node.name!r} needs its own result")
        elif need not in workflow.nodes_by_name:
            problems.append(f"{node.name!r} needs {need!r}, which is not a node")
        elif node.name not in _reachable(workflow, (need,)):
            problems.append(f"{node.name!r} needs {need!r}, which never runs before it")
    return problems


def _reminder_problems(node: Approval) -> list[str]:
    if not isinstance(node.remind_before, timedelta) or node.remind_before <= timedelta(0):
        return [f"{node.name}: remind_before must be a positive timedelta."]
    if node.deadline is None:
        return [f"{node.name}: remind_before needs a deadline to remind of."]
    return []


def _personal_problems(workflow: Workflow) -> list[str]:
    """A personal field is sealed at rest, so nothing can match it in the database: it
    cannot be searchable, nor name the requester (separation of duties matches that)."""
    problems = [
        f"searchable field {name!r} is marked personal: a sealed value cannot be searched"
        for name in workflow.searchable
        if name in workflow.personal_input
    ]
    if workflow.requester_field in workflow.personal_input:
        problems.append(
            f"requester_field {workflow.requester_field!r} is marked personal: it names an "
            "account, which separation of duties matches in the database"
        )
    return problems


def _form_problems(node: Approval) -> list[str]:
    """A form must be a pydantic model whose JSON Schema can be drawn and documented."""
    form = node.form
    kind = "user task" if isinstance(node, UserTask) else "approval"
    if not (isinstance(form, type) and issubclass(form, pydantic.BaseModel)):
        return [f"{kind} {node.name!r} has a form that is not a pydantic model: {form!r}"]
    try:
        form.model_json_schema()
    except pydantic.PydanticUserError as error:  # e.g. a field type with no JSON Schema
        return [f"{kind} {node.name!r} has a form without a JSON Schema: {error}"]
    return []


def _user_task_problems(node: UserTask) -> list[str]:
    """A user task is filled in by one person and completed: it needs a form, and takes
    none of an approval's decisions."""
    problems = []
    if node.form is None:
        problems.append(
            f"user task {node.name!r} has no form: give the pydantic model it fills in "
            "(an approval is the node for a decision without values)"
        )
    if node.required != 1:
        problems.append(
            f"user task {node.name!r} has required={node.required!r}: one person completes it"
        )
    decisions = {
        "on_approve": node.on_approve,
        "on_reject": node.on_reject,
        "on_changes_requested": node.on_changes_requested,
    }
    problems.extend(
        f"user task {node.name!r} has {name}={target!r}: it is completed, never approved, "
        "rejected or sent back; say where it goes with next="
        for name, target in decisions.items()
        if target is not None
    )
    if node.on_deadline not in ("fail", "keep_waiting"):
        problems.append(
            f"user task {node.name!r} has on_deadline={node.on_deadline!r}: choose 'fail' "
            "or 'keep_waiting' (nobody rejects a data-entry task)"
        )
    return problems


def _starters_problems(starters: object) -> list[str]:
    """A bare group name would be read letter by letter, and a blank one matches nobody."""
    if starters == ANYONE:
        return []
    if not isinstance(starters, tuple):
        return [
            f"starters must be a tuple of group names or ANYONE, not {starters!r} "
            "(write ('finance',) for one group)"
        ]
    problems = [
        f"starters names {name!r}, which is not a group name"
        for name in starters
        if not isinstance(name, str) or not name.strip()
    ]
    twice = sorted(
        name for name, count in Counter(starters).items() if count > 1 and isinstance(name, str)
    )
    if twice:
        problems.append(f"starters names a group twice: {', '.join(twice)}")
    return problems


def _parallel_problems(workflow: Workflow, parallel: Parallel) -> list[str]:
    problems = []
    join = workflow.nodes_by_name.get(parallel.join)
    if not isinstance(join, Join):
        return [f"parallel {parallel.name!r} names {parallel.join!r}, which is not a join"]
    if not parallel.branches:
        problems.append(f"parallel {parallel.name!r} has no branches")
    if len(parallel.branches) > workflow.max_parallel_branches:
        problems.append(
            f"parallel {parallel.name!r} has {len(parallel.branches)} branches, "
            f"more than the cap of {workflow.max_parallel_branches}"
        )
    if isinstance(join.wait_for, int) and not 1 <= join.wait_for <= len(parallel.branches):
        problems.append(
            f"join {join.name!r} waits for {join.wait_for} of {len(parallel.branches)} branches"
        )
    region = _reachable(workflow, parallel.branches, stop_at=parallel.join)
    for name in sorted(region):
        node = workflow.nodes_by_name[name]
        if isinstance(node, Parallel):
            problems.append(f"parallel {parallel.name!r} contains another parallel {name!r}")
        if None in node.exits() or not node.exits():
            problems.append(
                f"{name!r} ends a branch of {parallel.name!r} before its join {parallel.join!r}"
            )
    branch_regions = [
        _reachable(workflow, (branch,), stop_at=parallel.join) for branch in parallel.branches
    ]
    for index, first in enumerate(branch_regions):
        for second in branch_regions[index + 1 :]:
            shared = sorted(first & second)
            if shared:
                problems.append(
                    f"branches of {parallel.name!r} share {', '.join(map(repr, shared))}: "
                    "each branch needs nodes of its own"
                )
    return problems


def _find_cycle(workflow: Workflow, start: str) -> list[str] | None:
    """Return a path from `start` that loops back on itself not through a GoBack, or None.

    A depth-first walk with its own stack, so a definition of ten thousand
    chained nodes is checked as easily as one of ten.
    """
    nodes = workflow.nodes_by_name
    if start not in nodes:
        return None
    path = [start]
    on_path = {start}
    unvisited = [iter(forward_successors(nodes[start]))]
    done: set[str] = set()
    while unvisited:
        successor = next(unvisited[-1], None)
        if successor is None:
            finished = path.pop()
            on_path.discard(finished)
            done.add(finished)
            unvisited.pop()
        elif successor in on_path:
            return [*path[path.index(successor) :], successor]
        elif successor not in done and successor in nodes:
            path.append(successor)
            on_path.add(successor)
            unvisited.append(iter(forward_successors(nodes[successor])))
    return None


def forward_successors(node: Node) -> tuple[str, ...]:
    """Return a node's successors but a GoBack's back edge: the graph that must be acyclic."""
    return node.forward_exits() if isinstance(node, GoBack) else node.successors()
