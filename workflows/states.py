"""The states of a workflow run and of its steps."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class RunState(models.TextChoices):
    PENDING = "pending", _("pending (not started)")
    RUNNING = "running", _("Running")
    WAITING = "waiting", _("waiting (for a person, a signal or a timer)")
    PAUSED = "paused", _("paused (blocked by an operator)")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    COMPENSATING = "compensating", _("Compensating")
    COMPENSATED = "compensated", _("Compensated")
    CANCELLING = "cancelling", _("Cancelling")
    CANCELLED = "cancelled", _("Cancelled")
    DEAD_LETTERED = "dead_lettered", _("dead-lettered")


class StepState(models.TextChoices):
    SCHEDULED = "scheduled", _("Scheduled")
    RUNNING = "running", _("Running")
    RETRY_WAIT = "retry_wait", _("waiting to retry")
    WAITING = "waiting", _("waiting (signal, timer or join)")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    COMPENSATED = "compensated", _("Compensated")
    CANCELLED = "cancelled", _("Cancelled")
    SKIPPED = "skipped", _("skipped by an operator")


class StepKind(models.TextChoices):
    """A step either moves the run forward or undoes an earlier step."""

    FORWARD = "forward"
    COMPENSATION = "compensation"


class EventKind(models.TextChoices):
    STARTED = "started"
    COMPLETED = "completed"
    ERRORED = "errored"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    WAITING = "waiting"
    SIGNALLED = "signalled"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    LEASE_EXPIRED = "lease_expired"
    LATE_RESULT_DISCARDED = "late_result_discarded"
    REDISPATCHED = "redispatched"
    DEAD_LETTERED = "dead_lettered"
    OPERATOR = "operator"
    # Something an operator should know that changes no state (workflows.engine.notes).
    WARNING = "warning"
    # A step that failed for good took its catch path (Activity.on_error).
    CAUGHT = "caught"
    # The run's deadline passed while it was live (Workflow.deadline).
    DEADLINE_PASSED = "deadline_passed"
    # A step waits for its activity's rate limit or concurrency (workflows.engine.limits):
    # written once per attempt, the first time its limits hold it back.
    HELD = "held"


LIVE_RUN_STATES = (
    RunState.PENDING,
    RunState.RUNNING,
    RunState.WAITING,
    RunState.PAUSED,
    RunState.COMPENSATING,
    RunState.CANCELLING,
)
FINAL_RUN_STATES = (
    RunState.SUCCEEDED,
    RunState.FAILED,
    RunState.COMPENSATED,
    RunState.CANCELLED,
)
# Runs whose steps may start: forward while running or waiting, undo while
# compensating or cancelling. A paused or pending run starts nothing.
RUNS_THAT_START_STEPS = (
    RunState.RUNNING,
    RunState.WAITING,
    RunState.COMPENSATING,
    RunState.CANCELLING,
)
ACTIVE_STEP_STATES = (StepState.SCHEDULED, StepState.RUNNING, StepState.RETRY_WAIT)
LIVE_STEP_STATES = (*ACTIVE_STEP_STATES, StepState.WAITING)
# States in which `StepRun.due_at` means something to the sweep.
SWEPT_STEP_STATES = LIVE_STEP_STATES
