"""Starting runs: validate the input, insert the run already running, enter its first node.

The common start (no idempotency key, no concurrency limit, not a child, the first
node a plain activity on the default queue) is written by one call of a PostgreSQL
function (`start_function`, see workflows/engine/functions.py): the run, its STARTED
event and its first step, in one round trip that commits as it ends (where a
transaction costs BEGIN and COMMIT besides). The function is compiled from the rows
the general way makes, the models' transitions applied once to template rows
(`compiled`): what every start writes alike is in its text, and a start converts and
sends only its own values, with no step or event instance (unless the starter claims
the step and runs it).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.utils import timezone

from workflows import due_times, metrics, queues, registry, tracing
from workflows.dsl import Activity, Workflow
from workflows.engine import advance, batch, functions, moves
from workflows.engine.compiled import (
    PER_CALL,
    ClaimedOr,
    Param,
    argument_writer,
    new_activity_steps,
    prepared,
    sql_type,
)
from workflows.engine.nodes import activity
from workflows.engine.work import (
    LIVE_FORWARD_RUN_STATES,
    UNDOING_RUN_STATES,
    Claim,
    UnitOfWork,
    definition_of,
    log_event,
    send_on_commit,
    settle,
    tell_hooks_runs_started,
    write_after_hooks,
)
from workflows.models import StepEvent, StepRun, WorkflowRun, new_row
from workflows.states import EventKind, RunState


@tracing.traced_start
def start_workflow(
    *,
    workflow_type: str,
    input: Any,
    idempotency_key: str | None = None,
    correlation_id: str = "",
    started_by: Any = None,
    now: datetime | None = None,
    parent_step: StepRun | None = None,
) -> tuple[WorkflowRun, bool]:
    """Start a run of the latest version of `workflow_type` in one transaction.

    Return the run and whether it was created: a second start with the same
    idempotency key returns the first run and starts nothing. Raise
    UnknownWorkflow or InvalidInput before anything is written. A child run names
    the step of its parent that waits for it (`parent_step`, see nodes/child.py).
    """
    run, created, _claim = start_claiming(
        workflow_type=workflow_type,
        input=input,
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        started_by=started_by,
        now=now,
        parent_step=parent_step,
        here=False,
    )
    return run, created


def start_claiming(
    *,
    workflow_type: str,
    input: Any,
    idempotency_key: str | None,
    correlation_id: str,
    started_by: Any,
    now: datetime | None,
    parent_step: StepRun | None,
    here: bool,
) -> tuple[WorkflowRun, bool, Claim | None]:
    """Start a run as `start_workflow` does; with `here`, its first step is claimed for this
    process in the start's own write, as a worker's record claims the step after it
    (`activity.enter`): a local activity, or a remote one if eager dispatch is on. Return
    the run, whether it was created, and that claim, which the caller runs
    (`execute.start_workflow_here`); its step was sent to no worker."""
    definition = registry.get(workflow_type)
    data = definition.validate_input(input)
    now = now or timezone.now()
    work = UnitOfWork(inline=here, eager=here and settings.BATON_EAGER_STEPS > 0)
    if not idempotency_key and parent_step is None and _starts_straight(definition):
        run = _start_in_one_statement(
            definition,
            data,
            correlation_id=correlation_id,
            started_by=started_by,
            now=now,
            work=work,
        )
        return run, True, work.inline_claim
    with transaction.atomic():
        run = _new_run(
            definition,
            data,
            idempotency_key=idempotency_key or "",
            correlation_id=correlation_id,
            started_by=started_by,
            parent_step=parent_step,
            now=now,
        )
        runnable = _has_capacity(definition)
        if runnable:
            run.start(now=now)  # inserted as running: no second write of the row
        if idempotency_key:
            # Only a keyed start can collide, so only it is written on its own, in a
            # savepoint; any other is written with its first step and events.
            try:
                with transaction.atomic():
                    run.save(force_insert=True)
            except IntegrityError:
                # A start with the same key came first: return its run, start nothing.
                return _run_for_key(workflow_type, idempotency_key), False, None  # type: ignore[return-value]
        else:
            work.insert(run)
        work.event(run, None, EventKind.STARTED, now, detail={"version": definition.version})
        if runnable:
            advance.enter_node(
                run, definition, definition.start, came_from=None, now=now, work=work
            )
            settle(run, work)
        work.finish(run)
    return run, True, work.inline_claim


def _new_run(
    definition: Workflow,
    data: Any,
    *,
    idempotency_key: str,
    correlation_id: str,
    started_by: Any,
    parent_step: StepRun | None,
    now: datetime,
) -> WorkflowRun:
    run = new_row(
        WorkflowRun,
        workflow_type=definition.name,
        workflow_version=definition.version,
        input=data,
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        started_by=started_by,
        parent_step=parent_step,
        parent_run_id=parent_step.run_id if parent_step is not None else None,
        trace_context=tracing.current_context(),
    )
    if definition.deadline is not None:
        # Counted from the request, so a run that waited in `pending` has no longer.
        run.deadline_at = due_times.due_at(duration=definition.deadline, start=now)
    return run


def _run_for_key(workflow_type: str, idempotency_key: str | None) -> WorkflowRun | None:
    return WorkflowRun.objects.filter(
        workflow_type=workflow_type, idempotency_key=idempotency_key
    ).first()


def _has_capacity(definition: Workflow) -> bool:
    if definition.concurrency_limit is None:
        return True
    if connection.vendor == "postgresql":
        # Serialise the count-then-start of this type so two starts cannot both
        # take the last slot.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [definition.name])
    live = WorkflowRun.objects.filter(
        workflow_type=definition.name,
        state__in=[*LIVE_FORWARD_RUN_STATES, *UNDOING_RUN_STATES],
    ).count()
    return live < definition.concurrency_limit


def _begin(run: WorkflowRun, definition: Workflow, *, now: datetime, work: UnitOfWork) -> None:
    run.start(now=now)
    advance.enter_node(run, definition, definition.start, came_from=None, now=now, work=work)
    settle(run, work)


def start_pending_runs(*, now: datetime, limit: int) -> int:
    """Start runs that waited in `pending` for their type's concurrency limit to free up."""
    started = 0
    for definition in registry.all_definitions():
        if definition.concurrency_limit is None:
            continue
        while started < limit:
            work = UnitOfWork()
            with transaction.atomic():
                run = (
                    WorkflowRun.objects.select_for_update(skip_locked=True)
                    .filter(workflow_type=definition.name, state=RunState.PENDING)
                    .order_by("created_at")
                    .first()
                )
                if run is None or not _has_capacity(definition):
                    break
                _begin(run, definition_of(run), now=now, work=work)
                work.finish(run)
            started += 1
    return started


