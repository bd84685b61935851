"""Timers fired as a set: the sweep's common case in one statement per batch.

A run asleep in a Sleep whose next node is an activity needs nothing of the graph
when its timer fires: the timer step succeeds, the activity's step is scheduled, the
run wakes and the step is sent. Done per run in Python (model instances, transitions,
a step and an event built for each), a batch cost about 1.5 ms a timer. Here one
statement does it for the whole batch: an `UPDATE ... RETURNING` of the due timer
steps, fenced in SQL, feeding an `INSERT ... SELECT` of the activities' steps, one of
their timeline events and the runs' wake-up. Every other due step goes the per-run way.

Nothing is decided twice: what the timer step and the run become is read from their
django-fsm transitions applied to a template row (`StepRun.succeed`, `WorkflowRun.wake`),
the states they may be in from the sources the state machines allow
(`transitions.allowed`), and what is recorded
and scheduled from the node kinds (`sleep.slept`, `activity.scheduled`). The SQL is
built once per process from the models' metadata; every value is bound.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model
from django.utils import timezone

from workflows import registry, tracing
from workflows.dsl import Activity, Sleep, Workflow
from workflows.engine import transitions
from workflows.engine.nodes import activity, sleep
from workflows.engine.work import CLAIMABLE_FORWARD_RUN_STATES, send_on_commit
from workflows.models import SavesChanges, StepEvent, StepRun, WorkflowRun, new_row
from workflows.states import LIVE_STEP_STATES, RunState, StepKind, StepState

logger = logging.getLogger("baton.engine")


class SweptRun(Protocol):
    """What the set path reads of a run the sweep locked (a WorkflowRun has it too)."""

    id: uuid.UUID
    workflow_type: str
    workflow_version: int
    trace_context: dict[str, str]


def fire_due_timers(runs: Sequence[SweptRun], now: datetime) -> set[uuid.UUID]:
    """Fire the due timers of `runs` that lead straight to an activity; return the runs fired.

    The caller holds the runs' locks (the sweep's SKIP LOCKED), so no other sweep, worker
    or cancel moves them meanwhile; the statement is fenced on the steps' and runs'
    states all the same, so a timer no longer waiting (fired, cancelled) is left alone.
    A run fires here only if the due timer is its only live step and it moves forward
    (running or waiting): anything else goes the per-run way. PostgreSQL only; elsewhere
    every run goes the per-run way.
    """
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql" or not runs:
        return set()
    plans = _plans({(run.workflow_type, run.workflow_version) for run in runs}, now)
    if not plans:
        return set()
    sql, columns = _fire_sql()
    step_fields = [StepRun._meta.get_field(name) for name in columns]
    plan_arrays = [
        [plan.definition.name for plan in plans],
        [plan.definition.version for plan in plans],
        [plan.timer for plan in plans],
        *(
            [_prepared(field, plan.next_step, connection) for plan in plans]
            for field in step_fields
        ),
    ]
    params = [
        *plan_arrays,
        *_changes(_fired_timer(now), connection),
        [run.id for run in runs],
        list(CLAIMABLE_FORWARD_RUN_STATES),
        _sources(StepRun, StepState.SUCCEEDED, _TIMER_STATES),
        StepKind.FORWARD,
        now,
        list(LIVE_STEP_STATES),
        *_changes(_woken_run(), connection),
        _sources(WorkflowRun, RunState.RUNNING, _ASLEEP_RUN_STATES),
        *(_prepared(field, _fired_event(now), connection) for field in _event_constants()),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        scheduled = cursor.fetchall()
    if not scheduled:
        return set()
    contexts = {run.id: run.trace_context for run in runs}
    step_ids = [step_id for step_id, _ in scheduled]
    send_on_commit(
        step_ids, tracing.run_contexts((step_id, contexts[run]) for step_id, run in scheduled)
    )
    # The summary line a batch logs (see UnitOfWork.finish), each timer being routine.
    logger.info("sweep.batch", extra={f"events_{sleep.FIRED}": len(scheduled)})
    return {run_id for _, run_id in scheduled}


@dataclass(frozen=True)
class _Plan:
    """A Sleep of a definition whose next node is an activity, and that activity's new step."""

    definition: Workflow
    timer: str
    next_step: StepRun


def _plans(definitions: set[tuple[str, int]], now: datetime) -> list[_Plan]:
    plans = []
    for name, version in definitions:
        try:
            definition = registry.get(name, version)
        except registry.UnknownWorkflow:
            continue  # the per-run way fails such a run, and logs it
        for timer, next_node in _timers_to_activities(definition):
            step = new_row(
                StepRun,
                node=next_node.name,
                state=StepState.SCHEDULED,
                scheduled_at=now,
                **activity.scheduled(next_node, now),
            )
            plans.append(_Plan(definition, timer, step))
    return plans


