"""The engine: the only writer of run and step state.

Rule one: the database is the truth, the broker only carries hints. A Celery
message says "look at step 42"; the step row says whether it still needs doing.
Each use case is one transaction that first locks the run row (lock order: run,
then its steps), checks the rows, transitions them, records events and sends
messages only on commit. A lost, duplicated or late message therefore changes
nothing that matters, and the sweep finds every step whose message was lost or
whose worker died.

One module per use case: `start`, `execute` (claim, run, record), `signals`,
`updates` (a signal validated, handled and answered in the same request),
`undo` (compensation, cancel, dead letters), `pause`, `operate` (an operator's
retry of a failed run, or skip of a stuck step), `migrate` (moving live runs to
another version), `sweeper`, `notes` (a warning on a run's timeline); `advance` moves a
run through its graph for all of them, asking `nodes` (one module per node kind)
what entering a node or a due step does; `work` gathers what one use case writes
and `batch` writes it. This package's face is the few functions below.

Imports go one way: `nodes` build on the small core (`work`, `batch`, `errors`)
and never import the modules above them; when a node kind must go on to the next
node, fail a step or start a child run, it asks through `moves`, which this
package fills below once every use case is imported.
"""

from __future__ import annotations

from workflows.engine import advance, children, execute, moves, signals, start, undo
from workflows.engine.errors import EngineError, IllegalRunOperation, RunAlreadyEnded, RunNotFound
from workflows.engine.execute import execute_step, start_workflow_here
from workflows.engine.migrate import MigrationReport, RunMove, migrate_runs, preview_migration
from workflows.engine.notes import warn_run
from workflows.engine.operate import (
    MOVABLE_RUN_STATES,
    movable_nodes,
    move_run,
    retry_failed_run,
    skip_step,
)
from workflows.engine.pause import pause_run, resume_run
from workflows.engine.signals import RESERVED_SIGNAL_ID_PREFIX, fail_waiting_step, signal_run
from workflows.engine.start import start_pending_runs, start_workflow
from workflows.engine.sweeper import sweep
from workflows.engine.undo import cancel_run, resume_dead_letter, retry_dead_letter
from workflows.engine.updates import (
    InvalidUpdate,
    UnknownUpdate,
    UpdateAnswer,
    UpdateNotAccepted,
    update_run,
)
from workflows.engine.work import EXECUTE_STEP_TASK, EXECUTE_STEPS_TASK

moves.install(
    moves.Moves(
        enter_node=advance.enter_node,
        continue_to=advance.continue_to,
        leave_node=advance.leave_node,
        cancel_step=advance.cancel_step,
        claim_inline=execute.claim_inline,
        attempt_failed=execute.attempt_failed,
        step_failed=execute.step_failed,
        step_succeeded_after=execute.step_succeeded_after,
        consume_signal=signals.consume_signal,
        undo_next=undo.undo_next,
        undo_lost_branches=undo.undo_lost_branches,
        mark_undone=undo.mark_undone,
        cancel_run=undo.cancel_run,
        start_workflow=start.start_workflow,
        child_ended=children.child_ended,
    )
)

__all__ = [
    "EXECUTE_STEPS_TASK",
    "EXECUTE_STEP_TASK",
    "MOVABLE_RUN_STATES",
    "RESERVED_SIGNAL_ID_PREFIX",
    "EngineError",
    "IllegalRunOperation",
    "InvalidUpdate",
    "MigrationReport",
    "RunAlreadyEnded",
    "RunMove",
    "RunNotFound",
    "UnknownUpdate",
    "UpdateAnswer",
    "UpdateNotAccepted",
    "cancel_run",
    "execute_step",
    "fail_waiting_step",
    "migrate_runs",
    "movable_nodes",
    "move_run",
    "pause_run",
    "preview_migration",
    "resume_dead_letter",
    "resume_run",
    "retry_dead_letter",
    "retry_failed_run",
    "signal_run",
    "skip_step",
    "start_pending_runs",
    "start_workflow",
    "start_workflow_here",
    "sweep",
    "update_run",
    "warn_run",
]