def _starts_straight(definition: Workflow) -> bool:
    """Whether a start of `definition` can be written by `start_function`: no limit to
    count, and a first node that only makes its step (a plain activity, on the default
    queue, without limits), scheduled for a worker or claimed by the starter."""
    if not functions.used(connection) or definition.concurrency_limit is not None:
        return False
    node = definition.node(definition.start)
    return type(node) is Activity and node.queue is None and not queues.is_limited(node)


def _start_in_one_statement(
    definition: Workflow,
    data: Any,
    *,
    correlation_id: str,
    started_by: Any,
    now: datetime,
    work: UnitOfWork,
) -> WorkflowRun:
    """Start a run whose start `_starts_straight` allows, written by one call of
    `start_function`: the run started as `WorkflowRun.start` starts it, its STARTED event,
    and its first step, scheduled for a worker, or claimed as `activity.enter` claims it
    (`start_claiming`: then it is sent to no worker).

    Only what differs between starts is converted and sent; the rest of the three rows
    is in the function's text. The run-start hooks are told first, in a transaction: one
    that writes (a webhook's delivery) keeps it open, and the call joins it, so both
    commit or neither does; one that writes nothing leaves nothing open, and the call
    commits on its own.
    """
    # The default connection itself, looked up once: each attribute read through
    # `django.db.connection` looks it up again.
    connection = connections[DEFAULT_DB_ALIAS]
    run = _new_run(
        definition,
        data,
        idempotency_key="",
        correlation_id=correlation_id,
        started_by=started_by,
        parent_step=None,
        now=now,
    )
    run.start(now=now)
    run.created_at = run.updated_at = timezone.now()  # as a save's `pre_save` sets them
    node = definition.node(definition.start)
    claimed = activity.claimed_here(run=run, node=node, work=work)
    if claimed:
        work.inline_claim = moves.engine().claim_inline(run, node, 0, now, work)
        step = work.inline_claim.step
        first = {"lease": step.lease, "due_at": step.due_at}
        first.update(claim_token=step.lease_token, holder=step.lease_holder)
    else:
        first = {**activity.scheduled(node, now), "claim_token": None, "holder": ""}
    detail = {"version": definition.version}  # as the JSON column gives it back
    values = {
        "run_id": run.id,
        "workflow_type": run.workflow_type,
        "workflow_version": run.workflow_version,
        "input": _INPUT.get_db_prep_save(run.input, connection=connection),
        "correlation_id": run.correlation_id,
        "started_by_id": run.started_by_id,
        "deadline_at": run.deadline_at,
        "trace_context": _TRACE_CONTEXT.get_db_prep_save(run.trace_context, connection=connection),
        "saved_at": run.created_at,
        "now": now,
        "detail": _DETAIL.get_db_prep_save(detail, connection=connection),
        "node": node.name,
        **first,
    }
    bound = [values[name] for name, _model, _field in _ARGUMENTS] + [claimed]
    log_event(run=run, step=None, kind=EventKind.STARTED, detail=detail)
    step_id = write_after_hooks(
        tell=lambda: tell_hooks_runs_started([run], now=now),
        write=lambda: _insert(connection, start_function().call_sql, bound),
    )
    run._state.adding = False
    run._state.db = connection.alias
    run.mark_saved()
    metrics.record_run_event(workflow_type=run.workflow_type, kind=EventKind.STARTED, detail=detail)
    if claimed:
        step.pk = step_id
        step._state.adding = False
        step._state.db = connection.alias
        step.mark_saved()
    else:
        send_on_commit([step_id], tracing.run_contexts([(step_id, run.trace_context)]))
    return run


