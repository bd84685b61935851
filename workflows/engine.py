"""The engine: the only writer of run and step state.

Rule one: the database is the truth, the broker only carries hints. A Celery
message says "look at step 42"; the step row says whether it still needs doing.
Each use case below is one transaction that first locks the run row (lock order:
run, then its steps), checks the rows, transitions them, records events and sends
messages only on commit. A lost, duplicated or late message therefore changes
nothing that matters, and the sweep finds every step whose message was lost or
whose worker died.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from workflows import registry
from workflows.activity import ActivityCancelled, ActivityContext, LeaseLost
from workflows.compensation import FinishedStep, plan_compensation
from workflows.dsl import (
    Activity,
    Approval,
    Branch,
    Join,
    Parallel,
    Sleep,
    WaitForSignal,
    Workflow,
)
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun, save_changes
from workflows.retries import is_final_error, next_attempt_at
from workflows.states import (
    ACTIVE_STEP_STATES,
    EventKind,
    RunState,
    StepKind,
    StepState,
)

logger = logging.getLogger("baton.engine")

EXECUTE_STEP_TASK = "baton.execute_step"
EXECUTE_STEPS_TASK = "baton.execute_steps"
_LIVE_FORWARD_RUN_STATES = (RunState.RUNNING, RunState.WAITING, RunState.PAUSED)
_UNDOING_RUN_STATES = (RunState.COMPENSATING, RunState.CANCELLING)


class EngineError(Exception):
    """A request the engine refuses, with a message fit for the person who made it."""


class RunNotFound(EngineError):
    pass


class RunAlreadyEnded(EngineError):
    def __init__(self, run: WorkflowRun) -> None:
        self.state = run.state
        super().__init__(f"Run {run.id} has already ended ({run.state}).")


class IllegalRunOperation(EngineError):
    pass


# ---------------------------------------------------------------------------
# What one use case writes and sends: events in one INSERT, messages on commit
# ---------------------------------------------------------------------------


@dataclass
class _UnitOfWork:
    """What one use case writes and sends, gathered so each kind of row costs one statement.

    New steps, changed steps and runs, and the timeline's events wait here. `flush`
    writes the rows (new steps first, so everything else can refer to them): the
    engine calls it before it reads steps back (`_steps`) or hands a step to another
    app's hook, and `finish` calls it at the end, inserts every event in one
    statement and sends the steps once the transaction commits. So a sweep firing a
    batch of timers writes each kind of row once, not once per timer.

    A worker recording a step (`inline=True`) claims the first local activity that
    follows in the same transaction and runs it next, with no broker round trip and
    no second commit.
    """

    inline: bool = False
    inline_claim: _Claim | None = None
    events: list[StepEvent] = field(default_factory=list)
    new_steps: list[StepRun] = field(default_factory=list)
    changed: dict[int, WorkflowRun | StepRun] = field(default_factory=dict)
    to_send: list[StepRun] = field(default_factory=list)
    # Runs with a step sent to a worker or claimed inline in this unit of work.
    busy_runs: set[uuid.UUID] = field(default_factory=set)

    def insert(self, step: StepRun) -> None:
        self.new_steps.append(step)

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
        detail = json.loads(json.dumps(detail or {}, default=str))
        if step is not None and step.kind == StepKind.COMPENSATION:
            detail.setdefault("compensation", True)
        self.events.append(
            StepEvent(
                run=run,
                step=step,
                node=step.node if step else "",
                kind=kind,
                attempt=step.attempt if step else 0,
                at=now,
                detail=detail,
            )
        )
        logger.info(f"step.{kind}" if step else f"run.{kind}", extra=_log_fields(run, step, detail))

    def flush(self) -> None:
        if self.new_steps:
            StepRun.objects.bulk_create(self.new_steps)
            for step in self.new_steps:
                step.mark_saved()
            self.new_steps = []
        if self.changed:
            rows = [row for row in self.changed.values() if row.changed_fields()]
            self.changed = {}
            for model in (StepRun, WorkflowRun):
                save_changes(model, [row for row in rows if isinstance(row, model)])

    def finish(self, *runs: WorkflowRun) -> None:
        """Write what the use case changed; send its steps once the transaction commits."""
        for run in runs:
            self.save(run)
        self.flush()
        if self.events:
            StepEvent.objects.bulk_create(self.events)
            self.events = []
        if self.to_send:
            step_ids = [step.pk for step in self.to_send]
            self.to_send = []
            # Robust: a broker that is down must not fail a committed use case; the
            # sweep re-sends every step whose message never arrived.
            transaction.on_commit(lambda: _send(step_ids), robust=True)


def _steps(run: WorkflowRun, work: _UnitOfWork) -> QuerySet[StepRun]:
    """The run's steps as the database has them once pending writes are flushed."""
    work.flush()
    return run.steps.all()


