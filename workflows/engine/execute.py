"""Executing a step: claim it, run its activity outside any transaction, record the outcome."""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import traceback
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from workflows import metrics, personal, queues, registry, tracing
from workflows.activity import ActivityCancelled, ActivityContext, LeaseLost
from workflows.dsl import Activity, Workflow
from workflows.engine import advance, functions, limits, prepared, start, straight, undo
from workflows.engine.nodes import activity
from workflows.engine.nodes import map as map_node
from workflows.engine.work import (
    CANCELLABLE_STEP_STATES,
    CLAIMABLE_FORWARD_RUN_STATES,
    LIVE_FORWARD_RUN_STATES,
    UNDO_CLAIMABLE_RUN_STATES,
    UNDOING_RUN_STATES,
    Claim,
    UnitOfWork,
    definition_of,
    log_fields,
    redispatch_at,
    send_on_commit,
    settle,
    steps_of,
    tell_parents_on_commit,
    write_after_hooks,
)
from workflows.models import StepRun, WorkflowRun, new_row, step_key
from workflows.retries import is_final_error, next_attempt_at
from workflows.states import EventKind, RunState, StepKind, StepState

logger = logging.getLogger("baton.engine")


@dataclass(frozen=True)
class Outcome:
    result: Any = None
    error: dict[str, Any] | None = None
    final: bool = False
    cancelled: bool = False
    # The error's traceback, kept on the step for operators (never in `error`).
    traceback: str = ""


def execute_step(*, step_id: int, now: datetime | None = None) -> None:
    """Run step `step_id` if it still needs running, then the steps that follow it here.

    Two commits per step: the claim (one statement), and the record of its
    outcome. A local step that follows is claimed inside that record, so it costs
    one commit; so is a remote one, up to BATON_EAGER_STEPS in a row (eager
    dispatch: no broker round trip, no claim of its own). `now` (for a test's
    clock) stands for the time of the claim and of each record; workers leave it
    out and read the clock at each.
    """
    _run_claimed(claim_step(step_id, now=now), eager_left=settings.BATON_EAGER_STEPS, now=now)


@tracing.traced_start
def start_workflow_here(
    *,
    workflow_type: str,
    input: Any,
    idempotency_key: str | None = None,
    correlation_id: str = "",
    started_by: Any = None,
    now: datetime | None = None,
) -> tuple[WorkflowRun, bool]:
    """Start a run as `start_workflow` does, and run its first steps in this process.

    For a process that is a worker (an activity, a script or a test that starts a run and
    wants it done): the run's first step is claimed in the start's own write, as eager
    dispatch claims the step after a recorded one, and run here, then the local steps
    that follow and, with BATON_EAGER_STEPS, the remote ones, as `execute_step` runs
    them. So a local first step costs no claim of its own, and no broker round trip
    (DBOS runs a workflow in the process that starts it, Temporal's eager workflow start
    hands its first task to the starter). The claim holds a lease like any other: if this
    process dies, the sweep takes the step back once the lease expires and counts the
    attempt, as for a worker that died. Inside a transaction, where no activity may run,
    the run is started as `start_workflow` starts it, for a worker.
    """
    if connection.in_atomic_block:
        return start.start_workflow(
            workflow_type=workflow_type,
            input=input,
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            started_by=started_by,
            now=now,
        )
    run, created, claim = start.start_claiming(
        workflow_type=workflow_type,
        input=input,
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        started_by=started_by,
        now=now,
        parent_step=None,
        here=True,
    )
    eager_left = settings.BATON_EAGER_STEPS
    if claim is not None and not claim.local:
        eager_left -= 1
    _run_claimed(claim, eager_left=eager_left, now=now)
    return run, created


def _run_claimed(claim: Claim | None, *, eager_left: int, now: datetime | None) -> None:
    """Run the claimed step, record it, and go on with the step its record claimed, if any."""
    while claim is not None:
        outcome = run_activity(claim)
        # A worker of another queue (`Activity(queue=...)`) runs only that queue's steps.
        eager = eager_left > 0 and _on_default_queue(claim)
        claim = record_outcome(claim, outcome, now=now or timezone.now(), eager=eager)
        if claim is not None and not claim.local:
            eager_left -= 1


