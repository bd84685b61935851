"""Runs, steps, their events and signals: rows and the legal moves between their states.

Also the business calendars operators keep (working hours, time zone, holidays).

Transitions here change only their own row in memory; `workflows.engine` locks,
calls them, saves and records the event. Concurrency contract: every writer of a
run's steps first locks the run row (`select_for_update`), so checks made under
that lock hold until commit; ConcurrentTransitionMixin is the second fence, making
a save fail if the state changed underneath anyway.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Iterable
from datetime import date, datetime
from functools import cache
from typing import Any, TypeVar

import django_fsm as fsm
from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Field, Q, signals
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.functions import Coalesce
from django.db.models.query_utils import DeferredAttribute
from django.utils.translation import gettext_lazy as _

from workflows import calendars
from workflows.dsl import RunData
from workflows.ids import time_ordered_id
from workflows.results import RunResults
from workflows.states import (
    FINAL_RUN_STATES,
    LIVE_STEP_STATES,
    RunState,
    StepKind,
    StepState,
)

# A run moving forward, whether a worker or a wait has its attention.
_MOVING = [RunState.RUNNING, RunState.WAITING]


class SavesChanges(models.Model):
    """Remember the values a row was loaded or saved with, so `save_changes` writes only
    the fields a transition changed (a step's UPDATE stays small, a run's is skipped
    when nothing changed). Compares by identity then equality: reassign JSON values,
    never mutate them in place."""

    class Meta:
        abstract = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._remember()

    def save(self, *args: Any, **kwargs: Any) -> None:
        super().save(*args, **kwargs)
        self._remember()

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Any:
        """Load a row straight into its attributes where that is all Model.__init__ does.

        A sweep loads a thousand runs and steps a batch. Model.__init__ sets each field
        through its class attribute and sends pre_init and post_init; when every field
        was read, each of those attributes only stores the value (see
        `_stored_as_given`) and nothing listens to the signals, the values go into the
        row's __dict__ as they are: the same row in half the time."""
        attnames = _stored_as_given(cls)
        if (
            attnames is None
            or len(values) != len(attnames)
            or signals.pre_init.has_listeners(cls)
            or signals.post_init.has_listeners(cls)
        ):
            return super().from_db(db, field_names, values)
        row = cls.__new__(cls)
        row._state = ModelState()
        row._state.adding = False
        row._state.db = db
        row.__dict__.update(zip(attnames, values, strict=True))
        row.mark_saved()
        return row

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        super().refresh_from_db(*args, **kwargs)
        self._remember()

    def _remember(self) -> None:
        # Read __dict__, not attributes: a deferred field must not be loaded here.
        loaded = self.__dict__
        self._saved_values = {
            name: loaded[name] for name in _concrete_attnames(type(self)) if name in loaded
        }

    def changed_fields(self) -> list[str]:
        loaded = self.__dict__
        return [
            name
            for name, saved in self._saved_values.items()
            if (value := loaded.get(name)) is not saved and value != saved
        ]

    def save_changes(self) -> bool:
        """Save the changed fields (and `auto_now` ones with them); return whether any were."""
        changed = self.changed_fields()
        if not changed:
            return False
        self.save(update_fields=[*changed, *_auto_now_fields(type(self))])
        return True

    def mark_saved(self, fields: Iterable[str] | None = None) -> None:
        """The row was written in bulk (only `fields`, when given, the others being
        unchanged): what it holds now is what the database holds."""
        if fields is None:
            self._remember()
        else:
            self._saved_values.update((name, self.__dict__[name]) for name in fields)
        if isinstance(self, fsm.ConcurrentTransitionMixin) and (
            fields is None or any(field.attname in fields for field in self.state_fields)
        ):
            self._update_initial_state()


def _auto_now_fields(model: type[models.Model]) -> list[str]:
    return [f.name for f in model._meta.concrete_fields if getattr(f, "auto_now", False)]


