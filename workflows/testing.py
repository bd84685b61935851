"""A test kit for workflow authors: run a definition in-process on the real engine, with a
clock the test moves.

Everything goes through the engine's public use cases against the test database:
`start_workflow`, `execute_step` (what a worker does), `signal_run`, `update_run`,
`cancel_run`, queries and signals by business key as the API asks them, and the real
`sweep`, which fires timers, retries, lost leases, escalations, deadlines and run
deadlines from the due times stored in the database. Nothing is mocked but the broker:
the kit runs every scheduled step itself, so no message leaves the process. The clock
is the kit's `now`, passed to every use case; `advance(days=3)` moves it and lets the
sweep fire whatever fell due meanwhile, each at its own due time (as a sweep running
every few seconds would), in one call.

Enable the fixture in a conftest.py with `pytest_plugins = ["workflows.testing"]` (or
`["approvals.testing"]`, the same kit that also decides human tasks), then:

    def test_expense_escalates_after_the_weekend(workflow_env, carol, bob):
        env = workflow_env.travel_to(datetime(2026, 1, 9, 16, tzinfo=UTC))  # a Friday
        pay = env.spy("expense", "pay")
        run = env.start("expense", {...})
        env.advance(days=3)  # Monday 16:00: not yet
        ...

Activities that call `heartbeat()` extend their lease from the real clock; the kit's
clock starts in the past (`DEFAULT_START`) so that stays harmless, unless a test moves
it past today.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from workflows import business_keys, engine, queries, registry
from workflows.activity import ActivityContext
from workflows.dsl import Map, Node, Workflow
from workflows.engine import work
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import RunState, StepKind, StepState

logger = logging.getLogger("baton.testing")

# A Monday, 09:00 UTC: a working morning on the standard calendar, and in the past, so
# heartbeats (which read the real clock) never fall behind the kit's clock.
DEFAULT_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class RunDidNotSettle(AssertionError):
    """The runs kept moving for more rounds than a settled test would need (a loop?)."""


@dataclass
class ActivityCalls:
    """What a replaced or spied activity was called with, run by run and undo by undo."""

    node: str
    runs: list[ActivityContext] = field(default_factory=list)
    undos: list[ActivityContext] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many attempts ran the activity (retries count; undos do not)."""
        return len(self.runs)


