"""The unit of work every use case writes through, and what the use cases share.

This is the engine's small core: the node kinds (`nodes`) build on it and on
nothing above it, so what both the use cases and the node kinds need lives here
(locking a run, creating, scheduling and sending steps, settling a run's state).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery import current_app
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q, QuerySet
from psycopg.pq import TransactionStatus

from workflows import metrics, registry, tracing
from workflows.activity import ActivityContext
from workflows.dsl import Activity, Map, Workflow
from workflows.engine import batch, moves, publish
from workflows.engine.errors import RunNotFound
from workflows.models import StepEvent, StepRun, WorkflowRun, new_row
from workflows.states import (
    ACTIVE_STEP_STATES,
    FINAL_RUN_STATES,
    LIVE_STEP_STATES,
    EventKind,
    RunState,
    StepKind,
    StepState,
)

logger = logging.getLogger("baton.engine")


EXECUTE_STEP_TASK = "baton.execute_step"
EXECUTE_STEPS_TASK = "baton.execute_steps"
# What a sweep does by the thousand, logged one by one only at debug.
_ROUTINE_EVENTS = frozenset(
    {EventKind.STARTED, EventKind.COMPLETED, EventKind.WAITING, EventKind.REDISPATCHED}
)
# The run's own timeline lines that say it ended (see registry.register_run_end_hook).
RUN_ENDING_EVENTS = frozenset(
    {
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.COMPENSATED,
        EventKind.CANCELLED,
        EventKind.DEAD_LETTERED,
    }
)
_ENDED_RUN_STATES = (*FINAL_RUN_STATES, RunState.DEAD_LETTERED)
LIVE_FORWARD_RUN_STATES = (RunState.RUNNING, RunState.WAITING, RunState.PAUSED)
UNDOING_RUN_STATES = (RunState.COMPENSATING, RunState.CANCELLING)
# A forward step is claimed only while its run moves forward (a paused run holds its steps).
CLAIMABLE_FORWARD_RUN_STATES = (RunState.RUNNING, RunState.WAITING)
# An undo is claimed while its run undoes, or while it moves forward (the undo of a
# branch that lost a join's race); never while it is paused.
UNDO_CLAIMABLE_RUN_STATES = (*UNDOING_RUN_STATES, *CLAIMABLE_FORWARD_RUN_STATES)


T = TypeVar("T")


def write_after_hooks(*, tell: Callable[[], None], write: Callable[[], T]) -> T:
    """Tell hooks about a change, then make it with `write` (one statement): in the
    hooks' transaction if they opened one, so that both commit or neither does, else
    on its own, so that it commits as it ends (no BEGIN, no COMMIT of its own).

    A hook opens it by writing (a webhook's delivery) or by leaving work for the
    commit: that work must run only if the change is written. `write` raises to
    refuse the change, which rolls the hooks' writes back with it."""
    connection = connections[DEFAULT_DB_ALIAS]  # looked up once, not at each read
    in_callers_transaction = connection.in_atomic_block
    with transaction.atomic():
        tell()
        if in_callers_transaction or _sent_anything(connection) or connection.run_on_commit:
            return write()
    return write()


def _sent_anything(connection: BaseDatabaseWrapper) -> bool:
    """Whether `connection`'s transaction has sent a statement (psycopg sends BEGIN with
    the first one, and no COMMIT if none was sent)."""
    return connection.connection.info.transaction_status != TransactionStatus.IDLE


@dataclass(frozen=True)
class Claim:
    """One attempt a worker holds: the step, its fencing token and what the activity gets."""

    # A local step claimed inside a record learns its id when that record is written.
    step: StepRun
    run_id: uuid.UUID
    token: uuid.UUID
    started_at: datetime
    context: ActivityContext
    function: Any
    local: bool = False

    @property
    def step_id(self) -> int:
        return self.step.pk


@dataclass
class UnitOfWork:
    """What one use case writes and sends, gathered so each kind of row costs one statement.

    New steps, changed steps and runs, and the timeline's events wait here. `flush`
    writes the rows (new steps first, so everything else can refer to them): the
    engine calls it before it reads steps back (`steps_of`) or hands a step to another
    app's hook, and `finish` calls it at the end, inserts every event in one
    statement and sends the steps once the transaction commits. So a sweep firing a
    batch of timers writes each kind of row once, not once per timer.

    A worker recording a step (`inline=True`) claims the first local activity that
    follows in the same transaction and runs it next, with no broker round trip and
    no second commit; with `eager=True`, the first remote activity too (eager
    dispatch, see BATON_EAGER_STEPS). A sweep's batch (`batched=True`) logs its routine events at
    debug and sums them up in one line; the timeline keeps every one of them.
    """

    inline: bool = False
    eager: bool = False
    batched: bool = False
    inline_claim: Claim | None = None
    events: list[StepEvent] = field(default_factory=list)
    new_runs: list[WorkflowRun] = field(default_factory=list)
    new_steps: list[StepRun] = field(default_factory=list)
    changed: dict[int, WorkflowRun | StepRun] = field(default_factory=dict)
    to_send: list[StepRun] = field(default_factory=list)
    # Runs with a step sent to a worker or claimed inline in this unit of work.
    busy_runs: set[uuid.UUID] = field(default_factory=set)
    # Runs this unit of work ended, with the event that says how.
    ended: list[tuple[WorkflowRun, EventKind]] = field(default_factory=list)
    # Runs this unit of work started (see registry.register_run_start_hook).
    started: list[WorkflowRun] = field(default_factory=list)
    # The slots of limited activities a sweep may still fill (see engine/limits.py).
    limit_budgets: dict[str, Any] = field(default_factory=dict)

    def insert(self, row: WorkflowRun | StepRun) -> None:
        """Write the new row at the next flush (runs first, then steps)."""
        if isinstance(row, WorkflowRun):
            self.new_runs.append(row)
        else:
            self.new_steps.append(row)

    def save(self, row: WorkflowRun | StepRun) -> None:
        """Write the row's changed fields at the next flush."""
        self.changed[id(row)] = row

    def send(self, step: StepRun) -> None:
        """Hand the step to a worker once the transaction commits."""
        self.to_send.append(step)
        self.busy_runs.add(step.run_id)

    def event(
        self,
        run: WorkflowRun,
        step: StepRun | None,
        kind: EventKind,
        now: datetime,
        *,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Add a line to the run's timeline (written by `finish`) and log it."""
        # What the JSON column would give back, so the log says what the row holds.
        detail = json.loads(json.dumps(detail, default=str)) if detail else {}
        if step is not None and step.kind == StepKind.COMPENSATION:
            detail.setdefault("compensation", True)
        self.events.append(
            new_row(
                StepEvent,
                run=run,
                step=step,
                node=step.node if step else "",
                kind=kind,
                attempt=step.attempt if step else 0,
                at=now,
                detail=detail,
            )
        )
        if step is None and kind in RUN_ENDING_EVENTS:
            self.ended.append((run, kind))
        elif step is None and kind == EventKind.STARTED:
            self.started.append(run)
        level = logging.DEBUG if self.batched and kind in _ROUTINE_EVENTS else logging.INFO
        log_event(run=run, step=step, kind=kind, detail=detail, level=level)

    def flush(self) -> None:
        """Write the new and changed rows now (before the engine reads steps back)."""
        batch.execute(self._row_statements())

    def finish(self, *runs: WorkflowRun) -> None:
        """Write what the use case changed; send its steps once the transaction commits."""
        for run in runs:
            self.save(run)
        if self.started:
            self.tell_run_start_hooks()
        if self.ended:
            self._tell_run_end_hooks()
        if any(event.step is not None and event.step.pk is None for event in self.events):
            self.flush()  # an event names a step inserted by this unit of work
        statements = self._row_statements()
        if self.events:
            if self.batched:
                kinds = Counter(event.kind for event in self.events)
                logger.info("sweep.batch", extra={f"events_{kind}": n for kind, n in kinds.items()})
            statements.append(batch.insert(StepEvent, self.events, returning_ids=False))
            metrics.record_events(self.events)  # counted once committed
            self.events = []
        batch.execute(statements)
        if self.to_send:
            step_ids = [step.pk for step in self.to_send]
            traces = tracing.step_contexts(self.to_send)  # {} while tracing is off
            routes = queues_of(self.to_send)
            self.to_send = []
            send_on_commit(step_ids, traces, routes)

    def tell_run_start_hooks(self) -> None:
        """Tell the run-start hooks of the runs this unit of work started (`finish` does)."""
        started, self.started = self.started, []
        tell_hooks_runs_started(started, now=max(event.at for event in self.events))

    def _tell_run_end_hooks(self) -> None:
        # The last word on each run that is over now ("cancelled" is also said when
        # a cancel is only asked for, while the run undoes its steps).
        last = {id(run): (run, kind) for run, kind in self.ended}
        self.ended = []
        ended = [(run, kind) for run, kind in last.values() if run.state in _ENDED_RUN_STATES]
        if not ended:
            return
        # No flush first: a hook writes rows of its own about runs that exist already,
        # and the runs' last changes are written with the rest, in this transaction.
        now = max(event.at for event in self.events)
        waiting_parents = [
            run.parent_step_id
            for run, _ in ended
            if run.parent_step_id is not None and run.state in FINAL_RUN_STATES
        ]
        if waiting_parents:
            tell_parents_on_commit(waiting_parents, now=now)
        for hook in registry.run_end_hooks():
            hook(ended=ended, now=now)

    def _row_statements(self) -> list[batch.Statement]:
        statements = []
        # A new row changed before it was written is inserted as it is now (a run's
        # id is chosen before its insert, so it is told apart by being new).
        new_runs = {id(run) for run in self.new_runs}
        rows = [
            row for key, row in self.changed.items() if row.pk is not None and key not in new_runs
        ]
        self.changed = {}
        if self.new_runs:
            statements.append(batch.insert(WorkflowRun, self.new_runs, returning_ids=False))
            self.new_runs = []
        if self.new_steps:
            statements.append(batch.insert(StepRun, self.new_steps, returning_ids=True))
            self.new_steps = []
        if rows:
            for model in (StepRun, WorkflowRun):
                statements += batch.updates(model, [row for row in rows if isinstance(row, model)])
        return statements


def tell_parents_on_commit(step_ids: list[int], *, now: datetime) -> None:
    """Tell each parent step that its child ended, once the child's transaction commits."""
    # Told after the child's commit, never under its lock: the parent's use cases lock
    # parent then child, so a child never waits for its parent's lock.
    transaction.on_commit(lambda: tell_parents(step_ids, now=now), robust=True)


def tell_parents(step_ids: list[int], *, now: datetime) -> None:
    """Tell each parent step that its child ended (see engine/children.py). Each is its
    own transaction; one that fails is logged and left to the sweep's next look."""
    child_ended = moves.engine().child_ended
    for step_id in step_ids:
        try:
            child_ended(step_id=step_id, now=now)
        except Exception:
            logger.exception("child.parent_not_told", extra={"parent_step_id": step_id})


def steps_of(run: WorkflowRun, work: UnitOfWork) -> QuerySet[StepRun]:
    """The run's steps as the database has them once pending writes are flushed."""
    work.flush()
    return run.steps.all()


def new_step(
    work: UnitOfWork,
    run: WorkflowRun,
    node: str,
    state: StepState,
    now: datetime,
    *,
    round: int,
    kind: StepKind = StepKind.FORWARD,
    due_at: datetime | None = None,
    result: Any = None,
    lease: timedelta | None = None,
    item: int | None = None,
    item_value: Any = None,
) -> StepRun:
    """Create a step of `node` in `state`, written at the next flush."""
    step = new_row(
        StepRun,
        run=run,
        node=node,
        kind=kind,
        round=round,
        item=item,
        item_value=item_value,
        state=state,
        scheduled_at=now,
        due_at=due_at,
        lease=lease,
        result=result,
        finished_at=now if state == StepState.SUCCEEDED else None,
    )
    work.insert(step)
    return step


def redispatch_at(node: Activity | Map, now: datetime) -> datetime:
    """When a scheduled step no worker took is sent again: BATON_REDISPATCH_AFTER from
    now, or at its schedule-to-start timeout if that comes first."""
    due = now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER)
    if node.timeouts.schedule_to_start is not None:
        due = min(due, now + node.timeouts.schedule_to_start)
    return due


def settle(run: WorkflowRun, work: UnitOfWork) -> None:
    """Mark a forward-moving run as running or waiting, by whether a worker has work."""
    if run.state not in (RunState.RUNNING, RunState.WAITING):
        return
    busy = (
        run.pk in work.busy_runs
        or steps_of(run, work).filter(state__in=ACTIVE_STEP_STATES).exists()
    )
    if busy and run.state == RunState.WAITING:
        run.wake()
    elif not busy and run.state == RunState.RUNNING:
        run.wait()


CANCELLABLE_STEP_STATES = (StepState.SCHEDULED, StepState.RETRY_WAIT, StepState.WAITING)
# A compensation not yet over: an activity's, or a child run's being compensated.
UNDO_IN_FLIGHT = Q(kind=StepKind.COMPENSATION, state__in=LIVE_STEP_STATES)


def undo_in_flight(run: WorkflowRun, work: UnitOfWork) -> bool:
    """Whether some step of the run is still being undone (a run moving forward undoes the
    branches that lost a join's race, and may not end before that is over)."""
    return steps_of(run, work).filter(UNDO_IN_FLIGHT).exists()


def queues_of(steps: list[StepRun]) -> dict[int, str]:
    """The queue of each step whose activity names one (`Activity(queue=...)`); a step
    not named goes to Baton's steps queue. A compensation goes where its activity does."""
    routes = {}
    for step in steps:
        try:
            node = definition_of(step.run).node(step.node)
        except (registry.UnknownWorkflow, KeyError):
            continue  # its claim fails it, wherever it is sent
        queue = getattr(node, "queue", None)
        if queue:
            routes[step.pk] = queue
    return routes


def send_on_commit(
    step_ids: list[int],
    traces: dict[str, dict[str, str]],
    routes: dict[int, str] | None = None,
) -> None:
    """Send the steps once the transaction commits (`traces` and `routes` as `send_steps`
    takes them)."""
    # Robust: a broker that is down must not fail a committed use case; the
    # sweep re-sends every step whose message never arrived.
    options: dict[str, Any] = {}
    if traces:
        options["traces"] = traces
    if routes:
        options["routes"] = routes
    transaction.on_commit(lambda: send_steps(step_ids, **options), robust=True)


def send_steps(
    step_ids: list[int],
    *,
    traces: dict[str, dict[str, str]] | None = None,
    routes: dict[int, str] | None = None,
) -> None:
    """Hand steps to workers: one message a step, or a few steps a message for a batch.

    A sweep firing thousands of timers would spend most of its time publishing
    messages, so past `_STEPS_SENT_ONE_BY_ONE` it sends `_STEPS_PER_MESSAGE` ids a
    message (still spread over every worker). A message is a hint either way: a
    step already done is refused at its claim, and a lost one is re-sent by the sweep.
    `traces` are the steps' run contexts (see `workflows.tracing`), carried in a header;
    `routes` the queue of each step that has one (see `queues_of`), the others going to
    the default queue.
    """
    by_queue: dict[str | None, list[int]] = {}
    for step_id in step_ids:
        by_queue.setdefault((routes or {}).get(step_id), []).append(step_id)
    # One producer for the whole batch, not one acquired per message.
    with publish.producer() as producer:
        for queue, ids in by_queue.items():
            _send_to_queue(ids, queue=queue, traces=traces, producer=producer)


def _send_to_queue(
    step_ids: list[int],
    *,
    queue: str | None,
    traces: dict[str, dict[str, str]] | None,
    producer: Any,
) -> None:
    send = current_app._get_current_object().amqp.send_task_message
    if len(step_ids) <= STEPS_SENT_ONE_BY_ONE:
        destination = publish.destination(EXECUTE_STEP_TASK, queue, producer)
        for step_id in step_ids:
            headers = tracing.message_headers(traces, [step_id]) if traces else None
            message = publish.message(EXECUTE_STEP_TASK, [step_id])
            send(producer, EXECUTE_STEP_TASK, message, headers=headers, **destination)
        return
    destination = publish.destination(EXECUTE_STEPS_TASK, queue, producer)
    for start in range(0, len(step_ids), STEPS_PER_MESSAGE):
        chunk = step_ids[start : start + STEPS_PER_MESSAGE]
        headers = tracing.message_headers(traces, chunk) if traces else None
        message = publish.message(EXECUTE_STEPS_TASK, [chunk])
        send(producer, EXECUTE_STEPS_TASK, message, headers=headers, **destination)


STEPS_SENT_ONE_BY_ONE = 50
STEPS_PER_MESSAGE = 20


def definition_of(run: WorkflowRun) -> Workflow:
    return registry.get(run.workflow_type, run.workflow_version)


def lock_run(run_id: uuid.UUID | str) -> WorkflowRun:
    try:
        return WorkflowRun.objects.select_for_update().get(pk=run_id)
    except (WorkflowRun.DoesNotExist, ValueError, TypeError):
        raise RunNotFound(f"No workflow run {run_id}.") from None


def tell_hooks_runs_started(started: list[WorkflowRun], *, now: datetime) -> None:
    """Tell the run-start hooks (see registry.register_run_start_hook) that runs started."""
    for hook in registry.run_start_hooks():
        hook(started=started, now=now)


def log_event(
    *,
    run: WorkflowRun,
    step: StepRun | None,
    kind: EventKind,
    detail: dict[str, Any],
    level: int = logging.INFO,
) -> None:
    """Log a line of the run's timeline (`UnitOfWork.event` writes the line itself)."""
    if logger.isEnabledFor(level):
        message = f"step.{kind}" if step else f"run.{kind}"
        logger.log(level, message, extra=log_fields(run, step, detail))


def log_fields(
    run: WorkflowRun, step: StepRun | None = None, detail: dict[str, Any] | None = None
) -> dict[str, Any]:
    fields = {
        "run_id": str(run.id),
        "workflow": run.workflow_type,
        "correlation_id": run.correlation_id,
        **{f"detail_{key}": value for key, value in (detail or {}).items()},
    }
    if step is not None:
        fields.update(node=step.node, attempt=step.attempt, step_kind=step.kind)
    return fields
