"""Run deadlines: a run still live when its definition's deadline passes is cancelled or
moved on (`Workflow(deadline=..., on_deadline=...)`).

The run's row holds its deadline (`WorkflowRun.deadline_at`, set at its start); the
sweep reads the runs due through a partial index of the runs moving forward, so its
cost follows the deadlines due, not the runs alive. A paused run's deadline fires
once it resumes; a run already undoing has nothing left to cut short.
"""

from __future__ import annotations

from datetime import datetime

from workflows.dsl import DEADLINE_CANCELS, Workflow
from workflows.engine import advance, undo
from workflows.engine.work import UnitOfWork, settle, steps_of
from workflows.models import WorkflowRun
from workflows.states import LIVE_STEP_STATES, EventKind, RunState, StepKind, StepState

# The run states whose deadline fires (run_deadline_idx holds exactly these runs).
DEADLINE_RUN_STATES = (RunState.RUNNING, RunState.WAITING)


def fire_deadline(run: WorkflowRun, definition: Workflow, now: datetime, work: UnitOfWork) -> None:
    """Cut the run short, its row locked by the caller: cancel it (its completed steps are
    undone, as an operator's cancel does), or cancel what is in flight and go on from the
    definition's `on_deadline` node. Fires once: the run forgets its deadline."""
    deadline_at, run.deadline_at = run.deadline_at, None
    target = definition.deadline_node
    work.event(
        run,
        None,
        EventKind.DEADLINE_PASSED,
        now,
        detail={
            "deadline_at": deadline_at.isoformat() if deadline_at else None,
            "then": target or DEADLINE_CANCELS,
        },
    )
    if target is None:
        undo.cancel_locked(run, definition, now, work)
        return
    # As a cancel would: nothing waiting starts, a running attempt hears it at its next
    # heartbeat (its result is discarded, and it is undone if the run is undone later).
    for step in steps_of(run, work).filter(kind=StepKind.FORWARD, state__in=LIVE_STEP_STATES):
        advance.cancel_step(
            run, definition, step, now, work, attempt_running=step.state == StepState.RUNNING
        )
    advance.enter_node(run, definition, target, came_from=None, now=now, work=work)
    settle(run, work)
