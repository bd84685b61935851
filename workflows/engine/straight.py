"""The straight path of a step: an activity succeeded and the next node is an activity,
or there is none and the run ends.

That is most steps of most runs, and it needs nothing of the graph once it is known
to be the case: the step succeeds, its STARTED and COMPLETED events are written, the
next activity's step is created (scheduled for a worker, or already claimed by this
one: a local activity, or eager dispatch), and a waiting run wakes. Through model
instances, django-fsm transitions and the unit of work, that costs a read and a write
of four statements and about 1.5 ms of Python. Here it is one statement (`_SQL`, a
CTE), built once per process from the models' metadata, with every value bound and
rows read back as tuples. The run's last step is its own statement (`record_end`): the
step succeeds, the run succeeds with its result (`WorkflowRun.succeed`), and the run's
COMPLETED event is written after the attempt's two.

Nothing is decided twice:
- what the finished step, the new step and the woken run become is read from their
  django-fsm transitions applied once to template rows (`StepRun.succeed`,
  `StepRun.start`, `WorkflowRun.wake`), whose values stand for the statement's
  parameters;
- the states each row may be in are the sources the state machines allow
  (`transitions.allowed`), narrowed to those the straight case knows: a running step
  (with this attempt's lease token, not expired), a run moving forward.

A step that is not in that case matches nothing, and `record` returns None, having
written nothing: the caller goes the general way (`execute.record_outcome`), which also
says why (a late result, a cancelled run, a paused one). Being one statement, it needs
no transaction of its own: it commits as it ends, in one round trip. Every other node kind,
a map's item, an undo, a next node a join closes, and the last step of a definition whose
joins race (the run may not end while a losing branch is undone) go the general way from
the start (`plan_for`), as does a next activity with a queue of its own or limits.
PostgreSQL only: SQLite (the demo) records every step the general way.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

from workflows import queues
from workflows.dsl import Activity, Workflow
from workflows.engine import functions, transitions
from workflows.engine.compiled import (
    PER_CALL,
    ClaimedOr,
    Param,
    argument_writer,
    function_body,
    new_activity_steps,
    prepared,
    set_by,
    sql_type,
    template,
)
from workflows.models import StepEvent, StepRun, WorkflowRun, new_row
from workflows.states import EventKind, RunState, StepKind, StepState


@dataclass(frozen=True)
class Plan:
    """The straight case of a node of a definition: the activity entered after it, or
    None when the node is the run's last (its success ends the run: `record_end`)."""

    next: Activity | None


@dataclass(frozen=True)
class Recorded:
    """What the statement wrote: the next step's id, its run's trace context, and when
    the step that succeeded was scheduled (for its schedule-to-start metric)."""

    next_step_id: int
    trace_context: dict[str, str]
    scheduled_at: datetime


_plans: dict[tuple[int, str], tuple[Workflow, Plan | None]] = {}


def plan_for(definition: Workflow, step: StepRun) -> Plan | None:
    """The straight case of `step` having succeeded, or None if it is not one.

    Decided once per definition and node: a forward step (not a map's item) of an
    activity whose next node is a plain activity no join closes, on the default queue
    and without limits.
    """
    if step.kind != StepKind.FORWARD or step.item is not None:
        return None
    key = (id(definition), step.node)
    known = _plans.get(key)
    if known is None or known[0] is not definition:
        known = _plans[key] = (definition, _plan(definition, step.node))
    return known[1]


def _plan(definition: Workflow, node_name: str) -> Plan | None:
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return None
    node = definition.node(node_name)
    if not isinstance(node, Activity):
        return None
    following = node.next
    if following is None:
        # The run's last step: it ends the run, unless a branch that lost an `any` or
        # N-of-M join is still being undone (the general way waits for that undo).
        return None if definition.has_racing_joins else Plan(next=None)
    if following in definition.join_of:
        return None  # the branch may have lost its join's race: the general way checks
    next_node = definition.node(following)
    if type(next_node) is not Activity:
        return None
    if next_node.queue is not None or queues.is_limited(next_node):
        # An activity with a queue of its own is sent there, and a limited one is counted
        # against its limits (engine/limits.py) before it may start: the general way does
        # both. A limiter would hook in here, before the statement, to let the straight
        # path claim a limited activity once its count allows.
        return None
    return Plan(next=next_node)