def new_row(model: type[_Row], **values: Any) -> _Row:
    """Return `model(**values)`, built straight into the row's __dict__ where that is all
    Model.__init__ would do (see `SavesChanges.from_db`).

    A sweep's batch builds a step and an event for each timer it fires, and
    Model.__init__ given keywords looks every field up among them: half the cost of a
    new step. Here the fields not given take their defaults from a record made once
    a model (a callable default is called for each row that is not given its value,
    as Django calls it); a related object given by name is set through its
    descriptor, as Model.__init__ sets it; a keyword that names no field goes to
    Model.__init__."""
    if (
        _stored_as_given(model) is None
        or signals.pre_init.has_listeners(model)
        or signals.post_init.has_listeners(model)
    ):
        return model(**values)
    defaults, called, columns = _new_row_plan(model)
    row = model.__new__(model)
    row._state = ModelState()
    stored = row.__dict__
    stored.update(defaults)
    for field in called:
        if field.attname not in values and field.name not in values:
            stored[field.attname] = field.get_default()
    related = []
    for name, value in values.items():
        column = columns.get(name, False)
        if column:
            stored[column] = value
        elif column is None:
            related.append((name, value))
        else:
            return model(**values)
    for name, value in related:
        setattr(row, name, value)
    if isinstance(row, SavesChanges):
        row.mark_saved()  # what SavesChanges and FencedTransitions remember on __init__
    return row


_Row = TypeVar("_Row", bound=models.Model)


@cache
def _new_row_plan(
    model: type[models.Model],
) -> tuple[dict[str, Any], tuple[Field, ...], dict[str, str | None]]:
    """The defaults of `model`'s columns (those Django computes once, as
    `Field.get_default` does), the fields whose callable default is called for each
    row, and the column each keyword sets (None for a related object, set through
    its descriptor)."""
    defaults, called, columns = {}, [], {}
    for field in model._meta.concrete_fields:
        columns[field.attname] = field.attname
        columns[field.name] = field.attname if field.name == field.attname else None
        if field.has_default() and callable(field.default):
            called.append(field)
        else:
            defaults[field.attname] = field.get_default()
    return defaults, tuple(called), columns


@cache
def _stored_as_given(model: type[models.Model]) -> tuple[str, ...] | None:
    """The model's column attributes if setting each one on a new row only stores the
    value in its __dict__ (a plain field, a foreign key's id, a state without proxy
    classes), else None."""
    for field in model._meta.concrete_fields:
        if field.generated:
            return None
        attribute = inspect.getattr_static(model, field.attname, None)
        if type(attribute) in (DeferredAttribute, ForeignKeyDeferredAttribute):
            continue
        if type(attribute) is fsm.FSMFieldDescriptor and not field.state_proxy:
            continue
        return None
    return _concrete_attnames(model)


@cache
def _concrete_attnames(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)


class FencedTransitions(fsm.ConcurrentTransitionMixin):
    """django-fsm's ConcurrentTransitionMixin, finding the model's state fields once per
    model instead of testing every field each time a row is built or saved (a sweep
    builds thousands)."""

    @property
    def state_fields(self) -> tuple[fsm.FSMFieldMixin, ...]:
        return _state_fields(type(self))


@cache
def _state_fields(model: type[models.Model]) -> tuple[fsm.FSMFieldMixin, ...]:
    return tuple(field for field in model._meta.fields if isinstance(field, fsm.FSMFieldMixin))


