"""Signals: durable, de-duplicated messages to a run, and waits that end without one."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows.dsl import HUMAN_NODES, Revise, WaitForSignal, Workflow
from workflows.engine import advance, execute
from workflows.engine.errors import IllegalRunOperation, RunAlreadyEnded
from workflows.engine.work import (
    LIVE_FORWARD_RUN_STATES,
    UnitOfWork,
    definition_of,
    lock_run,
    settle,
)
from workflows.models import Signal, StepRun, WorkflowRun
from workflows.states import EventKind, RunState, StepKind, StepState


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
    for the first wait that asks for it. The signals of approvals and revisions
    (`dsl.HUMAN_NODES`) are reserved for their human tasks (`from_human_task`):
    nobody else may send them, or a run's starter could approve their own request
    or replace its input unchecked.
    """
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if not from_human_task:
            _refuse_reserved_signal(definition_of(run), name, signal_id)
        existing = run.signals.filter(signal_id=signal_id).first() if signal_id else None
        if existing is not None:
            return existing, False
        if run.is_finished or run.state == RunState.DEAD_LETTERED:
            raise RunAlreadyEnded(run)
        signal = deliver_signal(
            run,
            definition_of(run),
            name=name,
            payload=payload or {},
            signal_id=signal_id or str(uuid.uuid4()),
            now=now,
            work=work,
        )
        work.finish(run)
    return signal, True


def deliver_signal(
    run: WorkflowRun,
    definition: Workflow,
    *,
    name: str,
    payload: dict[str, Any],
    signal_id: str,
    now: datetime,
    work: UnitOfWork,
    answer: dict[str, Any] | None = None,
) -> Signal:
    """Record a signal to a locked run and resume the wait for it, if one waits.

    An update's signal carries its `answer` (see engine.updates).
    """
    signal = Signal.objects.create(
        run=run,
        name=name,
        signal_id=signal_id,
        payload=payload,
        received_at=now,
        answer=answer,
    )
    detail: dict[str, Any] = {"name": name, "id": signal.signal_id}
    if answer is not None:
        detail["update"] = True
    work.event(run, None, EventKind.SIGNALLED, now, detail=detail)
    # A map's items waiting for a slot never wait for a signal: leave them out.
    waiting = run.steps.filter(kind=StepKind.FORWARD, state=StepState.WAITING, item=None)
    for step in waiting:
        node = definition.node(step.node)
        if isinstance(node, WaitForSignal) and name in node.signals:
            consume_signal(run, definition, step, node, signal, now, work)
            settle(run, work)
            break
    return signal


RESERVED_SIGNAL_ID_PREFIX = "approval-"


def _refuse_reserved_signal(definition: Workflow, name: str, signal_id: str | None) -> None:
    if (signal_id or "").startswith(RESERVED_SIGNAL_ID_PREFIX):
        raise IllegalRunOperation(
            f"Signal ids starting with {RESERVED_SIGNAL_ID_PREFIX!r} are reserved for approvals."
        )
    for node in definition.nodes:
        if isinstance(node, HUMAN_NODES) and name in node.signals:
            raise IllegalRunOperation(
                f"{name!r} is decided by the human task of {node.name!r}, not by a signal."
            )
    if name in definition.updates:
        # Sent as a plain signal, it would skip the update's schema and handler.
        raise IllegalRunOperation(
            f"{name!r} is an update of {definition.name!r}: send it as an update, "
            "which validates its payload and answers."
        )


def consume_signal(
    run: WorkflowRun,
    definition: Workflow,
    step: StepRun,
    node: WaitForSignal,
    signal: Signal,
    now: datetime,
    work: UnitOfWork,
) -> None:
    work.flush()  # the signal names the step that consumed it
    signal.consumed_by = step
    signal.consumed_at = now
    signal.save(update_fields=["consumed_by", "consumed_at"])
    step.succeed(result={"signal": signal.name, "payload": signal.payload}, now=now)
    work.save(step)
    if isinstance(node, Revise):
        # The requester's resubmission, validated by the approvals app: later steps read
        # the new input; the step's result keeps the previous one and the changes.
        run.input = signal.payload["input"]
        work.save(run)
    work.event(run, step, EventKind.COMPLETED, now, detail={"signal": signal.name})
    advance.leave_node(run, definition, step, work)
    if run.state in LIVE_FORWARD_RUN_STATES:
        advance.continue_to(run, definition, step, node.next_after(signal.name), now, work)


def fail_waiting_step(
    *, run_id: uuid.UUID | str, node: str, error: dict[str, Any], now: datetime | None = None
) -> WorkflowRun:
    """Fail a step that waits (e.g. an approval past its final deadline); the run is undone.

    A no-op if the step no longer waits: its signal or a cancellation came first.
    """
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        step = run.steps.filter(node=node, kind=StepKind.FORWARD, state=StepState.WAITING).first()
        if step is None or run.state not in LIVE_FORWARD_RUN_STATES:
            return run
        definition = definition_of(run)
        advance.leave_node(run, definition, step, work)
        execute.step_failed(run, definition, step, error, now, work)
        work.finish(run)
    return run