def _on_default_queue(claim: Claim) -> bool:
    try:
        node = definition_of(claim.step.run).node(claim.step.node)
    except Exception:
        return False
    return getattr(node, "queue", None) is None


def claim_step(step_id: int, *, now: datetime | None) -> Claim | None:
    """Take the step for this attempt, or return None if it needs nothing from us.

    On PostgreSQL one statement outside any transaction (`_CLAIM`), committed
    without waiting for its flush to disk (`_ASYNC_COMMIT`); elsewhere, or for a
    step the statement cannot take, the ORM's two-statement transaction
    (`_claim_with_orm`), which also says why a claim was refused. Its STARTED
    event is written with the attempt's outcome, as Temporal writes
    ActivityTaskStarted, or by the sweep if the attempt is lost. `now` None reads the
    clock (a limited step's claim reads it once its limiter is locked, so its start
    is never earlier than the end of the attempt whose slot it takes).
    """
    if connection.vendor == "postgresql":
        claim = _claim_in_one_statement(step_id, now=now or timezone.now())
        if claim is not None:
            return claim
    return _claim_with_orm(step_id, now=now)


# `StepRun.start` as one conditional UPDATE. The CTE locks the step's run against
# the engine's writers as `_claim_with_orm` does (NO KEY UPDATE, so claims of
# sibling steps only queue behind each other) and reads the run's state after the
# lock, so a cancel that committed meanwhile is seen. A step with no stored lease
# (written before leases were stored on steps) is left to `_claim_with_orm`.
_CLAIM_TEMPLATE = """
WITH run AS (
    SELECT id, state, workflow_type, workflow_version, input, correlation_id,
        started_by_id, parent_step_id
    FROM {runs}
    WHERE id = (SELECT run_id FROM {steps} WHERE id = %(step_id)s)
    FOR NO KEY UPDATE
)
UPDATE {steps} AS step
SET state = '{running}', attempt = step.attempt + 1, lease_token = %(token)s,
    started_at = %(now)s, heartbeat_at = NULL, due_at = %(now)s + step.lease,
    lease_holder = %(holder)s
FROM run
WHERE step.id = %(step_id)s AND step.run_id = run.id
  AND step.state = '{scheduled}' AND step.lease IS NOT NULL
  AND (step.kind <> '{forward}' OR run.workflow_type || ':' || step.node <> ALL(%(limited)s))
  AND CASE WHEN step.kind = '{forward}' THEN run.state IN ({moving})
      ELSE run.state IN ({undoing}) END
RETURNING step.node, step.kind, step.round, step.attempt, step.item, step.item_value,
    run.id, run.workflow_type, run.workflow_version, run.input, run.correlation_id,
    run.started_by_id, run.parent_step_id
"""
# A forward step of a limited activity (`limited`: their keys, see engine/limits.py) is
# left to `_claim_with_orm`, which counts it against its limits in the same transaction.
# Table names and state constants only; every value is bound.
_CLAIM = _CLAIM_TEMPLATE.format(
    runs=WorkflowRun._meta.db_table,
    steps=StepRun._meta.db_table,
    running=StepState.RUNNING,
    scheduled=StepState.SCHEDULED,
    forward=StepKind.FORWARD,
    moving=", ".join(f"'{state}'" for state in CLAIMABLE_FORWARD_RUN_STATES),
    undoing=", ".join(f"'{state}'" for state in UNDO_CLAIMABLE_RUN_STATES),
)


# A claim need not wait for the disk. Losing it in a database crash loses only the
# attempt: the step is scheduled again, so the record of this attempt is refused
# by its lease fence and the sweep sends the step again, as after a worker's crash
# (at least once, as every step already is). And the record, which does wait, flushes
# the claim's WAL before its own, so a recorded outcome never outlives its claim.
# The write's flush wait is a third of a step's time on this kind of machine.
# SET LOCAL holds for the implicit transaction of the one query that carries both
# statements; inside a caller's transaction it would weaken the caller's commit,
# so there the claim commits as the caller does.
_ASYNC_COMMIT = "SET LOCAL synchronous_commit TO OFF;\n"


# The claim as a function (workflows/engine/functions.py): the same statement, planned once
# per server connection; `alone` says whether it runs in a transaction of its own, whose
# commit then need not wait for the disk (set_config(..., true) is SET LOCAL).
_CLAIM_ARGUMENTS = ("step_id", "token", "now", "holder", "limited", "alone")