class WorkflowRun(FencedTransitions, SavesChanges, models.Model):
    # Time-ordered, so a run's rows go where the last runs' went: see workflows.ids.
    id = models.UUIDField(primary_key=True, default=time_ordered_id, editable=False)
    workflow_type = models.CharField(max_length=100)
    workflow_version = models.PositiveIntegerField()
    state = fsm.FSMField(
        choices=RunState.choices, default=RunState.PENDING, protected=True, max_length=20
    )
    input = models.JSONField()
    # The result of the run's last step. Each step's result lives on its own row
    # (see `results`), so recording a step never rewrites a document that grows
    # with the run.
    result = models.JSONField(null=True, blank=True)
    # Why the run did not succeed: the failed node, its error, what was undone.
    error = models.JSONField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    correlation_id = models.CharField(max_length=200, blank=True, default="")
    # Whoever started the run: its requester. Indexed by run_started_by_idx.
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # When the run, if still live, is cancelled or moved on (its definition's
    # `deadline`, counted from the start); cleared once it fired. Read by the sweep
    # through run_deadline_idx.
    deadline_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A child run (see dsl.ChildWorkflow and dsl.Map): the run that started it, and the
    # step of that run that waits for it (the step's `children`).
    # Indexed only where set (run_parent_run_idx, run_parent_step_idx): most runs have no
    # parent, and a full index would take an entry for each at every start and end.
    parent_run = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
        editable=False,
        db_index=False,
    )
    parent_step = models.ForeignKey(
        "StepRun",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
        editable=False,
        db_index=False,
    )
    # The run's trace (W3C trace-context fields of its start span), so that steps run
    # by any worker, hours later, join it; empty while tracing is off (workflows.tracing).
    trace_context = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_type", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="run_unique_idempotency_key",
            ),
        ]
        indexes = [
            models.Index(fields=["workflow_type", "state"], name="run_type_state_idx"),
            models.Index(fields=["state", "-created_at"], name="run_state_created_idx"),
            models.Index(
                fields=["correlation_id"],
                condition=~Q(correlation_id=""),
                name="run_correlation_idx",
            ),
            models.Index(
                fields=["workflow_type", "created_at"],
                condition=Q(state=RunState.PENDING),
                name="run_pending_idx",
            ),
            # Every run, newest first: the operators' console reads it backwards.
            models.Index(fields=["created_at", "id"], name="run_created_idx"),
            # The console's search on business keys: `input @> {"order_id": "A-1"}`.
            GinIndex(fields=["input"], opclasses=["jsonb_path_ops"], name="run_input_idx"),
            # Runs that ended lately, for the SLA dashboard's throughput, failure rate and
            # cycle times: a range of finished_at, read from the index alone.
            models.Index(
                fields=["finished_at"],
                include=["workflow_type", "state", "created_at"],
                condition=Q(finished_at__isnull=False),
                name="run_finished_idx",
            ),
            # Run deadlines the sweep fires, in due order: only runs moving forward (a
            # paused run's deadline fires once it resumes; an ending run has none).
            models.Index(
                fields=["deadline_at"],
                condition=Q(
                    deadline_at__isnull=False, state__in=[RunState.RUNNING, RunState.WAITING]
                ),
                name="run_deadline_idx",
            ),
            # A person's requests, newest first (My requests reads it backwards).
            models.Index(
                fields=["started_by", "created_at", "id"],
                condition=Q(started_by__isnull=False),
                name="run_started_by_idx",
            ),
            # A run's children (and the delete of a parent): `parent_run_id = x` implies
            # the condition, so lookups by parent use them.
            models.Index(
                fields=["parent_run"],
                condition=Q(parent_run__isnull=False),
                name="run_parent_run_idx",
            ),
            models.Index(
                fields=["parent_step"],
                condition=Q(parent_step__isnull=False),
                name="run_parent_step_idx",
            ),
        ]
        permissions = [("operate_workflowrun", "Can cancel, pause, resume and retry runs")]

    def __str__(self) -> str:
        return f"{self.workflow_type} {self.id} ({self.state})"

    @property
    def results(self) -> RunResults:
        """Finished steps' results by node, read from their rows when asked."""
        return RunResults(self.pk, steps=StepRun.objects)

    @property
    def data(self) -> RunData:
        return RunData(input=self.input, results=self.results)

    @property
    def is_finished(self) -> bool:
        return self.state in FINAL_RUN_STATES

    # -- transitions -------------------------------------------------------

    @fsm.transition(field=state, source=RunState.PENDING, target=RunState.RUNNING)
    def start(self, *, now: datetime) -> None:
        self.started_at = now

    @fsm.transition(field=state, source=_MOVING, target=RunState.WAITING)
    def wait(self) -> None:
        """Every live step waits for a person, a signal or a timer."""

    @fsm.transition(field=state, source=_MOVING, target=RunState.RUNNING)
    def wake(self) -> None:
        """Some step has work for a worker."""

    @fsm.transition(
        field=state,
        source=[RunState.RUNNING, RunState.WAITING, RunState.PAUSED],
        target=RunState.SUCCEEDED,
    )
    def succeed(self, *, result: Any, now: datetime) -> None:
        """The last step finished (a paused run's running step may be the last one)."""
        self.result = result
        self.finished_at = now

    @fsm.transition(
        field=state,
        source=[RunState.RUNNING, RunState.WAITING, RunState.PAUSED],
        target=RunState.COMPENSATING,
    )
    def begin_compensation(self, *, error: dict[str, Any]) -> None:
        self.error = error

    @fsm.transition(field=state, source=RunState.SUCCEEDED, target=RunState.COMPENSATING)
    def undo_for_parent(self, *, parent_run_id: Any) -> None:
        """A child that succeeded is undone because its parent is compensating."""
        self.error = {"undone_for_parent": str(parent_run_id)}

    @property
    def undone_for_parent(self) -> bool:
        return bool(self.error and "undone_for_parent" in self.error)

    @fsm.transition(field=state, source=RunState.COMPENSATING, target=RunState.COMPENSATED)
    def finish_compensation(self, *, now: datetime) -> None:
        self.finished_at = now

    @fsm.transition(field=state, source=RunState.COMPENSATING, target=RunState.FAILED)
    def fail(self, *, now: datetime) -> None:
        """Give up with nothing to undo: no completed step had a compensation."""
        self.finished_at = now

    @fsm.transition(
        field=state,
        source=[RunState.PENDING, RunState.RUNNING, RunState.WAITING, RunState.PAUSED],
        target=RunState.CANCELLING,
    )
    def request_cancel(self, *, now: datetime) -> None:
        self.cancel_requested_at = now

    @fsm.transition(field=state, source=RunState.CANCELLING, target=RunState.CANCELLED)
    def finish_cancel(self, *, now: datetime) -> None:
        self.finished_at = now

    @fsm.transition(field=state, source=_MOVING, target=RunState.PAUSED)
    def pause(self) -> None:
        """Start no new step; running ones finish and are recorded."""

    @fsm.transition(field=state, source=RunState.PAUSED, target=RunState.RUNNING)
    def resume(self) -> None:
        pass

    @fsm.transition(
        field=state,
        source=[RunState.COMPENSATING, RunState.CANCELLING],
        target=RunState.DEAD_LETTERED,
    )
    def dead_letter(self, *, error: dict[str, Any]) -> None:
        self.error = {**(self.error or {}), "dead_letter": error}

    @fsm.transition(field=state, source=RunState.FAILED, target=RunState.RUNNING)
    def retry_failed(self) -> None:
        """An operator takes a failed run (nothing was undone) back to its failed step."""
        self.finished_at = None
        self.error = None

    @fsm.transition(
        field=state,
        source=RunState.DEAD_LETTERED,
        target=fsm.RETURN_VALUE(RunState.COMPENSATING, RunState.CANCELLING),
    )
    def reopen(self) -> str:
        """An operator takes the run out of the dead-letter state to finish undoing it."""
        return RunState.CANCELLING if self.cancel_requested_at else RunState.COMPENSATING