def record(
    plan: Plan,
    *,
    step_id: int,
    run_id: uuid.UUID,
    lease_token: uuid.UUID,
    started_at: datetime,
    result: Any,
    round: int,
    now: datetime,
    claim_token: uuid.UUID | None,
    due_at: datetime,
    holder: str,
) -> Recorded | None:
    """Record step `step_id`'s success and create the next activity's step, in one statement.

    With `claim_token`, the next step is created already claimed by this worker (the
    lease until `due_at`, held by `holder`); without, scheduled for a worker (sent again
    at `due_at` if none takes it). Returns None, having written nothing, when the step
    or its run is not as the straight case needs: the caller goes the general way.
    One statement, atomic by itself: outside a transaction it commits as it ends.
    """
    if plan.next is None:
        raise ValueError("The run's last step is recorded by `record_end`.")
    sql, params = _statement()
    connection = connections[DEFAULT_DB_ALIAS]
    values = {
        "run_id": run_id,
        "step_id": step_id,
        "lease_token": lease_token,
        "now": now,
        "started_at": started_at,
        "result": _RESULT.get_db_prep_save(result, connection=connection),
        "round": round,
        "next_node": plan.next.name,
        "lease": plan.next.timeouts.first_lease,
        "claim_token": claim_token,
        "due_at": due_at,
        "holder": holder,
    }
    claimed = claim_token is not None
    if functions.used(connection):
        values["claimed"] = claimed
        sql = function().call_sql
        bound = [values[name] for name, _model, _field in _ARGUMENTS] + [claimed]
    else:
        bound = [
            value.bound(values, claimed) if isinstance(value, PER_CALL) else value
            for value in params
        ]
    with functions.cursor(connection) as cursor:
        cursor.execute(sql, bound)
        row = cursor.fetchone()
    if row is None:
        return None
    next_step_id, trace_context, scheduled_at = row
    if isinstance(trace_context, str):
        trace_context = json.loads(trace_context)
    return Recorded(next_step_id, trace_context or {}, scheduled_at)


def record_end(
    *,
    step_id: int,
    run_id: uuid.UUID,
    lease_token: uuid.UUID,
    started_at: datetime,
    result: Any,
    now: datetime,
) -> datetime | None:
    """Record the success of step `step_id`, the run's last, and end the run, in one statement.

    The step succeeds, its run succeeds with its result, and the attempt's two events and
    the run's COMPLETED are written, as the general way writes them. Returns when the step
    was scheduled (for its metric), or None, having written nothing, when the step or its
    run is not as the straight case needs. One statement: outside a transaction it commits
    as it ends; the caller tells the run-end hooks first (see `execute._record_end`).
    """
    connection = connections[DEFAULT_DB_ALIAS]
    values = {
        "run_id": run_id,
        "step_id": step_id,
        "lease_token": lease_token,
        "now": now,
        "started_at": started_at,
        "result": _RESULT.get_db_prep_save(result, connection=connection),
    }
    if functions.used(connection):
        sql = end_function().call_sql
        bound = [values[name] for name, _model, _field in _END_ARGUMENTS]
    else:
        sql, params = _statement(ends=True)
        bound = [
            value.bound(values, False) if isinstance(value, PER_CALL) else value for value in params
        ]
    with functions.cursor(connection) as cursor:
        cursor.execute(sql, bound)
        row = cursor.fetchone()
    return None if row is None else row[0]


_RESULT = StepRun._meta.get_field("result")


def _succeeded_step() -> dict[str, Any]:
    step = template(StepRun, StepState.RUNNING)
    step.succeed(result=Param("result"), now=Param("now"))
    return set_by(step)


def _woken_run() -> dict[str, Any]:
    run = template(WorkflowRun, RunState.WAITING)
    run.wake()
    return set_by(run)


def _ended_run() -> dict[str, Any]:
    """What `WorkflowRun.succeed` sets on a run whose last step succeeded."""
    run = template(WorkflowRun, RunState.RUNNING)
    run.succeed(result=Param("result"), now=Param("now"))
    return set_by(run)