@functools.cache
def claim_function() -> functions.Function:
    """`_CLAIM` as a PostgreSQL function, `alone` its last argument."""
    body = _CLAIM.strip()
    for position, name in enumerate(_CLAIM_ARGUMENTS, 1):
        body = body.replace(f"%({name})s", f"${position}")
    if "%(" in body:
        raise RuntimeError("The claim names a value its function does not take.")
    step, run = StepRun, WorkflowRun
    returned = [
        (step, "node"),
        (step, "kind"),
        (step, "round"),
        (step, "attempt"),
        (step, "item"),
        (step, "item_value"),
        (run, "id"),
        (run, "workflow_type"),
        (run, "workflow_version"),
        (run, "input"),
        (run, "correlation_id"),
        (run, "started_by"),
        (run, "parent_step"),
    ]
    return functions.Function(
        prefix="baton_claim_step",
        arguments=(
            functions.column_type(step, "id"),
            functions.column_type(step, "lease_token"),
            functions.column_type(step, "started_at"),
            functions.column_type(step, "lease_holder"),
            "text[]",
            "boolean",
        ),
        returns=", ".join(
            f"o_{model._meta.model_name}_{name} {functions.column_type(model, name)}"
            for model, name in returned
        ),
        prelude=(
            f"IF ${len(_CLAIM_ARGUMENTS)} THEN "
            "PERFORM set_config('synchronous_commit', 'off', true); END IF;\n"
        ),
        body=body,
    )


def _claim_in_one_statement(step_id: int, *, now: datetime) -> Claim | None:
    # The default connection itself, looked up once (see `start._start_in_one_statement`).
    connection = connections[DEFAULT_DB_ALIAS]
    token = uuid.uuid4()
    alone = not connection.in_atomic_block
    values = {
        "step_id": step_id,
        "token": token,
        "now": now,
        "holder": worker_name(),
        "limited": limits.limited_keys(),
        "alone": alone,
    }
    with functions.cursor(connection) as cursor:
        if functions.used(connection):
            cursor.execute(claim_function().call_sql, [values[name] for name in _CLAIM_ARGUMENTS])
        else:
            cursor.execute(_ASYNC_COMMIT + _CLAIM if alone else _CLAIM, values)
            if alone:
                cursor.nextset()
        row = cursor.fetchone()
    if row is None:
        return None
    (node_name, kind, round, attempt, item, item_value) = row[:6]
    run_id, workflow_type, version, data, correlation_id, started_by_id, parent_step_id = row[6:]
    # What the run's last step needs to end it on the straight path (`_record_end`): who
    # to tell and which parent step waits for it.
    run = new_row(
        WorkflowRun,
        id=run_id,
        workflow_type=workflow_type,
        workflow_version=version,
        input=json.loads(data) if isinstance(data, str) else data,
        correlation_id=correlation_id,
        started_by_id=started_by_id,
        parent_step_id=parent_step_id,
    )
    step = new_row(
        StepRun,
        id=step_id,
        run=run,
        node=node_name,
        kind=kind,
        round=round,
        attempt=attempt,
        item=item,
        item_value=json.loads(item_value) if isinstance(item_value, str) else item_value,
    )
    try:
        node = definition_of(run).activity(node_name)
    except Exception:
        _release(step_id, token=token, now=now)
        raise
    return _attempt(run, step, node, token=token, now=now)


def _release(step_id: int, *, token: uuid.UUID, now: datetime) -> None:
    """Put back a step this worker claimed but cannot run (its definition's version is not
    deployed here yet, say): the claim has committed, so undo it as the ORM path's rollback
    would, and let the sweep send it again, rather than leave it to a lease that expires as
    a lost attempt."""
    StepRun.objects.filter(pk=step_id, state=StepState.RUNNING, lease_token=token).update(
        state=StepState.SCHEDULED,
        attempt=F("attempt") - 1,
        lease_token=None,
        started_at=None,
        due_at=now + timedelta(seconds=settings.BATON_REDISPATCH_AFTER),
    )
    logger.warning("step.claim_released", extra={"step_id": step_id})


