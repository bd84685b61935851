"""The engine: the only writer of run and step state.

Rule one: the database is the truth, the broker only carries hints. A Celery
message says "look at step 42"; the step row says whether it still needs doing.
Each use case is one transaction that first locks the run row (lock order: run,
then its steps), checks the rows, transitions them, records events and sends
messages only on commit. A lost, duplicated or late message therefore changes
nothing that matters, and the sweep finds every step whose message was lost or
whose worker died.

One module per use case: `start`, `execute` (claim, run, record), `signals`,
`undo` (compensation, cancel, dead letters), `pause`, `operate` (an operator's
retry of a failed run, or skip of a stuck step), `migrate` (moving live runs to
another version), `sweeper`; `advance` moves a
run through its graph for all of them, asking `nodes` (one module per node kind)
what entering a node or a due step does; `work` gathers what one use case writes
and `batch` writes it. This package's face is the few functions below.
"""

from __future__ import annotations

from workflows.engine.errors import EngineError, IllegalRunOperation, RunAlreadyEnded, RunNotFound
from workflows.engine.execute import execute_step
from workflows.engine.migrate import MigrationReport, RunMove, migrate_runs, preview_migration
from workflows.engine.operate import retry_failed_run, skip_step
from workflows.engine.pause import pause_run, resume_run
from workflows.engine.signals import RESERVED_SIGNAL_ID_PREFIX, fail_waiting_step, signal_run
from workflows.engine.start import start_pending_runs, start_workflow
from workflows.engine.sweeper import sweep
from workflows.engine.undo import cancel_run, resume_dead_letter, retry_dead_letter
from workflows.engine.work import EXECUTE_STEP_TASK, EXECUTE_STEPS_TASK

__all__ = [
    "EXECUTE_STEPS_TASK",
    "EXECUTE_STEP_TASK",
    "RESERVED_SIGNAL_ID_PREFIX",
    "EngineError",
    "IllegalRunOperation",
    "MigrationReport",
    "RunAlreadyEnded",
    "RunMove",
    "RunNotFound",
    "cancel_run",
    "execute_step",
    "fail_waiting_step",
    "migrate_runs",
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
    "sweep",
]