@dataclass
class WorkflowEnvironment:
    """Start runs, move the clock, send signals, decide tasks, and look at what happened.

    Every action runs the engine until the runs settle: no step is scheduled that a
    worker would run now, and the sweep finds nothing due. Retries, timers,
    escalations and deadlines then wait for the clock (`advance`).
    """

    now: datetime = DEFAULT_START
    max_rounds: int = 200
    _replacements: ExitStack = field(default_factory=ExitStack)
    _moved: bool = False

    # -- the clock ---------------------------------------------------------------

    def travel_to(self, moment: datetime) -> WorkflowEnvironment:
        """Set the clock (aware datetimes only). Backwards only before anything happened.

        Forwards, it stops at every due time on the way, as a sweep running every few
        seconds would: a timer fires at its own time, and what it starts counts from then.
        """
        if moment.tzinfo is None:
            raise ValueError("the kit's clock takes an aware datetime (with a time zone)")
        if self._moved and moment < self.now:
            raise ValueError(
                f"the clock only moves forward once runs exist: it is {self.now}, not {moment}"
            )
        if moment < self.now:
            self.now = moment
        self._walk_to(moment)
        return self

    def advance(
        self, *, days: float = 0, hours: float = 0, minutes: float = 0, seconds: float = 0
    ) -> WorkflowEnvironment:
        """Move the clock on, firing what falls due on the way, each at its own time."""
        step = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
        if step < timedelta(0):
            raise ValueError("the clock only moves forward")
        self._moved = True
        self._walk_to(self.now + step)
        return self

    def skip_ahead(self) -> datetime | None:
        """Move the clock to the next due time the database holds (a timer, a retry's
        backoff, a wait's timeout, a task's escalation or deadline) and settle.

        Return the new time, or None (the clock unchanged) when nothing is due ever.
        """
        upcoming = self._next_due()
        if upcoming is None:
            return None
        self._moved = True
        self.now = upcoming
        self.settle()
        return self.now

    def _walk_to(self, moment: datetime) -> None:
        while (upcoming := self._next_due()) is not None and upcoming <= moment:
            self.now = upcoming
            self.settle()
        self.now = moment
        self.settle()

    def _next_due(self) -> datetime | None:
        """The earliest due time after now: a waiting or retrying step's, a run's deadline,
        or a human task's."""
        due = [
            StepRun.objects.filter(
                state__in=(StepState.RETRY_WAIT, StepState.WAITING), due_at__gt=self.now
            )
            .order_by("due_at")
            .values_list("due_at", flat=True)
            .first(),
            # A step its activity's rate_limit held back (settle runs every other
            # scheduled step): due when its window ends.
            StepRun.objects.filter(
                state=StepState.SCHEDULED,
                due_at__gt=self.now,
                run__state__in=(RunState.RUNNING, RunState.WAITING),
            )
            .order_by("due_at")
            .values_list("due_at", flat=True)
            .first(),
            WorkflowRun.objects.filter(
                state__in=(RunState.RUNNING, RunState.WAITING), deadline_at__gt=self.now
            )
            .order_by("deadline_at")
            .values_list("deadline_at", flat=True)
            .first(),
        ]
        due += [source(self.now) for source in due_time_sources]
        return min((moment for moment in due if moment is not None), default=None)

    # -- driving runs --------------------------------------------------------------

    def start(
        self,
        workflow_type: str,
        input: dict[str, Any],
        *,
        started_by: Any = None,
        idempotency_key: str | None = None,
        correlation_id: str = "",
    ) -> WorkflowRun:
        """Start a run of the latest version and settle; return the run as it stands."""
        self._moved = True
        with as_if_committed():
            run, _ = engine.start_workflow(
                workflow_type=workflow_type,
                input=input,
                started_by=started_by,
                idempotency_key=idempotency_key,
                correlation_id=correlation_id,
                now=self.now,
            )
        self.settle()
        return self.refresh(run)

    def settle(self) -> None:
        """Run what workers and the sweep would run now, until nothing moves.

        Each round executes every scheduled step once (as workers would on their
        messages) and runs the sweep at the kit's clock. An error an activity raises
        is the engine's to handle (a retry, a failure); an error in the engine, a
        node hook or the sweep fails the test.
        """
        for _ in range(self.max_rounds):
            moved = False
            scheduled = StepRun.objects.filter(state=StepState.SCHEDULED).order_by("id")
            for step_id in scheduled.values_list("id", flat=True):
                moved |= self._execute(step_id)
            with as_if_committed():
                counts = engine.sweep(now=self.now)
            if counts.get("failed_runs"):
                raise AssertionError(
                    f"the sweep could not handle {counts['failed_runs']} run(s) at {self.now}; "
                    "its log (baton.engine, sweep.run_failed) has the traceback"
                )
            moved |= any(count for name, count in counts.items() if name != "failed_runs")
            if not moved:
                return
        raise RunDidNotSettle(f"runs still moving after {self.max_rounds} rounds at {self.now}")

    def _execute(self, step_id: int) -> bool:
        before = StepRun.objects.values_list("state", "attempt").get(pk=step_id)
        with as_if_committed():
            engine.execute_step(step_id=step_id, now=self.now)
        return StepRun.objects.values_list("state", "attempt").get(pk=step_id) != before

    def signal(
        self,
        run: WorkflowRun,
        name: str,
        payload: dict[str, Any] | None = None,
        *,
        signal_id: str | None = None,
    ) -> WorkflowRun:
        """Send a signal to the run, as the API would, and settle."""
        with as_if_committed():
            engine.signal_run(
                run_id=run.pk, name=name, payload=payload, signal_id=signal_id, now=self.now
            )
        self.settle()
        return self.refresh(run)

    def query(self, run: WorkflowRun, name: str) -> Any:
        """Return the answer of the run's query `name`, as the API would (nothing moves).

        A query that fails raises `queries.QueryFailed`, one the type lacks `UnknownQuery`.
        """
        return queries.query_run(run=self.refresh(run), name=name)

    def update(
        self,
        run: WorkflowRun,
        name: str,
        payload: dict[str, Any] | None = None,
        *,
        update_id: str | None = None,
    ) -> Any:
        """Send the update `name`, as the API would, settle, and return the handler's answer.

        A refusal raises the engine's error, whose message is the API's answer:
        `InvalidUpdate` (422), `UpdateNotAccepted` or `RunAlreadyEnded` (409), `UnknownUpdate`.
        """
        with as_if_committed():
            answer = engine.update_run(
                run_id=run.pk, name=name, payload=payload or {}, update_id=update_id, now=self.now
            )
        self.settle()
        return answer.result

    def signal_by_key(
        self,
        workflow_type: str,
        name: str,
        payload: dict[str, Any] | None = None,
        *,
        correlation_id: str | None = None,
        key: dict[str, Any] | None = None,
        signal_id: str | None = None,
        start_input: dict[str, Any] | None = None,
        started_by: Any = None,
    ) -> WorkflowRun:
        """Signal the one live run of the type with the correlation id or the searchable
        field (`key={"order_id": "A-1"}`), or start it with `start_input`, as `POST
        /signals` would; settle and return the run. A refusal raises `business_keys`'
        error (`NoLiveRun`, `AmbiguousKey`, `InvalidKey`)."""
        if (correlation_id is None) == (key is None) or (key is not None and len(key) != 1):
            raise ValueError("give either correlation_id or key with one field, not both")
        field, value = (
            (business_keys.CORRELATION_ID, correlation_id)
            if key is None
            else next(iter(key.items()))
        )
        self._moved = True
        with as_if_committed():
            keyed = business_keys.signal_by_key(
                key=business_keys.BusinessKey(workflow_type, field, value),
                name=name,
                payload=payload,
                signal_id=signal_id,
                start_input=start_input,
                started_by=started_by,
                now=self.now,
            )
        self.settle()
        return WorkflowRun.objects.get(pk=keyed.run_id)

    def cancel(self, run: WorkflowRun) -> WorkflowRun:
        """Cancel the run (its completed steps are undone) and settle."""
        with as_if_committed():
            engine.cancel_run(run_id=run.pk, now=self.now)
        self.settle()
        return self.refresh(run)

    # -- replacing activities --------------------------------------------------------

    def replace_activity(
        self,
        workflow_type: str,
        node: str,
        run: Callable[[ActivityContext], Any],
        *,
        compensate: Callable[[ActivityContext], Any] | None = None,
        version: int | None = None,
    ) -> ActivityCalls:
        """Run `run` (and `compensate`, if given) instead of the activity `node` until the
        test ends; return a record of its calls. The rest of the definition is unchanged.
        For a map over an activity, `run` is what each item runs."""
        definition = registry.get(workflow_type, version)
        original = definition.activity(node)
        calls = ActivityCalls(node=node)
        undo = compensate if compensate is not None else original.compensation
        new_undo = _recorded(undo, calls.undos) if undo is not None else original.compensate
        replaced: Node
        if isinstance(mapped := definition.node(node), Map):
            replaced = replace(mapped, activity=_recorded(run, calls.runs), compensate=new_undo)
        else:
            replaced = replace(original, run=_recorded(run, calls.runs), compensate=new_undo)
        self._substitute(definition, replaced)
        return calls

    def spy(self, workflow_type: str, node: str, *, version: int | None = None) -> ActivityCalls:
        """Record the calls of the real activity `node` (and its compensation), changing nothing."""
        original = registry.get(workflow_type, version).activity(node)
        return self.replace_activity(workflow_type, node, original.run, version=version)

    def _substitute(self, definition: Workflow, node: Node) -> None:
        nodes = tuple(node if each.name == node.name else each for each in definition.nodes)
        self._replacements.enter_context(registry.substituted(replace(definition, nodes=nodes)))

    def close(self) -> None:
        """Put the registered definitions back as they were."""
        self._replacements.close()

    # -- looking at what happened ------------------------------------------------------

    def refresh(self, run: WorkflowRun) -> WorkflowRun:
        return WorkflowRun.objects.get(pk=run.pk)

    def path(self, run: WorkflowRun) -> list[str]:
        """The nodes the run entered, in order (parallel branches in the order they began;
        a map once, not once per item)."""
        forward = run.steps.filter(kind=StepKind.FORWARD, item__isnull=True)
        return list(forward.order_by("id").values_list("node", flat=True))

    def undone(self, run: WorkflowRun) -> list[str]:
        """The nodes whose compensation succeeded, in the order they were undone (a map's
        node once per item undone)."""
        return list(
            run.steps.filter(kind=StepKind.COMPENSATION, state=StepState.SUCCEEDED)
            .order_by("finished_at", "id")
            .values_list("node", flat=True)
        )

    def timeline(self, run: WorkflowRun) -> list[tuple[datetime, str, str]]:
        """The run's events as (time, node, kind), oldest first."""
        return list(
            StepEvent.objects.filter(run=run).order_by("at", "id").values_list("at", "node", "kind")
        )

    def assert_path(self, run: WorkflowRun, *nodes: str) -> None:
        """Fail, showing both, unless the run entered exactly `nodes` in this order."""
        taken = self.path(run)
        assert taken == list(nodes), f"the run took {taken}, not {list(nodes)}"

    def assert_state(self, run: WorkflowRun, state: RunState | str) -> WorkflowRun:
        """Fail, saying where it stands and its error, unless the run is in `state`."""
        current = self.refresh(run)
        assert current.state == state, (
            f"the run is {current.state}, not {state}; path {self.path(current)}"
            + (f", error {current.error}" if current.error else "")
        )
        return current