def _claim_with_orm(step_id: int, *, now: datetime | None) -> Claim | None:
    """Claim in a transaction of two statements: read the step and its run, then start it."""
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
            CLAIMABLE_FORWARD_RUN_STATES
            if step.kind == StepKind.FORWARD
            else UNDO_CLAIMABLE_RUN_STATES
        )
        if step.state != StepState.SCHEDULED or run.state not in allowed_run_states:
            logger.info(
                "step.claim_refused",
                extra=log_fields(run, step, {"state": step.state, "run_state": run.state}),
            )
            return None
        node = definition_of(run).activity(step.node)
        if step.kind == StepKind.FORWARD and queues.is_limited(node):
            admission = limits.admit_attempt(
                workflow_type=run.workflow_type, node=node, step_id=step.pk, now=now
            )
            now = admission.at
            if not admission.admitted:
                # Left scheduled: the sweep sends it again once its limits allow. The
                # timeline says why, the first time this attempt is held.
                StepRun.objects.filter(pk=step.pk).update(due_at=admission.retry_at)
                limits.record_held(
                    run=run,
                    step=step,
                    node=node,
                    reason=admission.reason,
                    until=admission.retry_at,
                    now=admission.at or timezone.now(),
                )
                logger.debug(
                    "step.claim_deferred",
                    extra=log_fields(run, step, {"limit": admission.reason}),
                )
                return None
        now = now or timezone.now()
        token = uuid.uuid4()
        step.start(
            token=token,
            lease_until=_lease_until(node, started_at=now, now=now),
            now=now,
            holder=worker_name(),
        )
        if step.lease is None:  # written before leases were stored: its next claim is one statement
            step.lease = node.timeouts.first_lease
        step.save_changes()
    return _attempt(run, step, node, token=token, now=now)


def claim_inline(
    run: WorkflowRun, node: Activity, round: int, now: datetime, work: UnitOfWork
) -> Claim:
    """Create a local activity's step already claimed by this worker (inside the record)."""
    step = StepRun(
        run=run, node=node.name, round=round, scheduled_at=now, lease=node.timeouts.first_lease
    )
    token = uuid.uuid4()
    step.start(
        token=token,
        lease_until=_lease_until(node, started_at=now, now=now),
        now=now,
        holder=worker_name(),
    )
    work.insert(step)  # written with the rest of the record, in its one write
    return _attempt(run, step, node, token=token, now=now)


def _attempt(
    run: WorkflowRun, step: StepRun, node: Activity, *, token: uuid.UUID, now: datetime
) -> Claim:
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
        # Personal fields as their values (a type without them: the stored dict itself).
        input=personal.reveal_fields(run.input),
        results=results,
        correlation_id=run.correlation_id,
        round=step.round,
        undoes_key=""
        if forward
        else step_key(run_id=run.id, node=step.node, round=step.round, item=step.item),
        result_to_undo=None if forward else results.of_round(step.node, step.round, step.item),
        item=step.item_value,
        item_index=step.item,
        _heartbeat=heartbeat,
    )
    return Claim(
        step=step,
        run_id=run.pk,
        token=token,
        started_at=now,
        context=context,
        function=node.run if forward else node.compensation,
        local=node.local,
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
        if StepRun.objects.filter(pk=step_id, state=StepState.CANCELLED).exists():
            # Cancelled on its own (its branch lost a join's race, or the run's deadline
            # moved it on): stop, as for a cancelled run.
            raise ActivityCancelled(f"step {step_id} was cancelled")
        raise LeaseLost(f"step {step_id} is no longer held by this attempt")
    if forward and WorkflowRun.objects.filter(pk=run_id, state=RunState.CANCELLING).exists():
        raise ActivityCancelled(f"run {run_id} was cancelled")


@tracing.traced_attempt
def run_activity(claim: Claim) -> Outcome:
    try:
        result = claim.function(claim.context)
    except ActivityCancelled:
        return Outcome(cancelled=True)
    except Exception as error:
        return Outcome(
            error=_describe(error), final=is_final_error(error), traceback=_traceback(error)
        )
    try:
        json.dumps(result)
    except (TypeError, ValueError) as error:
        # A bug in the activity, not a passing fault: retrying cannot help.
        return Outcome(error=_describe(error), final=True, traceback=_traceback(error))
    return Outcome(result=result)


def _describe(error: BaseException) -> dict[str, Any]:
    """The error as a step records it: its class's name and message, and the names of
    its own base classes (nearest first), which catch paths match (Activity.on_error)."""
    described = {"type": type(error).__name__, "message": str(error)[:2000]}
    bases = [cls.__name__ for cls in type(error).__mro__[1:] if cls not in _ROOT_ERRORS]
    if bases:
        described["bases"] = bases
    return described


_ROOT_ERRORS = (Exception, BaseException, object)


# Enough for the frames that matter: a traceback's end says where it failed.
_TRACEBACK_CHARACTERS = 8000


def _traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))[-_TRACEBACK_CHARACTERS:]