class _Builder:
    """What a compiled statement is written with: quoted names from the models' metadata,
    and its parameters in order (constants, or `Param`s bound per call)."""

    def __init__(self) -> None:
        self.connection = connections[DEFAULT_DB_ALIAS]
        self.qn = self.connection.ops.quote_name
        self.params: list[Any] = []
        self.auto_now = [
            f.attname for f in WorkflowRun._meta.concrete_fields if getattr(f, "auto_now", False)
        ]

    def bind(self, field: Field, value: Any, *, cast: bool = False) -> str:
        self.params.append(prepared(field, value))
        if cast:
            return f"(%s)::{sql_type(field)}"
        return "%s"

    def raw(self, value: Any) -> str:
        self.params.append(value)
        return "%s"

    def col(self, model: type[Model], name: str) -> str:
        return self.qn(model._meta.get_field(name).column)

    def run_set(self, values: dict[str, Any]) -> str:
        """The SET list that gives a run `values` (a transition applied to a template
        row), its auto_now columns the call's `now`."""
        field, col = WorkflowRun._meta.get_field, self.col
        return ", ".join(
            [
                *(
                    f"{col(WorkflowRun, name)} = {self.bind(field(name), value, cast=True)}"
                    for name, value in values.items()
                    if name not in self.auto_now
                ),
                *(
                    f"{col(WorkflowRun, name)} = {self.bind(field(name), Param('now'), cast=True)}"
                    for name in self.auto_now
                ),
            ]
        )


@functools.cache
def _statement(*, ends: bool = False) -> tuple[str, tuple[Any, ...]]:
    """The statement, and its parameters in order (constants, or `Param`s bound per call);
    with `ends`, the one that records the run's last step and ends the run."""
    b = _Builder()
    qn, bind, raw, col = b.qn, b.bind, b.raw, b.col
    steps, runs, events = (qn(m._meta.db_table) for m in (StepRun, WorkflowRun, StepEvent))
    step_field, run_field = StepRun._meta.get_field, WorkflowRun._meta.get_field
    step_moves, run_moves = transitions.allowed(StepRun), transitions.allowed(WorkflowRun)
    # The straight case's states, narrowed from those the state machines allow.
    succeed_from = [s for s in step_moves.sources(StepState.SUCCEEDED) if s == StepState.RUNNING]
    wake_from = [s for s in run_moves.sources(RunState.RUNNING) if s == RunState.WAITING]
    moving = [str(RunState.RUNNING), str(RunState.WAITING)]
    if not succeed_from or not wake_from:
        raise RuntimeError("The state machines no longer allow the straight case's moves.")

    # The run, locked as the general way locks it, if it moves forward.
    run_sql = (
        f"run AS (SELECT {col(WorkflowRun, 'id')}, {col(WorkflowRun, 'trace_context')} "  # nosec B608
        f"FROM {runs} WHERE {col(WorkflowRun, 'id')} = {bind(run_field('id'), Param('run_id'))} "
        f"AND {col(WorkflowRun, 'state')} = ANY({raw(moving)}) FOR UPDATE)"
    )
    # The step succeeds, if this attempt still holds its lease.
    succeeded = _succeeded_step()
    step_set = ", ".join(
        f"{col(StepRun, name)} = {bind(step_field(name), value, cast=True)}"
        for name, value in succeeded.items()
    )
    where = (
        f"step.{col(StepRun, 'id')} = {bind(step_field('id'), Param('step_id'))} "
        f"AND step.{col(StepRun, 'run')} = run.{col(WorkflowRun, 'id')} "
        f"AND step.{col(StepRun, 'state')} = ANY({raw(succeed_from)}) "
    )
    where += (
        f"AND step.{col(StepRun, 'lease_token')} = "
        f"{bind(step_field('lease_token'), Param('lease_token'))} "
        f"AND (step.{col(StepRun, 'due_at')} IS NULL OR step.{col(StepRun, 'due_at')} >= "
        f"{bind(step_field('due_at'), Param('now'), cast=True)})"
    )
    done_sql = (
        f"done AS (UPDATE {steps} AS step SET {step_set} FROM run WHERE {where} "  # nosec B608
        f"RETURNING step.{col(StepRun, 'id')} AS {qn('id')}, "
        f"step.{col(StepRun, 'run')} AS {qn('run_id')}, "
        f"step.{col(StepRun, 'node')} AS {qn('node')}, "
        f"step.{col(StepRun, 'attempt')} AS {qn('attempt')}, "
        f"step.{col(StepRun, 'scheduled_at')} AS {qn('scheduled_at')})"
    )
    event_fields = [
        f for f in StepEvent._meta.concrete_fields if f is not StepEvent._meta.auto_field
    ]
    if ends:
        return _end_statement(b, run_sql, done_sql, event_fields)
    # A waiting run wakes: a worker has its next step.
    run_set = b.run_set(_woken_run())
    woken_sql = (
        f"woken AS (UPDATE {runs} SET {run_set} WHERE {col(WorkflowRun, 'id')} IN "  # nosec B608
        f"(SELECT {qn('run_id')} FROM done) "
        f"AND {col(WorkflowRun, 'state')} = ANY({raw(wake_from)}))"
    )
    # The attempt's two events, as the general way's unit of work writes them.
    from_done = {"run_id": "run_id", "step_id": "id", "node": "node", "attempt": "attempt"}
    rows = []
    for order, (kind, at) in enumerate(
        ((EventKind.STARTED, Param("started_at")), (EventKind.COMPLETED, Param("now")))
    ):
        event = new_row(StepEvent, kind=kind, at=at)
        rows.append(
            "("
            + ", ".join(
                [
                    str(order),
                    *(
                        bind(field, event.__dict__[field.attname], cast=True)
                        for field in event_fields
                        if field.attname not in from_done
                    ),
                ]
            )
            + ")"
        )
    own = [f for f in event_fields if f.attname not in from_done]
    event_names = [qn("order"), *(qn(f"e_{f.column}") for f in own)]
    event_values = ", ".join(
        f"done.{qn(from_done[f.attname])}" if f.attname in from_done else f"e.{qn(f'e_{f.column}')}"
        for f in event_fields
    )
    events_sql = (
        f"events AS (INSERT INTO {events} ({', '.join(qn(f.column) for f in event_fields)}) "  # nosec B608
        f"SELECT {event_values} FROM done, (VALUES {', '.join(rows)}) "
        f"AS e ({', '.join(event_names)}) ORDER BY e.{qn('order')})"
    )
    # The next activity's step, scheduled or claimed.
    scheduled, claimed = new_activity_steps(node=Param("next_node"), round=Param("round"))
    step_fields = [f for f in StepRun._meta.concrete_fields if f is not StepRun._meta.auto_field]
    next_values = []
    for field in step_fields:
        one, other = claimed.__dict__[field.attname], scheduled.__dict__[field.attname]
        if field.attname == "run_id":
            next_values.append(f"done.{qn('run_id')}")
            continue
        next_values.append(
            bind(field, ClaimedOr(prepared(field, one), prepared(field, other)), cast=True)
        )
    next_sql = (
        f"next AS (INSERT INTO {steps} ({', '.join(qn(f.column) for f in step_fields)}) "  # nosec B608
        f"SELECT {', '.join(next_values)} FROM done RETURNING {col(StepRun, 'id')})"
    )
    # Model metadata only (quoted table and column names, column types); every value
    # is bound.
    sql = (
        f"WITH {run_sql}, {done_sql}, {woken_sql}, {events_sql}, {next_sql} "  # nosec B608
        f"SELECT next.{col(StepRun, 'id')}, run.{col(WorkflowRun, 'trace_context')}, "
        f"done.{qn('scheduled_at')} FROM next, run, done"
    )
    return sql, tuple(b.params)