def _insert(connection: BaseDatabaseWrapper, call: str, values: list[Any]) -> int:
    with functions.cursor(connection) as cursor:
        cursor.execute(call, values)
        return cursor.fetchone()[0]


_INPUT = WorkflowRun._meta.get_field("input")
_TRACE_CONTEXT = WorkflowRun._meta.get_field("trace_context")
_DETAIL = StepEvent._meta.get_field("detail")


# The straight start's per-call values, in its function's argument order, each typed as
# the column it stands for; a last argument says whether the first step is claimed.
_ARGUMENTS: tuple[tuple[str, type[Model], str], ...] = (
    ("run_id", WorkflowRun, "id"),
    ("workflow_type", WorkflowRun, "workflow_type"),
    ("workflow_version", WorkflowRun, "workflow_version"),
    ("input", WorkflowRun, "input"),
    ("correlation_id", WorkflowRun, "correlation_id"),
    ("started_by_id", WorkflowRun, "started_by"),
    ("deadline_at", WorkflowRun, "deadline_at"),
    ("trace_context", WorkflowRun, "trace_context"),
    ("saved_at", WorkflowRun, "created_at"),
    ("now", WorkflowRun, "started_at"),
    ("detail", StepEvent, "detail"),
    ("node", StepRun, "node"),
    ("lease", StepRun, "lease"),
    ("due_at", StepRun, "due_at"),
    ("claim_token", StepRun, "lease_token"),
    ("holder", StepRun, "lease_holder"),
)