_HOSTNAME = socket.gethostname()


def worker_name() -> str:
    """This process as an operator finds it: host and process id (a pool's child has its
    own pid, read at each claim since the pool forks after import)."""
    return f"{_HOSTNAME}:{os.getpid()}"


def record_outcome(
    claim: Claim, outcome: Outcome, *, now: datetime, eager: bool = False
) -> Claim | None:
    """Record an attempt's outcome, if this attempt still holds the step's lease.

    Return the step that follows, already claimed for this worker, if any: a local
    one, or with `eager` a remote one.
    """
    if outcome.error is None and not outcome.cancelled:
        plan = straight.plan_for(definition_of(claim.step.run), claim.step)
        if plan is not None:
            # One statement, so no transaction of its own: it commits as it ends (one
            # round trip, where BEGIN and COMMIT would be two more), or joins the caller's.
            recorded = _record_straight(claim, plan, outcome.result, now=now, eager=eager)
            if recorded is not _NOT_STRAIGHT:
                return recorded  # type: ignore[return-value]
    work = UnitOfWork(inline=True, eager=eager)
    with transaction.atomic():
        step = prepared.step_with_locked_run(claim.step_id)
        if step is None:
            raise StepRun.DoesNotExist(f"No step {claim.step_id} to record an outcome for.")
        run = step.run
        if (
            step.state != StepState.RUNNING
            or step.lease_token != claim.token
            or (step.due_at is not None and step.due_at < now)
        ):
            logger.warning("step.late_result_discarded", extra=log_fields(run, step))
            work.event(run, step, EventKind.LATE_RESULT_DISCARDED, now)
            work.finish(run)
            return None
        definition = definition_of(run)
        work.event(run, step, EventKind.STARTED, claim.started_at)
        if outcome.cancelled:
            step.last_error = {"type": "ActivityCancelled", "message": "cancelled mid-flight"}
            step.may_have_applied = True
            advance.cancel_step(run, definition, step, now, work)
            undo.undo_next(run, definition, now, work)
        elif outcome.error is None:
            _step_succeeded(run, definition, step, outcome.result, now, work)
        else:
            step.last_traceback = outcome.traceback
            attempt_failed(run, definition, step, outcome.error, outcome.final, now, work)
        work.finish(run)
    return work.inline_claim


_NOT_STRAIGHT = object()


def _record_straight(
    claim: Claim, plan: straight.Plan, result: Any, *, now: datetime, eager: bool
) -> Claim | object | None:
    """Record a success whose next node is an activity in one statement (`straight`);
    return the next step if this worker claimed it, as `record_outcome` does, or
    `_NOT_STRAIGHT` (nothing written) when the step or its run is not as that needs.

    The next activity is claimed here by the rule `activity.enter` claims it by
    (`activity.claims`); the run's state, which that also asks, the statement checks.
    """
    following = plan.next
    if following is None:
        return _record_end(claim, result, now=now)
    claimed = activity.claims(following, eager=eager)
    token = uuid.uuid4() if claimed else None
    recorded = straight.record(
        plan,
        step_id=claim.step_id,
        run_id=claim.run_id,
        lease_token=claim.token,
        started_at=claim.started_at,
        result=result,
        round=claim.step.round,
        now=now,
        claim_token=token,
        due_at=_lease_until(following, started_at=now, now=now)
        if claimed
        else redispatch_at(following, now),
        holder=worker_name() if claimed else "",
    )
    if recorded is None:
        return _NOT_STRAIGHT
    run, step = claim.step.run, claim.step
    _told(run, step, claim, recorded.scheduled_at, now)
    next_id = recorded.next_step_id
    if token is None:
        send_on_commit([next_id], tracing.run_contexts([(next_id, recorded.trace_context)]))
        return None
    next_step = new_row(
        StepRun,
        id=next_id,
        run=run,
        node=following.name,
        round=step.round,
        state=StepState.RUNNING,
        attempt=1,
        lease_token=token,
        scheduled_at=now,
        started_at=now,
        lease=following.timeouts.first_lease,
    )
    return _attempt(run, next_step, following, token=token, now=now)