class StepRun(FencedTransitions, SavesChanges, models.Model):
    """One node of one run (or the compensation of one), with its attempts and due time."""

    # Found through step_unique_per_round_and_item, whose first column it is: an index of
    # its own would take a second entry for every version of every step.
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    node = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=StepKind.choices, default=StepKind.FORWARD)
    # 0 for a node's first run; each time the run goes back through a GoBack, the
    # nodes it enters again get new steps one round up (a compensation has the
    # round of the step it undoes).
    round = models.PositiveSmallIntegerField(default=0)
    # One item of a map (its index in the list, and the item itself), or None for
    # every other step (the map's own step included): each item is a row of its own,
    # so a list of a thousand never rewrites one document per item.
    item = models.PositiveIntegerField(null=True, blank=True)
    item_value = models.JSONField(null=True, blank=True)
    state = fsm.FSMField(
        choices=StepState.choices, default=StepState.SCHEDULED, protected=True, max_length=20
    )
    attempt = models.PositiveIntegerField(default=0)
    # When the sweep must next look at this step: redispatch while scheduled, lease
    # expiry while running, next attempt while retry_wait, the timer while waiting.
    due_at = models.DateTimeField(null=True, blank=True)
    # Fences a late result: only the attempt holding the current token may record one.
    lease_token = models.UUIDField(null=True, blank=True, editable=False)
    # How long a new attempt of an activity holds the step (from its node's timeouts),
    # kept on the row so a claim needs no definition to set the lease's deadline.
    lease = models.DurationField(null=True, blank=True, editable=False)
    # The worker process that holds the lease, or held it last ("host:pid"), for
    # operators asking where an attempt ran.
    lease_holder = models.CharField(max_length=200, blank=True, editable=False)
    scheduled_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    last_error = models.JSONField(null=True, blank=True)
    # The last failed attempt's traceback: for operators, in the console (the API and
    # the request pages show `last_error`, its type and message, only).
    last_traceback = models.TextField(blank=True, editable=False)
    # Some attempt ended without saying what it did (its lease expired, or it was
    # cancelled mid-flight): its effect may have been applied, so it is undone
    # even if the step later failed cleanly. Never cleared.
    may_have_applied = models.BooleanField(default=False)

    class Meta:
        ordering = ["scheduled_at", "id"]
        constraints = [
            # One step per node, kind and round of a run, and per item for a map's items.
            # A step that is no item (item NULL) counts as item -1 (items are 0 and up),
            # so that two such steps clash: one unique index on both databases. (NULLS NOT
            # DISTINCT says the same on PostgreSQL 15, but SQLite has no such thing, and
            # Django's check of it asks the server its version: `manage.py check` would
            # fail, not warn, when the database is down.)
            models.UniqueConstraint(
                "run",
                "node",
                "kind",
                "round",
                Coalesce("item", -1),
                name="step_unique_per_round_and_item",
            ),
        ]
        indexes = [
            models.Index(
                fields=["due_at"],
                condition=Q(state__in=LIVE_STEP_STATES, due_at__isnull=False),
                name="step_due_idx",
            ),
            models.Index(
                fields=["run", "state"],
                condition=Q(state__in=LIVE_STEP_STATES),
                name="step_live_idx",
            ),
        ]

    def __str__(self) -> str:
        prefix = "undo " if self.kind == StepKind.COMPENSATION else ""
        round_ = f", round {self.round + 1}" if self.round else ""
        item = f" item {self.item}" if self.item is not None else ""
        return f"{prefix}{self.node}{item} ({self.state}, attempt {self.attempt}{round_})"

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts and redeliveries: the key external effects are keyed on."""
        return step_key(
            run_id=self.run_id,
            node=self.node,
            round=self.round,
            item=self.item,
            compensation=self.kind == StepKind.COMPENSATION,
        )

    # -- transitions -------------------------------------------------------

    @fsm.transition(field=state, source=StepState.SCHEDULED, target=StepState.RUNNING)
    def start(
        self, *, token: uuid.UUID, lease_until: datetime, now: datetime, holder: str = ""
    ) -> None:
        self.attempt += 1
        self.lease_token = token
        self.lease_holder = holder
        self.started_at = now
        self.heartbeat_at = None
        self.due_at = lease_until

    @fsm.transition(
        field=state, source=[StepState.RUNNING, StepState.WAITING], target=StepState.SUCCEEDED
    )
    def succeed(self, *, result: Any, now: datetime) -> None:
        self.result = result
        self.finished_at = now
        self.due_at = None
        self.lease_token = None

    @fsm.transition(
        field=state, source=[StepState.RUNNING, StepState.WAITING], target=StepState.RETRY_WAIT
    )
    def schedule_retry(self, *, error: dict[str, Any], retry_at: datetime) -> None:
        """An attempt failed (a child run, for a step that waits for one) and another is due."""
        self.last_error = error
        self.due_at = retry_at
        self.lease_token = None

    @fsm.transition(field=state, source=StepState.WAITING, target=StepState.SCHEDULED)
    def dispatch(self, *, now: datetime, redispatch_at: datetime) -> None:
        """A map's item that waited for a free slot goes to a worker."""
        self.scheduled_at = now
        self.due_at = redispatch_at

    @fsm.transition(
        field=state, source=[StepState.WAITING, StepState.RETRY_WAIT], target=StepState.WAITING
    )
    def await_child(self, *, now: datetime, check_at: datetime) -> None:
        """Start another attempt that is a child run: wait for it, looking again at `check_at`."""
        self.attempt += 1
        self.started_at = now
        self.due_at = check_at

    @fsm.transition(field=state, source=StepState.RETRY_WAIT, target=StepState.SCHEDULED)
    def reschedule(self, *, now: datetime, redispatch_at: datetime) -> None:
        self.scheduled_at = now
        self.due_at = redispatch_at

    @fsm.transition(
        field=state,
        source=[StepState.SCHEDULED, StepState.RUNNING, StepState.WAITING],
        target=StepState.FAILED,
    )
    def fail(self, *, error: dict[str, Any], now: datetime) -> None:
        self.last_error = error
        self.finished_at = now
        self.due_at = None
        self.lease_token = None

    @fsm.transition(
        field=state,
        source=[StepState.SCHEDULED, StepState.RUNNING, StepState.RETRY_WAIT, StepState.WAITING],
        target=StepState.CANCELLED,
    )
    def cancel(self, *, now: datetime, attempt_may_run_until: datetime | None = None) -> None:
        """Stop the step; a running attempt loses its lease (its result will be discarded).

        `attempt_may_run_until`: the lease of an attempt cancelled while it ran, kept
        as `due_at` (the sweep never reads a cancelled step's), so that its undo waits
        until that attempt can no longer be applying its effect.
        """
        self.finished_at = now
        self.due_at = attempt_may_run_until
        self.lease_token = None

    @fsm.transition(
        field=state,
        source=[StepState.SUCCEEDED, StepState.FAILED, StepState.CANCELLED],
        target=StepState.COMPENSATED,
    )
    def mark_compensated(self) -> None:
        """Its compensation step has finished (or an operator vouched for the undo).

        A failed or cancelled step is undone when its last attempt may have taken
        effect before it stopped answering (see workflows.compensation).
        """

    @fsm.transition(field=state, source=StepState.FAILED, target=StepState.SCHEDULED)
    def retry_by_operator(self, *, now: datetime, redispatch_at: datetime) -> None:
        """Give a failed step a fresh attempt budget."""
        self.attempt = 0
        self.scheduled_at = now
        self.finished_at = None
        self.due_at = redispatch_at

    @fsm.transition(field=state, source=StepState.FAILED, target=StepState.SKIPPED)
    def skip_by_operator(self, *, now: datetime) -> None:
        """An operator did the step's work by hand and lets the run move past it."""
        self.finished_at = now

    @fsm.transition(
        field=state,
        source=[StepState.SCHEDULED, StepState.RUNNING, StepState.RETRY_WAIT, StepState.FAILED],
        target=StepState.SKIPPED,
    )
    def skip_with_result(self, *, result: Any, now: datetime) -> None:
        """An operator gives a stuck step the result it should have had; a running
        attempt's late result is discarded (its lease token no longer matches)."""
        self.result = result
        self.finished_at = now
        self.due_at = None
        self.lease_token = None