def _send(step_ids: list[int]) -> None:
    """Hand steps to workers: one message a step, or a few steps a message for a batch.

    A sweep firing thousands of timers would spend most of its time publishing
    messages, so past `_STEPS_SENT_ONE_BY_ONE` it sends `_STEPS_PER_MESSAGE` ids a
    message (still spread over every worker). A message is a hint either way: a
    step already done is refused at its claim, and a lost one is re-sent by the sweep.
    """
    # One producer for the whole batch, not one acquired per message.
    with current_app.producer_or_acquire() as producer:
        if len(step_ids) <= _STEPS_SENT_ONE_BY_ONE:
            for step_id in step_ids:
                current_app.send_task(EXECUTE_STEP_TASK, args=[step_id], producer=producer)
            return
        for start in range(0, len(step_ids), _STEPS_PER_MESSAGE):
            chunk = step_ids[start : start + _STEPS_PER_MESSAGE]
            current_app.send_task(EXECUTE_STEPS_TASK, args=[chunk], producer=producer)


_STEPS_SENT_ONE_BY_ONE = 50
_STEPS_PER_MESSAGE = 20


# ---------------------------------------------------------------------------
# Starting runs
# ---------------------------------------------------------------------------


def start_workflow(
    *,
    workflow_type: str,
    input: Any,
    idempotency_key: str | None = None,
    correlation_id: str = "",
    started_by: Any = None,
    now: datetime | None = None,
) -> tuple[WorkflowRun, bool]:
    """Start a run of the latest version of `workflow_type` in one transaction.

    Return the run and whether it was created: a second start with the same
    idempotency key returns the first run and starts nothing. Raise
    UnknownWorkflow or InvalidInput before anything is written.
    """
    definition = registry.get(workflow_type)
    data = definition.validate_input(input)
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run = WorkflowRun(
            workflow_type=definition.name,
            workflow_version=definition.version,
            input=data,
            idempotency_key=idempotency_key or "",
            correlation_id=correlation_id,
            started_by=started_by,
        )
        runnable = _has_capacity(definition)
        if runnable:
            run.start(now=now)  # inserted as running: no second write of the row
        try:
            # Only a keyed start can collide, so only it pays for a savepoint.
            with transaction.atomic(savepoint=bool(idempotency_key)):
                run.save(force_insert=True)
        except IntegrityError:
            # A start with the same key came first: return its run, start nothing.
            return _run_for_key(workflow_type, idempotency_key), False  # type: ignore[return-value]
        work.event(run, None, EventKind.STARTED, now, detail={"version": definition.version})
        if runnable:
            _enter(run, definition, definition.start, came_from=None, now=now, work=work)
            _settle(run, work)
        work.finish(run)
    return run, True


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
        state__in=[*_LIVE_FORWARD_RUN_STATES, *_UNDOING_RUN_STATES],
    ).count()
    return live < definition.concurrency_limit


def _begin(run: WorkflowRun, definition: Workflow, *, now: datetime, work: _UnitOfWork) -> None:
    run.start(now=now)
    _enter(run, definition, definition.start, came_from=None, now=now, work=work)
    _settle(run, work)


def start_pending_runs(*, now: datetime, limit: int) -> int:
    """Start runs that waited in `pending` for their type's concurrency limit to free up."""
    started = 0
    for definition in registry.all_definitions():
        if definition.concurrency_limit is None:
            continue
        while started < limit:
            work = _UnitOfWork()
            with transaction.atomic():
                run = (
                    WorkflowRun.objects.select_for_update(skip_locked=True)
                    .filter(workflow_type=definition.name, state=RunState.PENDING)
                    .order_by("created_at")
                    .first()
                )
                if run is None or not _has_capacity(definition):
                    break
                _begin(run, _definition_of(run), now=now, work=work)
                work.finish(run)
            started += 1
    return started


# ---------------------------------------------------------------------------
# Moving through the graph (always inside a transaction holding the run lock)
# ---------------------------------------------------------------------------


def _definition_of(run: WorkflowRun) -> Workflow:
    return registry.get(run.workflow_type, run.workflow_version)