class _EndRefused(Exception):
    """The end's statement matched nothing: undo what the run-end hooks wrote."""


def _record_end(claim: Claim, result: Any, *, now: datetime) -> object | None:
    """Record the success of the run's last step and end the run in one statement
    (`straight.record_end`), or return `_NOT_STRAIGHT` (nothing written) as
    `_record_straight` does.

    The run-end hooks are told first, as the unit of work tells them before it writes, in
    a transaction: one that writes (a requester's notification, a webhook's delivery) keeps
    it open and the statement joins it, so both commit or neither does; one that writes
    nothing leaves nothing open, and the statement commits on its own, in one round trip.
    """
    run = claim.step.run
    ended = new_row(
        WorkflowRun,
        id=run.pk,
        workflow_type=run.workflow_type,
        workflow_version=run.workflow_version,
        input=run.input,
        correlation_id=run.correlation_id,
        started_by_id=run.started_by_id,
        parent_step_id=run.parent_step_id,
        state=RunState.SUCCEEDED,
        result=result,
        finished_at=now,
    )
    ended._state.adding = False
    values = {
        "step_id": claim.step_id,
        "run_id": claim.run_id,
        "lease_token": claim.token,
        "started_at": claim.started_at,
        "result": result,
        "now": now,
    }

    def tell() -> None:
        for hook in registry.run_end_hooks():
            hook(ended=[(ended, EventKind.COMPLETED)], now=now)

    def write() -> datetime:
        scheduled_at = straight.record_end(**values)
        if scheduled_at is None:
            raise _EndRefused
        return scheduled_at

    try:
        scheduled_at = write_after_hooks(tell=tell, write=write)
    except _EndRefused:
        return _NOT_STRAIGHT
    _told(run, claim.step, claim, scheduled_at, now, ended=ended)
    if ended.parent_step_id is not None:
        tell_parents_on_commit([ended.parent_step_id], now=now)
    return None


@dataclass(frozen=True)
class _Attempted:
    """The step an event of the straight path counts for (see `metrics.count_events`)."""

    node: str
    kind: str
    scheduled_at: datetime | None
    started_at: datetime
    last_error: None = None


@dataclass(frozen=True)
class _Told:
    """An event the straight path wrote, as `metrics` and the log read it."""

    run: WorkflowRun
    step: _Attempted | None
    kind: str
    at: datetime
    attempt: int
    detail: dict[str, Any]


def _told(
    run: WorkflowRun,
    step: StepRun,
    claim: Claim,
    scheduled_at: datetime,
    now: datetime,
    *,
    ended: WorkflowRun | None = None,
) -> None:
    """Log and count the straight path's events, as the unit of work would: the attempt's
    two, and the run's COMPLETED when the step `ended` the run."""
    attempted = _Attempted(
        node=step.node, kind=step.kind, scheduled_at=scheduled_at, started_at=claim.started_at
    )
    events = [
        _Told(run, attempted, EventKind.STARTED, claim.started_at, step.attempt, {}),
        _Told(run, attempted, EventKind.COMPLETED, now, step.attempt, {}),
    ]
    if ended is not None:
        events.append(_Told(ended, None, EventKind.COMPLETED, now, 0, {}))
    metrics.record_events(events)  # type: ignore[arg-type]
    if logger.isEnabledFor(logging.INFO):
        fields = log_fields(run, step)
        for event in events:
            if event.step is None:
                logger.info(f"run.{event.kind}", extra=log_fields(event.run))
            else:
                logger.info(f"step.{event.kind}", extra=fields)


