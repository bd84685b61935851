"""Signals by business key: find the one live run a key names and signal it, or start it.

A caller outside Baton knows its order number, not our run id. A business key is
a type and either the run's correlation id or one of the type's `searchable` input
fields (matched exactly, through the GIN index on the input). The run is found and
signalled in one transaction, its row locked by the signal, so a run that ends
meanwhile is refused rather than signalled after its end.

With a start input, it is Temporal's signal-with-start: when no live run has the
key, a run is started with it and the signal delivered to it in the same
transaction. Such requests are serialised per key (an advisory lock), so two at
once start one run; the start's idempotency key is derived from the signal's id, so
a retried request starts nothing new and is told the signal is a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from workflows import engine, registry, starting
from workflows.dsl import Workflow
from workflows.models import WorkflowRun
from workflows.states import RunState

# The runs a key finds: those that may still go forward (a run being undone is over).
KEYED_RUN_STATES = (RunState.PENDING, RunState.RUNNING, RunState.WAITING, RunState.PAUSED)
# A signal-with-start's run is keyed on the signal's id, under this prefix.
START_KEY_PREFIX = "signal-with-start:"
CORRELATION_ID = "correlation_id"


class InvalidKey(ValueError):
    """The key or the start input cannot find or start a run (HTTP 422); the message says why."""


class NoLiveRun(LookupError):
    """No live run the caller may signal has the key, and none is to be started (HTTP 404)."""


class AmbiguousKey(Exception):
    """Several live runs have the key, or the only one is someone else's (HTTP 409)."""


@dataclass(frozen=True)
class BusinessKey:
    """A workflow type and how to know its run: a correlation id, or a searchable field."""

    workflow_type: str
    field: str
    value: Any

    def __str__(self) -> str:
        return f"{self.field}={self.value!r}"

    def matches(self) -> Q:
        if self.field == CORRELATION_ID:
            return Q(correlation_id=self.value)
        return Q(input__contains={self.field: self.value})

    def check(self, definition: Workflow) -> None:
        """Raise InvalidKey unless runs of `definition` can be found by this key."""
        if self.field == CORRELATION_ID:
            if not isinstance(self.value, str) or not self.value:
                raise InvalidKey("A correlation id is non-empty text.")
            return
        if self.field not in definition.searchable:
            keys = ", ".join((CORRELATION_ID, *definition.searchable))
            raise InvalidKey(
                f"{self.field!r} is not a searchable field of {definition.name!r}; "
                f"find its runs by {keys}."
            )


@dataclass(frozen=True)
class KeyedSignal:
    """The run signalled, the signal's id, and whether it was a repeat or started the run."""

    run_id: Any
    signal_id: str
    duplicate: bool
    started: bool


def signal_by_key(
    *,
    key: BusinessKey,
    name: str,
    payload: dict[str, Any] | None = None,
    signal_id: str | None = None,
    among: QuerySet[WorkflowRun] | None = None,
    start_input: dict[str, Any] | None = None,
    started_by: Any = None,
    remote_addr: str | None = None,
    now: datetime | None = None,
) -> KeyedSignal:
    """Signal the one live run of `key` (among the runs `among`, by default all of them).

    With `start_input` (and a `signal_id`, which makes a retry safe), start a run
    with it when no live run has the key, as `started_by` would (their right to
    start the type is checked; with nobody, as the engine alone would), and signal it.
    Raise UnknownWorkflow, InvalidKey, NoLiveRun, AmbiguousKey, what starting raises
    (StartRefused, KeyTaken, InvalidInput) and what signalling raises
    (RunAlreadyEnded, IllegalRunOperation); nothing is written then.
    """
    definition = registry.get(key.workflow_type)
    key.check(definition)
    if start_input is not None:
        if not signal_id:
            raise InvalidKey(
                "Starting a missing run needs the signal's id, so that a retry starts nothing."
            )
        start_input = _keyed_input(key, start_input)
    now = now or timezone.now()
    with transaction.atomic():
        if start_input is not None:
            _serialise(key)
        live = WorkflowRun.objects.filter(
            key.matches(), workflow_type=definition.name, state__in=KEYED_RUN_STATES
        )
        theirs = live if among is None else live.filter(pk__in=among.values("pk"))
        found = list(theirs.values_list("pk", flat=True)[:2])
        if len(found) > 1:
            raise AmbiguousKey(
                f"{theirs.count()} live runs of {definition.name!r} have {key}: "
                "signal one by its id instead."
            )
        started = False
        if found:
            run_id = found[0]
        elif start_input is None:
            raise NoLiveRun(f"No live run of {definition.name!r} that you may signal has {key}.")
        elif among is not None and live.exists():
            raise AmbiguousKey(
                f"A live run of {definition.name!r} has {key}, but it is not yours to signal; "
                "no second run was started."
            )
        else:
            run_id, started = _start(
                definition, key, start_input, signal_id, started_by, now, remote_addr
            )
        signal, created = engine.signal_run(
            run_id=run_id, name=name, payload=payload, signal_id=signal_id, now=now
        )
    return KeyedSignal(
        run_id=run_id, signal_id=signal.signal_id, duplicate=not created, started=started
    )


def _keyed_input(key: BusinessKey, start_input: dict[str, Any]) -> dict[str, Any]:
    """The start input, holding the key's field, so the run started is the one it finds."""
    if key.field == CORRELATION_ID or not isinstance(start_input, dict):
        return start_input
    if key.field in start_input and start_input[key.field] != key.value:
        raise InvalidKey(
            f"The start input has {key.field}={start_input[key.field]!r}, not the key's "
            f"{key.value!r}: a run started with it would not have the key."
        )
    return {**start_input, key.field: key.value}


def _serialise(key: BusinessKey) -> None:
    """Hold the key's advisory lock until commit: one find-or-start per key at a time."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                [f"{START_KEY_PREFIX}{key.workflow_type}:{key}"],
            )


def _start(
    definition: Workflow,
    key: BusinessKey,
    start_input: dict[str, Any],
    signal_id: str,
    started_by: Any,
    now: datetime,
    remote_addr: str | None,
) -> tuple[Any, bool]:
    options = {
        "workflow_type": definition.name,
        "input": start_input,
        "idempotency_key": f"{START_KEY_PREFIX}{signal_id}",
        "correlation_id": key.value if key.field == CORRELATION_ID else "",
        "now": now,
    }
    if started_by is None:
        run, created = engine.start_workflow(**options)
    else:
        run, created = starting.start_for(
            user=started_by, channel="api", remote_addr=remote_addr, **options
        )
    return run.pk, created