def step_key(
    *, run_id: Any, node: str, round: int, item: int | None = None, compensation: bool = False
) -> str:
    """Return the idempotency key of a step: `<run>:<node>` in round 0, as before loops
    existed (live runs and the services they called keep their keys), and
    `<run>:<node>@<round>` in later rounds; `#<item>` for a map's item (its index in
    the list); `:compensate` for its undo."""
    at_round = f"@{round}" if round else ""
    of_item = f"#{item}" if item is not None else ""
    suffix = ":compensate" if compensation else ""
    return f"{run_id}:{node}{at_round}{of_item}{suffix}"


class StepEvent(models.Model):
    """An append-only line of a run's timeline: what happened to which step, when.

    On PostgreSQL the table is partitioned by month of `at` (workflows.partitions;
    its primary key is (id, at) there) and retention drops whole months. Its keys to
    the run and the step are not enforced by the database: every delete of a run or
    a step would otherwise probe each month's index, and retention deletes runs by
    the thousand. The engine writes events only for rows it holds, and retention
    removes a run's events with it.
    """

    # Found through event_run_at_idx, whose first column it is: an index of its own would
    # take a second entry for every event.
    run = models.ForeignKey(
        WorkflowRun,
        on_delete=models.CASCADE,
        related_name="events",
        db_constraint=False,
        db_index=False,
    )
    # Never looked up by step alone (a step's events are read with its run's), and never
    # deleted by step: a step goes only with its run, whose events go with it, by run.
    # CASCADE would have Django's collector delete them again by step, reading every
    # month's partition without an index of the step (it would take an entry for every
    # event).
    step = models.ForeignKey(
        StepRun,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="events",
        db_constraint=False,
        db_index=False,
    )
    node = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=30)
    attempt = models.PositiveIntegerField(default=0)
    at = models.DateTimeField()
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["run", "at"], name="event_run_at_idx")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.node} {self.kind}"