def _timers_to_activities(definition: Workflow) -> list[tuple[str, Activity]]:
    """The definition's Sleeps whose next node an activity is entered straight into (no
    join closes it, so no race can have closed it). An activity with a queue of its own
    is left to the run-by-run way, which sends its step to that queue."""
    found = []
    for node in definition.nodes:
        if isinstance(node, Sleep) and node.next is not None:
            following = definition.node(node.next)
            if (
                type(following) is Activity
                and following.queue is None
                and node.next not in definition.join_of
            ):
                found.append((node.name, following))
    return found


# The state a Sleep's step waits in, and a run whose steps all wait.
_TIMER_STATES = (StepState.WAITING,)
_ASLEEP_RUN_STATES = (RunState.WAITING,)


def _sources(model: type[Model], target: str, states: tuple[str, ...]) -> list[str]:
    """Those of `states` the state machine allows a move into `target` from (the table
    `transitions.allowed` reads from the django-fsm transitions)."""
    allowed = transitions.allowed(model).sources(target)
    return [str(state) for state in states if state in allowed]


def _fired_timer(now: datetime) -> StepRun:
    """A timer step as `sleep.due` leaves it, built by the same transition."""
    step = _template(StepRun, StepState.WAITING)
    step.succeed(result=sleep.slept(now), now=now)
    return step


def _woken_run() -> WorkflowRun:
    """A run as `settle` leaves it once a step is sent, built by the same transition."""
    run = _template(WorkflowRun, RunState.WAITING)
    run.wake()
    return run


def _template(model: type[Any], state: str) -> Any:
    """A row in `state` whose other fields hold `_UNSET`, so those its transition sets show."""
    row = new_row(model, state=state)
    for field in model._meta.concrete_fields:
        if field.attname != "state":
            row.__dict__[field.attname] = _UNSET
    return row


_UNSET = object()


def _fired_event(now: datetime) -> StepEvent:
    return new_row(StepEvent, kind=sleep.FIRED, at=now, detail={})


def _changes(row: SavesChanges, connection: Any) -> list[Any]:
    """The values of the columns `_changed_columns` names, as `row`'s transition set them
    (a column saved automatically, `updated_at`, set to now as a save would)."""
    model = type(row)
    values = []
    for name in _changed_columns(model):
        field = model._meta.get_field(name)
        value = timezone.now() if getattr(field, "auto_now", False) else row.__dict__[name]
        values.append(field.get_db_prep_save(value, connection=connection))
    return values


@functools.cache
def _changed_columns(model: type[SavesChanges]) -> tuple[str, ...]:
    """The fields the set path's transition of `model` changes, and those saved automatically."""
    row = _fired_timer(timezone.now()) if model is StepRun else _woken_run()
    return tuple(
        field.attname
        for field in model._meta.concrete_fields
        if row.__dict__[field.attname] is not _UNSET or getattr(field, "auto_now", False)
    )


def _prepared(field: Field, row: Model, connection: Any) -> Any:
    return field.get_db_prep_save(field.pre_save(row, True), connection=connection)


# A new step's columns taken from the fired timer rather than from the plan's template.
_FROM_TIMER = {"run_id": "run_id", "round": "timer_round"}
# A new event's columns taken from the fired timer, the others from the template event.
_EVENT_FROM_TIMER = {"run_id": "run_id", "step_id": "timer_id", "node": "timer_node"}
_EVENT_ATTEMPT = "attempt"


@functools.cache
def _event_constants() -> tuple[Field, ...]:
    return tuple(
        field
        for field in StepEvent._meta.concrete_fields
        if field is not StepEvent._meta.auto_field
        and field.attname not in _EVENT_FROM_TIMER
        and field.attname != _EVENT_ATTEMPT
    )