def _end_statement(
    b: _Builder, run_sql: str, done_sql: str, event_fields: list[Field]
) -> tuple[str, tuple[Any, ...]]:
    """The rest of `_statement(ends=True)`: the run succeeds with the step's result (if its
    state machine allows it from the state it is in), and the three events are written."""
    qn, bind, raw, col = b.qn, b.bind, b.raw, b.col
    runs, events = qn(WorkflowRun._meta.db_table), qn(StepEvent._meta.db_table)
    end_from = [
        state
        for state in transitions.allowed(WorkflowRun).sources(RunState.SUCCEEDED)
        if state in (RunState.RUNNING, RunState.WAITING)
    ]
    if not end_from:
        raise RuntimeError("The state machines no longer allow the straight case's end.")
    run_set = b.run_set(_ended_run())
    ended_sql = (
        f"ended AS (UPDATE {runs} SET {run_set} WHERE {col(WorkflowRun, 'id')} IN "  # nosec B608
        f"(SELECT {qn('run_id')} FROM done) "
        f"AND {col(WorkflowRun, 'state')} = ANY({raw(end_from)}) "
        f"RETURNING {col(WorkflowRun, 'id')} AS {qn('id')})"
    )
    # The attempt's two events and the run's COMPLETED, in the order the general way's
    # unit of work writes them (ids follow the ORDER BY).
    from_done = {"run_id": "run_id", "step_id": "id", "node": "node", "attempt": "attempt"}
    selects = []
    for order, (kind, at) in enumerate(
        ((EventKind.STARTED, Param("started_at")), (EventKind.COMPLETED, Param("now")))
    ):
        event = new_row(StepEvent, kind=kind, at=at)
        values = [
            f"done.{qn(from_done[field.attname])}"
            if field.attname in from_done
            else bind(field, event.__dict__[field.attname], cast=True)
            for field in event_fields
        ]
        selects.append(f"SELECT {order} AS {qn('order')}, {', '.join(values)} FROM done")  # nosec B608 # names from model metadata, values bound
    run_event = new_row(StepEvent, kind=EventKind.COMPLETED, at=Param("now"), node="", attempt=0)
    values = []
    for field in event_fields:
        if field.attname == "run_id":
            values.append(f"ended.{qn('id')}")
        elif field.attname == "step_id":
            values.append("NULL")
        else:
            values.append(bind(field, run_event.__dict__[field.attname], cast=True))
    selects.append(f"SELECT 2, {', '.join(values)} FROM ended")  # nosec B608 # as above
    columns = ", ".join(qn(field.column) for field in event_fields)
    picked = ", ".join(f"{qn('e')}.{qn(field.column)}" for field in event_fields)
    events_sql = (
        f"events AS (INSERT INTO {events} ({columns}) SELECT {picked} FROM "  # nosec B608
        f"({' UNION ALL '.join(selects)}) AS {qn('e')} ({qn('order')}, {columns}) "
        f"ORDER BY {qn('e')}.{qn('order')})"
    )
    # Model metadata only (quoted table and column names, column types); every value
    # is bound.
    sql = (
        f"WITH {run_sql}, {done_sql}, {ended_sql}, {events_sql} "  # nosec B608
        f"SELECT done.{qn('scheduled_at')} FROM done, ended"
    )
    return sql, tuple(b.params)