def _enter(
    run: WorkflowRun,
    definition: Workflow,
    node_name: str,
    *,
    came_from: StepRun | None,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    """Create the step for `node_name` and do what its kind does on entry."""
    node = definition.node(node_name)
    join = definition.join_of.get(node_name)
    if join is not None and _join_closed(run, join, work):
        return  # This branch lost to an `any` or N-of-M join that already went on.

    if isinstance(node, Activity):
        if node.local and work.inline and work.inline_claim is None:
            work.inline_claim = _claim_inline(run, node, now, work)
            work.busy_runs.add(run.pk)
        else:
            due_at = _redispatch_at(node, now)
            work.send(_new_step(work, run, node_name, StepState.SCHEDULED, now, due_at=due_at))
    elif isinstance(node, Branch):
        work.flush()  # the condition reads earlier results
        took = bool(node.condition(run.data))
        step = _new_step(work, run, node_name, StepState.SUCCEEDED, now, result={"took": took})
        _continue(run, definition, step, node.if_true if took else node.if_false, now, work)
    elif isinstance(node, Parallel):
        step = _new_step(work, run, node_name, StepState.SUCCEEDED, now, result=None)
        for branch in node.branches:
            _enter(run, definition, branch, came_from=step, now=now, work=work)
    elif isinstance(node, Join):
        _arrive_at_join(run, definition, node, came_from, now, work)
    elif isinstance(node, Sleep):
        _new_step(work, run, node_name, StepState.WAITING, now, due_at=now + node.duration)
    elif isinstance(node, WaitForSignal):
        due_at = now + node.timeout if node.timeout is not None else None
        step = _new_step(work, run, node_name, StepState.WAITING, now, due_at=due_at)
        work.event(run, step, EventKind.WAITING, now, detail={"signals": sorted(node.signals)})
        enter = registry.node_hooks(node).enter
        if enter is not None:
            work.flush()
            enter(run, step, node)
        early = (
            run.signals.filter(name__in=list(node.signals), consumed_by__isnull=True)
            .order_by("received_at", "id")
            .first()
        )
        if early is not None:
            _consume_signal(run, definition, step, node, early, now, work)
    else:  # pragma: no cover - the static check knows every kind
        raise TypeError(f"unknown node kind {type(node).__name__}")


def _continue(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    next_node: str | None,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    """Go on from a finished step to `next_node`, or end the run if there is none."""
    if next_node is not None:
        _enter(run, definition, next_node, came_from=step, now=now, work=work)
    elif run.state in _LIVE_FORWARD_RUN_STATES:
        run.succeed(result=step.result, now=now)
        work.event(run, None, EventKind.COMPLETED, now)


def _arrive_at_join(
    run: WorkflowRun,
    definition: Workflow,
    join: Join,
    came_from: StepRun | None,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    work.flush()
    step, _ = StepRun.objects.get_or_create(
        run=run,
        node=join.name,
        kind=StepKind.FORWARD,
        defaults={"state": StepState.WAITING, "scheduled_at": now, "result": {"arrived": []}},
    )
    if step.state != StepState.WAITING:
        return
    arrived = [*step.result["arrived"], came_from.node if came_from else None]
    step.result = {"arrived": arrived}
    if len(arrived) < join.required(definition.branch_count[join.name]):
        work.save(step)
        return
    step.succeed(result={"arrived": arrived}, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now, detail={"arrived": arrived})
    # Branches that lost the race stop here; a running one loses its lease, so its
    # heartbeat tells it to stop and its result, or failure, is discarded.
    region = [name for name, closer in definition.join_of.items() if closer == join.name]
    for straggler in _steps(run, work).filter(
        node__in=region,
        kind=StepKind.FORWARD,
        state__in=[*_CANCELLABLE_STEP_STATES, StepState.RUNNING],
    ):
        _cancel_step(run, definition, straggler, now, work)
    _continue(run, definition, step, join.next, now, work)


def _join_closed(run: WorkflowRun, join: str, work: _UnitOfWork) -> bool:
    closed = _steps(run, work).filter(node=join, kind=StepKind.FORWARD, state=StepState.SUCCEEDED)
    return closed.exists()


def _new_step(
    work: _UnitOfWork,
    run: WorkflowRun,
    node: str,
    state: StepState,
    now: datetime,
    *,
    kind: StepKind = StepKind.FORWARD,
    due_at: datetime | None = None,
    result: Any = None,
) -> StepRun:
    step = StepRun(
        run=run,
        node=node,
        kind=kind,
        state=state,
        scheduled_at=now,
        due_at=due_at,
        result=result,
        finished_at=now if state == StepState.SUCCEEDED else None,
    )
    work.insert(step)
    return step


def _redispatch_at(node: Activity, now: datetime) -> datetime:
    due = now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER)
    if node.timeouts.schedule_to_start is not None:
        due = min(due, now + node.timeouts.schedule_to_start)
    return due


def _settle(run: WorkflowRun, work: _UnitOfWork) -> None:
    """Mark a forward-moving run as running or waiting, by whether a worker has work."""
    if run.state not in (RunState.RUNNING, RunState.WAITING):
        return
    busy = (
        run.pk in work.busy_runs or _steps(run, work).filter(state__in=ACTIVE_STEP_STATES).exists()
    )
    if busy and run.state == RunState.WAITING:
        run.wake()
    elif not busy and run.state == RunState.RUNNING:
        run.wait()


# ---------------------------------------------------------------------------
# Executing a step (called by the Celery task)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Claim:
    """One attempt a worker holds: the step, its fencing token and what the activity gets."""

    step_id: int
    run_id: uuid.UUID
    token: uuid.UUID
    started_at: datetime
    context: ActivityContext
    function: Any


@dataclass(frozen=True)
class _Outcome:
    result: Any = None
    error: dict[str, Any] | None = None
    final: bool = False
    cancelled: bool = False


def execute_step(*, step_id: int) -> None:
    """Run step `step_id` if it still needs running, then the local steps that follow it.

    Two commits per step: the claim, and the record of its outcome. A local step
    that follows is claimed inside that record, so it costs one commit.
    """
    claim = _claim(step_id, now=timezone.now())
    while claim is not None:
        outcome = _run_activity(claim)
        claim = _record(claim, outcome, now=timezone.now())


def _claim(step_id: int, *, now: datetime) -> _Claim | None:
    """Take the step for this attempt, or return None if it needs nothing from us.

    One short transaction of two statements: read the step with its run, locking
    the run row against the engine's writers (NO KEY UPDATE, so claims of sibling
    steps only queue behind each other), then the `start` transition's
    conditional UPDATE. Its STARTED event is written with the attempt's outcome,
    as Temporal writes ActivityTaskStarted, or by the sweep if the attempt is lost.
    """
    with transaction.atomic():
        step = (
            StepRun.objects.select_related("run")
            .select_for_update(of=("run",), no_key=True)
            .filter(pk=step_id)
            .first()
        )
        if step is None:
            logger.warning("step.unknown", extra={"step_id": step_id})
            return None
        run = step.run
        allowed_run_states = (
            (RunState.RUNNING, RunState.WAITING)
            if step.kind == StepKind.FORWARD
            else _UNDOING_RUN_STATES
        )
        if step.state != StepState.SCHEDULED or run.state not in allowed_run_states:
            logger.info(
                "step.claim_refused",
                extra=_log_fields(run, step, {"state": step.state, "run_state": run.state}),
            )
            return None
        node = _definition_of(run).node(step.node)
        assert isinstance(node, Activity)
        token = uuid.uuid4()
        step.start(token=token, lease_until=_lease_until(node, started_at=now, now=now), now=now)
        step.save_changes()
    return _attempt(run, step, node, token=token, now=now)


def _claim_inline(run: WorkflowRun, node: Activity, now: datetime, work: _UnitOfWork) -> _Claim:
    """Create a local activity's step already claimed by this worker (inside the record)."""
    step = StepRun(run=run, node=node.name, scheduled_at=now)
    token = uuid.uuid4()
    step.start(token=token, lease_until=_lease_until(node, started_at=now, now=now), now=now)
    work.insert(step)
    work.flush()  # the claim names the step by its id
    return _attempt(run, step, node, token=token, now=now)


def _attempt(
    run: WorkflowRun, step: StepRun, node: Activity, *, token: uuid.UUID, now: datetime
) -> _Claim:
    forward = step.kind == StepKind.FORWARD
    results = run.results

    def heartbeat() -> None:
        _heartbeat(
            step_id=step.pk, run_id=run.pk, token=token, node=node, started_at=now, forward=forward
        )

    context = ActivityContext(
        run_id=str(run.id),
        node=step.node,
        attempt=step.attempt,
        idempotency_key=step.idempotency_key,
        input=run.input,
        results=results,
        correlation_id=run.correlation_id,
        undoes_key="" if forward else f"{run.id}:{step.node}",
        result_to_undo=None if forward else results.get(step.node),
        _heartbeat=heartbeat,
    )
    return _Claim(
        step_id=step.pk,
        run_id=run.pk,
        token=token,
        started_at=now,
        context=context,
        function=node.run if forward else node.compensation,
    )


def _lease_until(node: Activity, *, started_at: datetime, now: datetime) -> datetime:
    deadline = started_at + node.timeouts.start_to_close
    if node.timeouts.heartbeat is not None:
        return min(deadline, now + node.timeouts.heartbeat)
    return deadline


def _heartbeat(
    *,
    step_id: int,
    run_id: uuid.UUID,
    token: uuid.UUID,
    node: Activity,
    started_at: datetime,
    forward: bool,
) -> None:
    """Extend this attempt's lease; tell the activity if it lost it or the run was cancelled.

    Not a state transition: a conditional UPDATE of the lease, fenced by the token.
    """
    now = timezone.now()
    extended = StepRun.objects.filter(
        pk=step_id, state=StepState.RUNNING, lease_token=token
    ).update(due_at=_lease_until(node, started_at=started_at, now=now), heartbeat_at=now)
    if not extended:
        raise LeaseLost(f"step {step_id} is no longer held by this attempt")
    if forward and WorkflowRun.objects.filter(pk=run_id, state=RunState.CANCELLING).exists():
        raise ActivityCancelled(f"run {run_id} was cancelled")


def _run_activity(claim: _Claim) -> _Outcome:
    try:
        result = claim.function(claim.context)
    except ActivityCancelled:
        return _Outcome(cancelled=True)
    except Exception as error:
        return _Outcome(error=_describe(error), final=is_final_error(error))
    try:
        json.dumps(result)
    except (TypeError, ValueError) as error:
        # A bug in the activity, not a passing fault: retrying cannot help.
        return _Outcome(error=_describe(error), final=True)
    return _Outcome(result=result)


def _describe(error: BaseException) -> dict[str, Any]:
    return {"type": type(error).__name__, "message": str(error)[:2000]}


def _record(claim: _Claim, outcome: _Outcome, *, now: datetime) -> _Claim | None:
    """Record an attempt's outcome, if this attempt still holds the step's lease.

    Return the local step that follows, already claimed for this worker, if any.
    """
    work = _UnitOfWork(inline=True)
    with transaction.atomic():
        step = (
            StepRun.objects.select_related("run")
            .select_for_update(of=("run",))
            .get(pk=claim.step_id)
        )
        run = step.run
        if (
            step.state != StepState.RUNNING
            or step.lease_token != claim.token
            or (step.due_at is not None and step.due_at < now)
        ):
            logger.warning("step.late_result_discarded", extra=_log_fields(run, step))
            work.event(run, step, EventKind.LATE_RESULT_DISCARDED, now)
            work.finish(run)
            return None
        definition = _definition_of(run)
        work.event(run, step, EventKind.STARTED, claim.started_at)
        if outcome.cancelled:
            step.last_error = {"type": "ActivityCancelled", "message": "cancelled mid-flight"}
            step.may_have_applied = True
            _cancel_step(run, definition, step, now, work)
            _undo_next(run, definition, now, work)
        elif outcome.error is None:
            _step_succeeded(run, definition, step, outcome.result, now, work)
        else:
            _attempt_failed(run, definition, step, outcome.error, outcome.final, now, work)
        work.finish(run)
    return work.inline_claim


def _step_succeeded(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    result: Any,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    step.succeed(result=result, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now)
    if step.kind == StepKind.COMPENSATION:
        _mark_undone(run, step.node, work)
        work.event(run, step, EventKind.COMPENSATED, now)
        _undo_next(run, definition, now, work)
        return
    if run.state in _LIVE_FORWARD_RUN_STATES:
        node = definition.node(step.node)
        assert isinstance(node, Activity)
        _continue(run, definition, step, node.next, now, work)
        _settle(run, work)
    elif run.state in _UNDOING_RUN_STATES:
        # It finished after the run began undoing: undo it too.
        _undo_next(run, definition, now, work)


def _attempt_failed(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    error: dict[str, Any],
    final: bool,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    """Retry with backoff while the policy allows; otherwise fail the step for good."""
    node = definition.node(step.node)
    assert isinstance(node, Activity)
    forward = step.kind == StepKind.FORWARD
    policy = node.retry if forward else node.compensation_retry
    error = {**error, "attempt": step.attempt}
    work.event(run, step, EventKind.ERRORED, now, detail=error)
    retry_at = next_attempt_at(
        policy=policy,
        attempt=step.attempt,
        error_type=error["type"],
        error_is_final=final,
        now=now,
    )
    still_wanted = run.state in (_LIVE_FORWARD_RUN_STATES if forward else _UNDOING_RUN_STATES)
    if retry_at is not None and still_wanted:
        step.schedule_retry(error=error, retry_at=retry_at)
        work.save(step)
        work.event(run, step, EventKind.RETRY_SCHEDULED, now, detail={"retry_at": retry_at})
        return
    _step_failed(run, definition, step, error, now, work)


def _step_failed(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    error: dict[str, Any],
    now: datetime,
    work: _UnitOfWork,
) -> None:
    """Fail a step for good: a failed undo dead-letters the run, a failed step undoes it."""
    step.fail(error=error, now=now)
    work.save(step)
    work.event(run, step, EventKind.FAILED, now, detail=error)
    if step.kind == StepKind.COMPENSATION:
        run.dead_letter(error={"node": step.node, "compensation_error": error})
        work.event(run, None, EventKind.DEAD_LETTERED, now, detail={"node": step.node, **error})
        return
    if run.state in _LIVE_FORWARD_RUN_STATES:
        run.begin_compensation(error={"node": step.node, **error})
        work.event(run, None, EventKind.COMPENSATING, now, detail={"failed_node": step.node})
        cancellable = _steps(run, work).filter(
            kind=StepKind.FORWARD, state__in=_CANCELLABLE_STEP_STATES
        )
        for sibling in cancellable:
            _cancel_step(run, definition, sibling, now, work)
    _undo_next(run, definition, now, work)


_CANCELLABLE_STEP_STATES = (StepState.SCHEDULED, StepState.RETRY_WAIT, StepState.WAITING)


def _cancel_step(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: _UnitOfWork
) -> None:
    step.cancel(now=now)
    work.save(step)
    work.event(run, step, EventKind.CANCELLED, now)
    _leave(run, definition, step, work)


def _leave(run: WorkflowRun, definition: Workflow, step: StepRun, work: _UnitOfWork) -> None:
    """Tell the node kind's hook that a waiting step is over (e.g. close its human tasks)."""
    node = definition.node(step.node)
    leave = registry.node_hooks(node).leave
    if leave is not None:
        work.flush()
        leave(run, step, node)


# ---------------------------------------------------------------------------
# Compensation: undo completed mutating steps, most recent first, one at a time
# ---------------------------------------------------------------------------


def _undo_next(run: WorkflowRun, definition: Workflow, now: datetime, work: _UnitOfWork) -> None:
    """Schedule the next compensation, or end the run once nothing is left to undo.

    Waits while a compensation is in flight or a forward step is still running
    (its outcome decides whether it needs undoing too).
    """
    if run.state not in _UNDOING_RUN_STATES:
        return
    if _steps(run, work).filter(state__in=ACTIVE_STEP_STATES).exists():
        return
    finished = _steps(run, work).filter(kind=StepKind.FORWARD, state__in=_UNDOABLE_STEP_STATES)
    plan = plan_compensation(
        workflow=definition,
        finished=[
            FinishedStep(
                node=step.node,
                finished_at=step.finished_at,
                sequence=step.pk,
                succeeded=step.state == StepState.SUCCEEDED,
                uncertain=step.may_have_applied,
            )
            for step in finished
        ],
    )
    if plan:
        compensation = _new_step(
            work,
            run,
            plan[0],
            StepState.SCHEDULED,
            now,
            kind=StepKind.COMPENSATION,
            due_at=now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER),
        )
        work.event(run, compensation, EventKind.COMPENSATING, now)
        work.send(compensation)
        return
    if run.state == RunState.CANCELLING:
        run.finish_cancel(now=now)
        work.event(run, None, EventKind.CANCELLED, now)
    elif _steps(run, work).filter(kind=StepKind.COMPENSATION).exists():
        run.finish_compensation(now=now)
        work.event(run, None, EventKind.COMPENSATED, now)
    else:
        run.fail(now=now)
        work.event(run, None, EventKind.FAILED, now, detail={"run": "failed, nothing to undo"})


_UNDOABLE_STEP_STATES = (StepState.SUCCEEDED, StepState.FAILED, StepState.CANCELLED)


def _mark_undone(run: WorkflowRun, node: str, work: _UnitOfWork) -> None:
    original = _steps(run, work).get(node=node, kind=StepKind.FORWARD)
    original.mark_compensated()
    work.save(original)


# ---------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------


def signal_run(
    *,
    run_id: uuid.UUID | str,
    name: str,
    payload: dict[str, Any] | None = None,
    signal_id: str | None = None,
    now: datetime | None = None,
    from_human_task: bool = False,
) -> tuple[Signal, bool]:
    """Deliver a durable signal; return it and whether it was new (ids are de-duplicated).

    A wait for `name` resumes at once; with no such wait yet, the signal is kept
    for the first wait that asks for it. An approval's outcome signals are
    reserved for its human tasks (`from_human_task`): nobody else may send them,
    or a run's starter could approve their own request.
    """
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run = _lock_run(run_id)
        if not from_human_task:
            _refuse_reserved_signal(_definition_of(run), name, signal_id)
        existing = run.signals.filter(signal_id=signal_id).first() if signal_id else None
        if existing is not None:
            return existing, False
        if run.is_finished or run.state == RunState.DEAD_LETTERED:
            raise RunAlreadyEnded(run)
        signal = Signal.objects.create(
            run=run,
            name=name,
            signal_id=signal_id or str(uuid.uuid4()),
            payload=payload or {},
            received_at=now,
        )
        work.event(
            run, None, EventKind.SIGNALLED, now, detail={"name": name, "id": signal.signal_id}
        )
        definition = _definition_of(run)
        for step in run.steps.filter(kind=StepKind.FORWARD, state=StepState.WAITING):
            node = definition.node(step.node)
            if isinstance(node, WaitForSignal) and name in node.signals:
                _consume_signal(run, definition, step, node, signal, now, work)
                _settle(run, work)
                break
        work.finish(run)
    return signal, True


RESERVED_SIGNAL_ID_PREFIX = "approval-"


def _refuse_reserved_signal(definition: Workflow, name: str, signal_id: str | None) -> None:
    if (signal_id or "").startswith(RESERVED_SIGNAL_ID_PREFIX):
        raise IllegalRunOperation(
            f"Signal ids starting with {RESERVED_SIGNAL_ID_PREFIX!r} are reserved for approvals."
        )
    for node in definition.nodes:
        if isinstance(node, Approval) and name in node.signals:
            raise IllegalRunOperation(
                f"{name!r} is decided by the human task of {node.name!r}, not by a signal."
            )


def _consume_signal(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: WaitForSignal,
    signal: Signal,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    work.flush()  # the signal names the step that consumed it
    signal.consumed_by = step
    signal.consumed_at = now
    signal.save(update_fields=["consumed_by", "consumed_at"])
    step.succeed(result={"signal": signal.name, "payload": signal.payload}, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now, detail={"signal": signal.name})
    _leave(run, definition, step, work)
    if run.state in _LIVE_FORWARD_RUN_STATES:
        _continue(run, definition, step, node.next_after(signal.name), now, work)


def fail_waiting_step(
    *, run_id: uuid.UUID | str, node: str, error: dict[str, Any], now: datetime | None = None
) -> WorkflowRun:
    """Fail a step that waits (e.g. an approval past its final deadline); the run is undone.

    A no-op if the step no longer waits: its signal or a cancellation came first.
    """
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run = _lock_run(run_id)
        step = run.steps.filter(node=node, kind=StepKind.FORWARD, state=StepState.WAITING).first()
        if step is None or run.state not in _LIVE_FORWARD_RUN_STATES:
            return run
        definition = _definition_of(run)
        _leave(run, definition, step, work)
        _step_failed(run, definition, step, error, now, work)
        work.finish(run)
    return run


# ---------------------------------------------------------------------------
# Operators: cancel, pause, resume, dead letters
# ---------------------------------------------------------------------------


def cancel_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Cancel a live run: nothing new starts, running activities hear it at their next
    heartbeat, completed steps are undone, and the run ends cancelled."""
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run = _lock_run(run_id)
        if run.state == RunState.CANCELLING:
            return run
        if run.is_finished or run.state in (RunState.COMPENSATING, RunState.DEAD_LETTERED):
            raise RunAlreadyEnded(run)
        definition = _definition_of(run)
        run.request_cancel(now=now)
        work.event(run, None, EventKind.CANCELLED, now, detail={"requested": True})
        for step in run.steps.filter(kind=StepKind.FORWARD, state__in=_CANCELLABLE_STEP_STATES):
            _cancel_step(run, definition, step, now, work)
        _undo_next(run, definition, now, work)
        work.finish(run)
    return run


def pause_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Start no new step until resumed; steps already running finish and are recorded."""
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run = _lock_run(run_id)
        if run.state == RunState.PAUSED:
            return run
        if run.state not in (RunState.RUNNING, RunState.WAITING):
            raise IllegalRunOperation(
                f"Only a running or waiting run can be paused; this one is {run.state}."
            )
        run.pause()
        work.event(run, None, EventKind.OPERATOR, now, detail={"action": "paused"})
        work.finish(run)
    return run


def resume_run(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Let a paused run go on, re-sending the steps it held back."""
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run = _lock_run(run_id)
        if run.state != RunState.PAUSED:
            raise IllegalRunOperation(f"Only a paused run can be resumed; this one is {run.state}.")
        run.resume()
        definition = _definition_of(run)
        for step in run.steps.filter(state=StepState.SCHEDULED):
            # The wait while paused does not count against schedule-to-start.
            step.scheduled_at = now
            step.due_at = _redispatch_at(definition.node(step.node), now)
            step.save(update_fields=["scheduled_at", "due_at"])
            work.send(step)
        _settle(run, work)
        work.event(run, None, EventKind.OPERATOR, now, detail={"action": "resumed"})
        work.finish(run)
    return run


def retry_dead_letter(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Try the failed compensation again with a fresh attempt budget."""
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run, failed = _dead_letter_and_failed_step(run_id)
        run.reopen()
        failed.retry_by_operator(
            now=now, redispatch_at=now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER)
        )
        work.save(failed)
        work.send(failed)
        work.event(run, failed, EventKind.OPERATOR, now, detail={"action": "retried"})
        work.finish(run)
    return run


def resume_dead_letter(*, run_id: uuid.UUID | str, now: datetime | None = None) -> WorkflowRun:
    """Move past the failed compensation (an operator undid it by hand) and finish undoing."""
    now = now or timezone.now()
    work = _UnitOfWork()
    with transaction.atomic():
        run, failed = _dead_letter_and_failed_step(run_id)
        run.reopen()
        failed.skip_by_operator(now=now)
        work.save(failed)
        _mark_undone(run, failed.node, work)
        work.event(run, failed, EventKind.OPERATOR, now, detail={"action": "skipped"})
        _undo_next(run, _definition_of(run), now, work)
        work.finish(run)
    return run


def _dead_letter_and_failed_step(run_id: uuid.UUID | str) -> tuple[WorkflowRun, StepRun]:
    run = _lock_run(run_id)
    if run.state != RunState.DEAD_LETTERED:
        raise IllegalRunOperation(
            f"Only a dead-lettered run can be retried or resumed; this one is {run.state}."
        )
    failed = run.steps.filter(kind=StepKind.COMPENSATION, state=StepState.FAILED).first()
    if failed is None:  # pragma: no cover - dead letters always come from a failed undo
        raise IllegalRunOperation("This run has no failed compensation to retry.")
    return run, failed


def _lock_run(run_id: uuid.UUID | str) -> WorkflowRun:
    try:
        return WorkflowRun.objects.select_for_update().get(pk=run_id)
    except (WorkflowRun.DoesNotExist, ValueError, TypeError):
        raise RunNotFound(f"No workflow run {run_id}.") from None


# ---------------------------------------------------------------------------
# The sweep: fire what is due (safe to run in several processes at once)
# ---------------------------------------------------------------------------


def sweep(*, now: datetime | None = None, batch: int | None = None) -> dict[str, int]:
    """Handle up to `batch` due steps, many runs per transaction, skipping runs others hold.

    Reads only what is due, through the partial index on `StepRun.due_at`, so its
    cost follows what is due, not how many runs exist. Two sweeps at once never
    handle the same run: each locks runs with SKIP LOCKED and re-reads their due
    steps under that lock, so every timer fires once. The runs of a batch share
    one transaction and one statement per kind of row; if handling one of them
    fails, the batch is retried one run per transaction, so that run is logged
    and left for the next sweep while the others go on.
    """
    now = now or timezone.now()
    batch = batch or settings.BATON_SWEEP_BATCH
    due_run_ids = (
        StepRun.objects.filter(
            state__in=_SWEPT_STATES, due_at__lte=now, run__state__in=_SWEPT_RUN_STATES
        )
        .order_by("due_at")
        .values_list("run_id", flat=True)[:batch]
    )
    run_ids = list(dict.fromkeys(due_run_ids))
    counts: dict[str, int] = {"steps": 0, "failed_runs": 0}
    for start in range(0, len(run_ids), _RUNS_PER_TRANSACTION):
        chunk = run_ids[start : start + _RUNS_PER_TRANSACTION]
        try:
            counts["steps"] += _sweep_runs(chunk, now)
        except Exception:
            for run_id in chunk:
                try:
                    counts["steps"] += _sweep_runs([run_id], now)
                except Exception:
                    counts["failed_runs"] += 1
                    logger.exception("sweep.run_failed", extra={"run_id": str(run_id)})
    counts["pending_started"] = start_pending_runs(now=now, limit=batch)
    for extra in registry.sweepers():
        counts[extra.__name__] = extra(now=now)
    return counts


# Large enough that a batch's writes amortise their statements, small enough that
# one transaction holds few locks for long.
_RUNS_PER_TRANSACTION = 500


def _sweep_runs(run_ids: list[uuid.UUID], now: datetime) -> int:
    work = _UnitOfWork()
    with transaction.atomic():
        runs = list(
            WorkflowRun.objects.select_for_update(skip_locked=True)
            .filter(pk__in=run_ids, state__in=_SWEPT_RUN_STATES)
            .order_by("pk")
        )
        if not runs:
            return 0  # other sweeps hold them, or they moved on
        # Locking the steps fences a concurrent heartbeat: it waits, then finds its
        # lease gone if this sweep expired it.
        due: dict[uuid.UUID, list[StepRun]] = {run.pk: [] for run in runs}
        for step in StepRun.objects.select_for_update().filter(
            run__in=runs, state__in=_SWEPT_STATES, due_at__lte=now
        ):
            due[step.run_id].append(step)
        handled = 0
        for run in runs:
            definition = _definition_of(run)
            for index, step in enumerate(due[run.pk]):
                step.run = run
                if index:
                    # Handling one step can move another (a join cancels its siblings).
                    work.flush()
                    step.refresh_from_db()
                if step.state in _SWEPT_STATES and step.due_at is not None and step.due_at <= now:
                    _handle_due_step(run, definition, step, now, work)
                    handled += 1
        work.finish(*runs)
    return handled


_SWEPT_STATES = (
    StepState.SCHEDULED,
    StepState.RUNNING,
    StepState.RETRY_WAIT,
    StepState.WAITING,
)
# A paused run's due steps wait for it to resume; ended runs have nothing due.
_SWEPT_RUN_STATES = (RunState.RUNNING, RunState.WAITING, *_UNDOING_RUN_STATES)


def _handle_due_step(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: _UnitOfWork
) -> None:
    node = definition.node(step.node)
    if step.state == StepState.SCHEDULED:
        assert isinstance(node, Activity)
        limit = node.timeouts.schedule_to_start
        forward = step.kind == StepKind.FORWARD  # an undo is re-sent, never given up
        if forward and limit is not None and now - step.scheduled_at >= limit:
            # As in Temporal, a schedule-to-start timeout is not retried: no worker
            # is taking this kind of work, and another attempt would queue the same.
            error = {"type": "ScheduleToStartTimeout", "message": f"not started within {limit}"}
            _step_failed(run, definition, step, error, now, work)
        else:
            step.due_at = _redispatch_at(node, now)
            work.save(step)
            work.event(run, step, EventKind.REDISPATCHED, now)
            work.send(step)
    elif step.state == StepState.RUNNING:
        assert isinstance(node, Activity)
        kind = "HeartbeatTimeout" if node.timeouts.heartbeat else "StartToCloseTimeout"
        error = {"type": kind, "message": "the attempt's lease expired (worker lost or stalled)"}
        step.may_have_applied = True
        # The lost attempt's STARTED event, written here since its worker never recorded it.
        work.event(run, step, EventKind.STARTED, step.started_at)
        work.event(run, step, EventKind.LEASE_EXPIRED, now, detail=error)
        _attempt_failed(run, definition, step, error, False, now, work)
    elif step.state == StepState.RETRY_WAIT:
        assert isinstance(node, Activity)
        step.reschedule(now=now, redispatch_at=_redispatch_at(node, now))
        work.save(step)
        work.send(step)
    elif isinstance(node, Sleep):
        step.succeed(result={"slept_until": now.isoformat()}, now=now)
        work.save(step)
        work.event(run, step, EventKind.COMPLETED, now)
        _continue(run, definition, step, node.next, now, work)
        _settle(run, work)
    elif isinstance(node, WaitForSignal):
        _wait_timed_out(run, definition, step, node, now, work)


def _wait_timed_out(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: WaitForSignal,
    now: datetime,
    work: _UnitOfWork,
) -> None:
    work.event(run, step, EventKind.TIMED_OUT, now)
    _leave(run, definition, step, work)
    if node.on_timeout is None:
        error = {"type": "WaitTimedOut", "message": f"no signal within {node.timeout}"}
        _step_failed(run, definition, step, error, now, work)
        return
    step.succeed(result={"signal": None, "timed_out": True}, now=now)
    work.save(step)
    _continue(run, definition, step, node.on_timeout, now, work)
    _settle(run, work)


# ---------------------------------------------------------------------------
# Structured logs
# ---------------------------------------------------------------------------


def _log_fields(
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