def _step_succeeded(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    result: Any,
    now: datetime,
    work: UnitOfWork,
) -> None:
    step.succeed(result=result, now=now)
    work.save(step)
    work.event(run, step, EventKind.COMPLETED, now)
    if step.kind == StepKind.COMPENSATION:
        undo.mark_undone(run, step, work)
        work.event(run, step, EventKind.COMPENSATED, now)
        undo.undo_finished(run, definition, step, now, work)
        return
    step_succeeded_after(run, definition, step, now, work)


def step_succeeded_after(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: UnitOfWork
) -> None:
    """Go on from a forward step that succeeded: to its node's next one, or (a map's item)
    back to its map; undo it if the run began undoing meanwhile."""
    if run.state in LIVE_FORWARD_RUN_STATES:
        if step.item is not None:
            map_node.item_ended(run, definition, step, now, work, failed=False)
        else:
            node = definition.node(step.node)
            advance.continue_to(run, definition, step, node.next, now, work)  # type: ignore[attr-defined]
        settle(run, work)
    elif run.state in UNDOING_RUN_STATES:
        # It finished after the run began undoing: undo it too.
        undo.undo_next(run, definition, now, work)


def attempt_failed(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    error: dict[str, Any],
    final: bool,
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Retry with backoff while the policy allows; otherwise fail the step for good."""
    node = definition.activity(step.node)
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
    still_wanted = run.state in (LIVE_FORWARD_RUN_STATES if forward else UNDO_CLAIMABLE_RUN_STATES)
    if retry_at is not None and still_wanted:
        step.schedule_retry(error=error, retry_at=retry_at)
        work.save(step)
        work.event(run, step, EventKind.RETRY_SCHEDULED, now, detail={"retry_at": retry_at})
        return
    step_failed(run, definition, step, error, now, work)


def _caught(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    error: dict[str, Any],
    now: datetime,
    work: UnitOfWork,
) -> bool:
    """Take the failed activity's catch path for `error`, if it has one; say whether it did.

    The step stays failed (undone later only if an attempt may have applied it), and
    what the run did before stays done: the catch path undoes nothing.
    """
    node = definition.node(step.node)
    if step.kind != StepKind.FORWARD or not isinstance(node, Activity):
        return False
    target = node.catch_target(error)
    if target is None:
        return False
    work.event(run, step, EventKind.CAUGHT, now, detail={"error": error["type"], "to": target})
    advance.continue_to(run, definition, step, target, now, work)
    settle(run, work)
    return True


def step_failed(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    error: dict[str, Any],
    now: datetime,
    work: UnitOfWork,
) -> None:
    """Fail a step for good: a failed undo dead-letters the run, a failed step undoes it."""
    step.fail(error=error, now=now)
    work.save(step)
    work.event(run, step, EventKind.FAILED, now, detail=error)
    if step.kind == StepKind.COMPENSATION:
        if run.state in LIVE_FORWARD_RUN_STATES:
            # The undo of a branch that lost a join's race: the run cannot go on as if
            # that branch never ran. It fails, and waits for an operator, who finishes
            # undoing it (retry or resume the dead letter).
            _begin_compensation(run, definition, step, now, work)
        run.dead_letter(error={"node": step.node, "compensation_error": error})
        work.event(run, None, EventKind.DEAD_LETTERED, now, detail={"node": step.node, **error})
        return
    if step.item is not None and run.state in LIVE_FORWARD_RUN_STATES:
        # One item of a map: its map decides (fail fast, or finish the others first).
        map_node.item_ended(run, definition, step, now, work, failed=True)
        settle(run, work)
        return
    if run.state in LIVE_FORWARD_RUN_STATES and _caught(run, definition, step, error, now, work):
        return
    if run.state in LIVE_FORWARD_RUN_STATES:
        _begin_compensation(run, definition, step, now, work)
    undo.undo_next(run, definition, now, work)


def _begin_compensation(
    run: WorkflowRun, definition: Workflow, step: StepRun, now: datetime, work: UnitOfWork
) -> None:
    """Turn the run to undoing, `step` having failed for good: cancel what waits to start."""
    run.begin_compensation(error={"node": step.node, **(step.last_error or {})})
    work.event(run, None, EventKind.COMPENSATING, now, detail={"failed_node": step.node})
    cancellable = steps_of(run, work).filter(
        kind=StepKind.FORWARD, state__in=CANCELLABLE_STEP_STATES
    )
    for sibling in cancellable:
        advance.cancel_step(run, definition, sibling, now, work)