# The function's arguments, in order, each typed as the column it stands for; the last,
# `claimed`, says whether the next step is claimed by this worker.
_ARGUMENTS: tuple[tuple[str, type[Model], str], ...] = (
    ("run_id", WorkflowRun, "id"),
    ("step_id", StepRun, "id"),
    ("lease_token", StepRun, "lease_token"),
    ("now", StepRun, "finished_at"),
    ("started_at", StepRun, "started_at"),
    ("result", StepRun, "result"),
    ("round", StepRun, "round"),
    ("next_node", StepRun, "node"),
    ("lease", StepRun, "lease"),
    ("claim_token", StepRun, "lease_token"),
    ("due_at", StepRun, "due_at"),
    ("holder", StepRun, "lease_holder"),
)


def _argument_types() -> list[str]:
    return [*(functions.column_type(model, name) for _name, model, name in _ARGUMENTS), "boolean"]


# The end's function's arguments, as `_ARGUMENTS`.
_END_ARGUMENTS = _ARGUMENTS[:6]


@functools.cache
def end_function() -> functions.Function:
    """`_statement(ends=True)` as a PostgreSQL function, as `function` is made."""
    sql, params = _statement(ends=True)
    positions = {name: index for index, (name, _model, _field) in enumerate(_END_ARGUMENTS, 1)}
    return functions.Function(
        prefix="baton_record_end",
        arguments=tuple(functions.column_type(model, name) for _n, model, name in _END_ARGUMENTS),
        returns="o_scheduled_at timestamptz",
        body=function_body(sql, params, argument_writer(positions)),
    )


@functools.cache
def function() -> functions.Function:
    """The statement as a PostgreSQL function (`workflows.engine.functions`): the same
    SQL, its constants written in, its per-call values the function's arguments."""
    sql, params = _statement()
    positions = {name: index for index, (name, _model, _field) in enumerate(_ARGUMENTS, 1)}
    argument = argument_writer(positions, claimed=f"${len(_ARGUMENTS) + 1}")
    return functions.Function(
        prefix="baton_record_straight",
        arguments=tuple(_argument_types()),
        returns="o_next_step_id bigint, o_trace_context jsonb, o_scheduled_at timestamptz",
        body=function_body(sql, params, argument),
    )