def _template_rows() -> tuple[WorkflowRun, StepEvent, StepRun, StepRun]:
    """A straight start's rows as the general way makes them, each value a start brings
    a `Param`: the run started (`WorkflowRun.start`), its STARTED event as
    `UnitOfWork.event` makes a run's, and its first step, scheduled and claimed
    (`compiled.new_activity_steps`). tests/workflows/test_functions.py holds what the
    function writes to what the general way writes."""
    run = new_row(
        WorkflowRun,
        id=Param("run_id"),
        workflow_type=Param("workflow_type"),
        workflow_version=Param("workflow_version"),
        input=Param("input"),
        correlation_id=Param("correlation_id"),
        started_by_id=Param("started_by_id"),
        deadline_at=Param("deadline_at"),
        trace_context=Param("trace_context"),
        created_at=Param("saved_at"),
        updated_at=Param("saved_at"),
    )
    run.start(now=Param("now"))
    event = new_row(
        StepEvent,
        run_id=Param("run_id"),
        step_id=None,
        node="",
        kind=EventKind.STARTED,
        attempt=0,
        at=Param("now"),
        detail=Param("detail"),
    )
    scheduled, claimed = new_activity_steps(node=Param("node"), round=0)
    return run, event, scheduled, claimed


def _values(model: type[Model], row: Model, other: Model | None = None) -> list[tuple[Field, Any]]:
    """The columns an insert of `row` writes (all but a key the database numbers), each with
    its value: a constant converted as a save converts it, a `Param`, or, where `other`
    differs, a `ClaimedOr` of the two (`row` claimed, `other` scheduled)."""
    columns = []
    for field in model._meta.concrete_fields:
        if field is model._meta.auto_field:
            continue
        value = prepared(field, row.__dict__[field.attname])
        name = f"{model.__name__}.{field.name}"
        stamped = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        if not batch.reads_attribute(field) and not (stamped and isinstance(value, Param)):
            # A save would compute it (`pre_save`): the function would write it raw.
            raise RuntimeError(f"{name} is computed on save: the start cannot compile it.")
        varies = callable(field.default) and field.get_default() != field.get_default()
        if varies and not isinstance(value, PER_CALL):
            raise RuntimeError(f"{name} differs per row: make it a Param.")
        if other is not None:
            value = ClaimedOr(value, prepared(field, other.__dict__[field.attname]))
        columns.append((field, value))
    return columns


@functools.cache
def start_function() -> functions.Function:
    """One run, its STARTED event and its first step, as a function: its arguments are a
    start's own values (`_ARGUMENTS`, then whether the step is claimed); every other
    column is a constant of its text, from the models' transitions applied once to
    template rows (`compiled`). It returns the step's id."""
    qn = connections[DEFAULT_DB_ALIAS].ops.quote_name
    positions = {name: index for index, (name, _model, _field) in enumerate(_ARGUMENTS, 1)}
    argument = argument_writer(positions, claimed=f"${len(_ARGUMENTS) + 1}")
    run, event, scheduled, claimed = _template_rows()
    inserts = []
    for model, columns in (
        (WorkflowRun, _values(WorkflowRun, run)),
        (StepEvent, _values(StepEvent, event)),
        (StepRun, _values(StepRun, claimed, scheduled)),
    ):
        names = ", ".join(qn(field.column) for field, _value in columns)
        values = ", ".join(f"({argument(value)})::{sql_type(field)}" for field, value in columns)
        inserts.append(f"INSERT INTO {qn(model._meta.db_table)} ({names}) VALUES ({values})")  # nosec B608
    run_sql, event_sql, step_sql = inserts
    step_id = qn(StepRun._meta.pk.column)
    # Model metadata only (quoted table and column names, column types, constants the
    # transitions set); every value a start brings is an argument.
    body = (
        f"WITH run AS ({run_sql}), event AS ({event_sql}), "
        f"step AS ({step_sql} RETURNING {step_id}) SELECT step.{step_id} FROM step"  # nosec B608
    )
    return functions.Function(
        prefix="baton_start_run",
        arguments=(
            *(functions.column_type(model, name) for _name, model, name in _ARGUMENTS),
            "boolean",
        ),
        returns=f"o_step_id {functions.column_type(StepRun, 'id')}",
        body=body,
    )