@functools.cache
def _fire_sql() -> tuple[str, tuple[str, ...]]:
    """The statement, and the StepRun columns each plan gives its new step."""
    connection = connections[DEFAULT_DB_ALIAS]
    qn = connection.ops.quote_name

    def db_type(field: Field) -> str:
        return str(field.db_type(connection)).split("(")[0]

    step_fields = [f for f in StepRun._meta.concrete_fields if f is not StepRun._meta.auto_field]
    planned = [f for f in step_fields if f.attname not in _FROM_TIMER]
    plan_columns = [
        f"{qn('timer_type')}",
        f"{qn('timer_version')}",
        f"{qn('timer_node')}",
        *(qn(f"next_{f.column}") for f in planned),
    ]
    plan_types = [
        db_type(WorkflowRun._meta.get_field("workflow_type")),
        db_type(WorkflowRun._meta.get_field("workflow_version")),
        db_type(StepRun._meta.get_field("node")),
        *(db_type(f) for f in planned),
    ]
    steps, runs, events = (qn(m._meta.db_table) for m in (StepRun, WorkflowRun, StepEvent))

    def col(model: type[Model], name: str) -> str:
        return qn(model._meta.get_field(name).column)

    step_set = ", ".join(f"{col(StepRun, name)} = %s" for name in _changed_columns(StepRun))
    run_set = ", ".join(f"{col(WorkflowRun, name)} = %s" for name in _changed_columns(WorkflowRun))
    s_id, s_run, s_state, s_due, s_node = (
        col(StepRun, name) for name in ("id", "run", "state", "due_at", "node")
    )
    s_kind, s_round, s_attempt = (col(StepRun, name) for name in ("kind", "round", "attempt"))
    r_id, r_state = col(WorkflowRun, "id"), col(WorkflowRun, "state")
    r_type, r_version = col(WorkflowRun, "workflow_type"), col(WorkflowRun, "workflow_version")
    fired_columns = {
        "run_id": f"step.{s_run}",
        "timer_id": f"step.{s_id}",
        "timer_node": f"step.{s_node}",
        "timer_round": f"step.{s_round}",
        "timer_attempt": f"step.{s_attempt}",
    }
    returning = ", ".join(
        [
            *(f"{expression} AS {qn(name)}" for name, expression in fired_columns.items()),
            *(f"plan.{qn(f'next_{f.column}')}" for f in planned),
        ]
    )
    insert_columns = ", ".join(qn(f.column) for f in step_fields)
    insert_values = ", ".join(
        f"fired.{qn(_FROM_TIMER[f.attname])}"
        if f.attname in _FROM_TIMER
        else f"fired.{qn(f'next_{f.column}')}"
        for f in step_fields
    )
    event_fields = [
        f for f in StepEvent._meta.concrete_fields if f is not StepEvent._meta.auto_field
    ]
    constants = _event_constants()
    event_values = ", ".join(
        f"fired.{qn(_EVENT_FROM_TIMER[f.attname])}"
        if f.attname in _EVENT_FROM_TIMER
        else f"fired.{qn('timer_attempt')}"
        if f.attname == _EVENT_ATTEMPT
        else f"(%s)::{db_type(f)}"
        for f in event_fields
    )
    # The event's constant values are bound in the order of `_event_constants`.
    assert [f for f in event_fields if f in constants] == list(constants)
    unnest = ", ".join(f"(%s)::{t}[]" for t in plan_types)
    # Model metadata only (quoted table and column names, column types); every value
    # is bound.
    sql = (
        f"WITH plan ({', '.join(plan_columns)}) AS (SELECT * FROM UNNEST({unnest})), "  # nosec B608
        f"fired AS (UPDATE {steps} AS step SET {step_set} "
        # The locked runs as a relation, not `run.id = ANY(...)`: PostgreSQL checks such
        # an array against every run it looks up, a batch's square.
        f"FROM UNNEST((%s)::uuid[]) AS locked ({qn('id')}) "
        f"JOIN {runs} AS run ON run.{r_id} = locked.{qn('id')}, plan "
        f"WHERE run.{r_state} = ANY(%s) "
        f"AND step.{s_run} = run.{r_id} AND step.{s_state} = ANY(%s) "
        f"AND step.{s_kind} = %s AND step.{s_due} <= %s "
        f"AND plan.{qn('timer_type')} = run.{r_type} "
        f"AND plan.{qn('timer_version')} = run.{r_version} "
        f"AND plan.{qn('timer_node')} = step.{s_node} "
        f"AND NOT EXISTS (SELECT 1 FROM {steps} AS other WHERE other.{s_run} = step.{s_run} "
        f"AND other.{s_id} <> step.{s_id} AND other.{s_state} = ANY(%s)) "
        f"RETURNING {returning}), "
        f"woken AS (UPDATE {runs} SET {run_set} "
        f"WHERE {r_id} IN (SELECT {qn('run_id')} FROM fired) AND {r_state} = ANY(%s)), "
        f"events AS (INSERT INTO {events} ({', '.join(qn(f.column) for f in event_fields)}) "
        f"SELECT {event_values} FROM fired), "
        f"scheduled AS (INSERT INTO {steps} ({insert_columns}) "
        f"SELECT {insert_values} FROM fired RETURNING {s_id}, {s_run}) "
        f"SELECT {s_id}, {s_run} FROM scheduled"
    )
    return sql, tuple(f.attname for f in planned)
