"""Starting runs: validate the input, insert the run already running, enter its first node.

The common start (no idempotency key, no concurrency limit, not a child, the first
node a plain activity on the default queue) is written by one call of a PostgreSQL
function (`start_function`, see workflows/engine/functions.py): the run, its STARTED
event and its first step, as the unit of work made them in memory, in one round trip
that commits as it ends (where a transaction costs BEGIN and COMMIT besides).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Field, Model
from django.utils import timezone

from workflows import due_times, metrics, queues, registry, tracing
from workflows.dsl import Activity, Workflow
from workflows.engine import advance, functions
from workflows.engine.work import (
    LIVE_FORWARD_RUN_STATES,
    UNDOING_RUN_STATES,
    Claim,
    UnitOfWork,
    definition_of,
    send_on_commit,
    settle,
    write_after_hooks,
)
from workflows.models import SavesChanges, StepEvent, StepRun, WorkflowRun
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
    run = WorkflowRun(
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
    count, and a first node that only schedules its step (a plain activity, on the
    default queue, without limits)."""
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
    """Start a run whose start `_starts_straight` allows: made as the general way makes it
    (through `work`), written by one call of `start_function`. A first step `work` claimed
    (`start_claiming`) is inserted as claimed, and sent to no worker.

    The run-start hooks are told first, in a transaction: one that writes (a webhook's
    delivery) keeps it open, and the call joins it, so both commit or neither does; one
    that writes nothing leaves nothing open, and the call commits on its own.
    """
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
    work.insert(run)
    work.event(run, None, EventKind.STARTED, now, detail={"version": definition.version})
    advance.enter_node(run, definition, definition.start, came_from=None, now=now, work=work)
    settle(run, work)
    [step] = work.new_steps
    [event] = work.events
    claimed = work.inline_claim is not None
    if work.changed or work.new_runs != [run] or work.to_send != ([] if claimed else [step]):
        raise RuntimeError(f"A start of {definition.name} wrote more than its straight case.")
    call, values = _start_call(run, step, event)
    step.pk = write_after_hooks(tell=work.tell_run_start_hooks, write=lambda: _insert(call, values))
    for row in (run, step):
        row._state.adding = False
        row._state.db = connection.alias
        if isinstance(row, SavesChanges):
            row.mark_saved()
    metrics.record_events([event])
    if not claimed:
        send_on_commit([step.pk], tracing.run_contexts([(step.pk, run.trace_context)]))
    return run


def _insert(call: str, values: list[Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(call, values)
        return cursor.fetchone()[0]


def _start_call(run: WorkflowRun, step: StepRun, event: StepEvent) -> tuple[str, list[Any]]:
    values = []
    for model, row in ((WorkflowRun, run), (StepRun, step), (StepEvent, event)):
        for field in _inserted(model):
            value = field.pre_save(row, add=True)
            values.append(field.get_db_prep_save(value, connection=connection))
    return start_function().call_sql, values


@functools.cache
def _inserted(model: type[Model]) -> tuple[Field, ...]:
    """The columns an insert of `model` writes: all but a key the database numbers, and a
    step event's step (a run's STARTED event names none)."""
    return tuple(
        field
        for field in model._meta.concrete_fields
        if field is not model._meta.auto_field
        and not (model is StepEvent and field.attname == "step_id")
    )


@functools.cache
def start_function() -> functions.Function:
    """One run, its first step and its STARTED event, inserted as given, as a function:
    its arguments are their columns in `_inserted` order; it returns the step's id."""
    qn = connections[DEFAULT_DB_ALIAS].ops.quote_name
    arguments: list[str] = []
    inserts = []
    for model in (WorkflowRun, StepRun, StepEvent):
        fields = _inserted(model)
        first = len(arguments) + 1
        arguments += [functions.column_type(model, field.name) for field in fields]
        columns = ", ".join(qn(field.column) for field in fields)
        values = ", ".join(f"${index}" for index in range(first, len(arguments) + 1))
        inserts.append(
            f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({values})"  # nosec B608
        )
    run_sql, step_sql, event_sql = inserts
    # Model metadata only (quoted table and column names); every value is an argument.
    body = (
        f"WITH run AS ({run_sql}), event AS ({event_sql}), "
        f"step AS ({step_sql} RETURNING {qn(StepRun._meta.pk.column)}) "
        f"SELECT step.{qn(StepRun._meta.pk.column)} FROM step"  # nosec B608
    )
    return functions.Function(
        prefix="baton_start_run",
        arguments=tuple(arguments),
        returns=f"o_step_id {functions.column_type(StepRun, 'id')}",
        body=body,
    )