# Other due times the kit walks the clock through, besides the steps' own: each returns
# the earliest one after `now`, or None. `approvals.testing` adds the human tasks'.
due_time_sources: list[Callable[[datetime], datetime | None]] = []


def _recorded(
    function: Callable[[ActivityContext], Any], calls: list[ActivityContext]
) -> Callable[[ActivityContext], Any]:
    def activity(context: ActivityContext) -> Any:
        calls.append(context)
        return function(context)

    activity.__name__ = getattr(function, "__name__", "activity")
    return activity


@contextmanager
def as_if_committed() -> Iterator[None]:
    """Run the on-commit work of what the block did, as its commit would have.

    Under pytest-django's `db` fixture the test's transaction never commits, so the
    emails and other effects use cases send on commit would never go out. Run them
    here, once, and drop them from the test's transaction. (With `transactional_db`
    the commits are real and Django runs them itself.)
    """
    if not connection.in_atomic_block:
        yield
        return
    start = len(connection.run_on_commit)
    try:
        yield
    finally:
        while len(connection.run_on_commit) > start:
            pending = connection.run_on_commit[start:]
            del connection.run_on_commit[start:]
            for _savepoints, callback, robust in pending:
                if not robust:
                    callback()
                    continue
                try:
                    callback()
                except Exception:
                    logger.exception("testing.on_commit_failed")


@contextmanager
def kept_in_process(environment: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch):
    """Yield `environment` with its steps run by the kit, never sent to a broker; activities
    replaced in the test are put back at its end."""
    monkeypatch.setattr(work, "send_steps", _kept_in_process)
    try:
        yield environment
    finally:
        environment.close()


@pytest.fixture
def workflow_env(db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkflowEnvironment]:
    """A WorkflowEnvironment on the test database, its clock at DEFAULT_START.

    Steps are run by the kit, never sent to a broker; activities replaced in the
    test are put back at its end.
    """
    with kept_in_process(WorkflowEnvironment(), monkeypatch) as env:
        yield env


def _kept_in_process(step_ids: list[int], **_options: Any) -> None:
    """The kit runs scheduled steps itself (`settle`); the database says which."""