class Signal(models.Model):
    """A durable message to a run, de-duplicated by its id; consumed by at most one wait."""

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=150)
    signal_id = models.CharField(max_length=200)
    payload = models.JSONField(default=dict, blank=True)
    received_at = models.DateTimeField()
    consumed_by = models.OneToOneField(
        StepRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="signal"
    )
    consumed_at = models.DateTimeField(null=True, blank=True)
    # An update's answer, {"result": ...}: what a repeat of its id is told (see
    # engine.updates); null for a plain signal.
    answer = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["received_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "signal_id"], name="signal_unique_id_per_run"),
        ]
        indexes = [
            models.Index(
                fields=["run", "name"],
                condition=Q(consumed_by__isnull=True),
                name="signal_unconsumed_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.signal_id})"


class ActivityLimiter(models.Model):
    """The count behind an activity's `rate_limit` and `concurrency`, shared by every worker.

    One row per limited activity (`workflows.queues.limit_key`), created at its first
    claim. A claim locks the row (SELECT ... FOR UPDATE) in the transaction that starts
    the step, so two workers never both take the last slot (see `workflows.engine.limits`).
    """

    key = models.CharField(max_length=200, primary_key=True)
    # The steps whose attempts held a slot when last counted. A step still `running` holds
    # it; one that ended (or whose lease expired) has given it back, so the record of an
    # attempt need not touch this row, and a crashed worker's slot frees itself.
    holders = models.JSONField(default=list)
    # The rate's current window (aligned to the clock) and how many attempts started in it.
    window_start = models.DateTimeField(null=True, blank=True)
    window_count = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.key


class ApiToken(models.Model):
    """A per-user API token. Only its SHA-256 digest is stored; the token is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    # The public start of the token, to find its row without storing the secret.
    prefix = models.CharField(max_length=12, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("API token")

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}{', revoked' if self.revoked_at else ''})"


class Heartbeat(models.Model):
    """When a named part of Baton last showed it was alive: the sweep, each beat.

    One row per name, overwritten in place (see `workflows.heartbeats`).
    """

    name = models.CharField(max_length=200, primary_key=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%Y-%m-%d %H:%M:%S}"


def _validate_hours(text: str) -> None:
    try:
        calendars.parse_hours(text)
    except calendars.CalendarError as error:
        raise ValidationError(str(error)) from None


def _validate_time_zone(name: str) -> None:
    try:
        calendars.zone(name)
    except calendars.CalendarError as error:
        raise ValidationError(str(error)) from None


def _hours_field(day: str, default: str) -> models.CharField:
    return models.CharField(
        day.title(),
        max_length=100,
        blank=True,
        default=default,
        validators=[_validate_hours],
        help_text=_("e.g. 09:00-12:00, 13:00-17:00; blank: not a working day"),
    )


class BusinessCalendar(models.Model):
    """Working hours per weekday, a time zone and holidays, edited by operators.

    Definitions name a calendar in `BusinessTime(calendar=...)`; the due times it
    gives are computed when a task opens or escalates and stored, so editing a
    calendar changes the due times computed after the edit, not those stored.
    """

    name = models.SlugField(
        max_length=64, unique=True, help_text=_("what definitions call it, e.g. standard")
    )
    description = models.CharField(max_length=200, blank=True)
    time_zone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[_validate_time_zone],
        help_text=_("an IANA time zone, e.g. Europe/Berlin; working hours are local to it"),
    )
    monday = _hours_field("monday", "09:00-17:00")
    tuesday = _hours_field("tuesday", "09:00-17:00")
    wednesday = _hours_field("wednesday", "09:00-17:00")
    thursday = _hours_field("thursday", "09:00-17:00")
    friday = _hours_field("friday", "09:00-17:00")
    saturday = _hours_field("saturday", "")
    sunday = _hours_field("sunday", "")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if all(not getattr(self, day).strip() for day in calendars.WEEKDAYS):
            raise ValidationError(_("A calendar needs working hours on at least one weekday."))

    def as_calendar(self, holidays: Iterable[date] | None = None) -> calendars.Calendar:
        """The calendar as business-time arithmetic takes it (a pure value)."""
        if holidays is None:
            # .all(), not values_list: a prefetch of the holidays is used.
            holidays = [holiday.date for holiday in self.holidays.all()]
        return calendars.Calendar(
            name=self.name,
            time_zone=self.time_zone,
            hours={
                index: calendars.parse_hours(getattr(self, day))
                for index, day in enumerate(calendars.WEEKDAYS)
            },
            holidays=frozenset(holidays),
        )


class Holiday(models.Model):
    """A day without working hours on one calendar."""

    calendar = models.ForeignKey(
        BusinessCalendar, on_delete=models.CASCADE, related_name="holidays"
    )
    date = models.DateField()
    name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["date"]
        constraints = [
            models.UniqueConstraint(fields=["calendar", "date"], name="holiday_once_per_day")
        ]

    def __str__(self) -> str:
        return f"{self.date} {self.name}".strip()
