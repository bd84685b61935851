"""The straight path of a step (workflows.engine.straight): one statement, the same rows.

An activity that succeeded and whose next node is an activity is recorded by one
compiled statement; everything else goes the general way. Either way the database
ends up holding the same rows.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Concat
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.measure import counting
from workflows import engine, personal, registry
from workflows.dsl import Activity, Join, Parallel, Workflow
from workflows.engine import execute, straight
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.django_db

# What differs between two runs however alike they are.
_OWN = {"id", "run_id", "step_id", "lease_token", "trace_context", "created_at", "updated_at"}


def _rows(run: WorkflowRun) -> dict[str, list[dict]]:
    def values(row) -> dict:
        return {
            field.attname: _alike(getattr(row, field.attname))
            for field in row._meta.concrete_fields
            if field.attname not in _OWN
        }

    run.refresh_from_db()
    return {
        "run": [values(run)],
        "steps": [values(step) for step in run.steps.order_by("id")],
        "events": [values(event) for event in StepEvent.objects.filter(run=run).order_by("id")],
    }


def _alike(value):
    """The value, less the number the test services give each effect (counted across runs),
    its sealed personal values opened (each seal is random: the values are what match)."""
    if isinstance(value, dict):
        return {key: personal.reveal(item) for key, item in value.items() if key != "effect_id"}
    return value


@pytest.fixture
def general_way(monkeypatch):
    """Record every outcome the general way (the straight path never applies)."""

    def apply():
        monkeypatch.setattr(straight, "plan_for", lambda definition, step: None)

    return apply


class TestTheSameRows:
    @pytest.mark.parametrize("eager_steps", [0, 5])
    def test_a_run_of_remote_steps(
        self, start, drive, order_input, general_way, settings, eager_steps
    ):
        settings.BATON_EAGER_STEPS = eager_steps
        now = timezone.now()
        straight_run = drive(start("order", order_input(), now=now), now=now)
        general_way()
        general_run = drive(start("order", order_input(), now=now), now=now)

        assert straight_run.state == RunState.SUCCEEDED
        assert _rows(straight_run) == _rows(general_run)

    def test_a_local_step_claimed_inside_the_record(self, start, drive, general_way):
        now = timezone.now()
        straight_run = drive(start("remote_then_local", now=now), now=now)
        general_way()
        general_run = drive(start("remote_then_local", now=now), now=now)

        assert straight_run.state == RunState.SUCCEEDED
        assert _rows(straight_run) == _rows(general_run)


class TestWhatGoesStraight:
    def test_an_activity_followed_by_an_activity_or_ending_the_run(self, start, order_input):
        definition = registry.get("order")
        run = start("order", order_input())

        def plan(node: str):
            return straight.plan_for(definition, StepRun(run=run, node=node))

        assert plan("validate").next.name == "reserve_inventory"
        assert plan("ship").next.name == "notify_customer"
        assert plan("notify_customer").next is None  # the run's last step ends it

    @pytest.mark.parametrize(
        "options", [{"queue": "payments"}, {"concurrency": 1}, {"rate_limit": "2/m"}]
    )
    def test_not_a_next_activity_with_a_queue_of_its_own_or_limits(self, options):
        def call(context):
            return None

        definition = Workflow(
            name="test_straight_then_limited",
            version=1,
            start="prepare",
            nodes=(
                Activity("prepare", run=call, mutating=False, next="call"),
                Activity("call", run=call, mutating=False, **options),
            ),
        )

        assert straight.plan_for(definition, StepRun(node="prepare")) is None

    def test_a_step_recorded_straight_costs_one_statement(self, start, order_input):
        run = start("order", order_input())
        claim = execute.claim_step(run.steps.get().pk, now=timezone.now())

        with CaptureQueriesContext(connection) as queries:
            execute.record_outcome(claim, execute.Outcome(result={"ok": True}), now=timezone.now())

        [statement] = [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]
        assert statement.startswith(f"SELECT * FROM {straight.function().name}(")

    def test_without_functions_it_is_the_statement_itself(self, start, order_input, settings):
        settings.BATON_DB_FUNCTIONS = False
        run = start("order", order_input())
        claim = execute.claim_step(run.steps.get().pk, now=timezone.now())

        with CaptureQueriesContext(connection) as queries:
            execute.record_outcome(claim, execute.Outcome(result={"ok": True}), now=timezone.now())

        [statement] = [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]
        assert statement.startswith("WITH run AS (SELECT ")
        assert "FOR UPDATE" in statement


@pytest.mark.django_db(transaction=True)
class TestWhatAStepCosts:
    def test_a_remote_step_is_two_commits_in_two_round_trips(self, start, order_input):
        run = start("order", order_input())
        step_id = run.steps.get().pk

        with counting() as counts:
            engine.execute_step(step_id=step_id)

        # The claim (a function that sets its commit asynchronous and runs the UPDATE),
        # then the record: one statement that commits as it ends, with no BEGIN or
        # COMMIT of its own. (3 statements before the functions: the claim's SET LOCAL.)
        assert (counts.statements, counts.commits, counts.round_trips) == (2, 2, 2)
        assert run.steps.get(node="reserve_inventory").state == StepState.SCHEDULED

    def test_a_chain_of_local_steps_is_one_commit_a_step_and_one_for_the_claim(self, start):
        run = start("remote_then_local")
        step_id = run.steps.get().pk

        with counting() as counts:
            engine.execute_step(step_id=step_id)

        # remote: claim, and its record claiming `local`; local: its record, which ends
        # the run in one statement too.
        assert counts.commits == 3
        assert counts.round_trips == 1 + 1 + 1
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED


class TestItMatchesOnlyTheStraightCase:
    def _claimed(self, start, order_input):
        run = start("order", order_input())
        claim = execute.claim_step(run.steps.get().pk, now=timezone.now())
        plan = straight.plan_for(registry.get("order"), claim.step)
        return run, claim, plan

    def _record(self, claim, plan, **overrides):
        now = overrides.pop("now", timezone.now())
        values = {
            "step_id": claim.step_id,
            "run_id": claim.run_id,
            "lease_token": claim.token,
            "started_at": claim.started_at,
            "result": {"ok": True},
            "round": 0,
            "now": now,
            "claim_token": None,
            "due_at": now + timedelta(minutes=1),
            "holder": "",
            **overrides,
        }
        return straight.record(plan, **values)

    def _unchanged(self, run):
        assert list(run.steps.values_list("node", "state")) == [("validate", StepState.RUNNING)]
        assert not StepEvent.objects.filter(run=run, step__isnull=False).exists()

    def test_not_an_attempt_that_lost_its_lease(self, start, order_input):
        run, claim, plan = self._claimed(start, order_input)

        assert self._record(claim, plan, lease_token=uuid.uuid4()) is None
        self._unchanged(run)

    def test_not_an_attempt_whose_lease_expired(self, start, order_input):
        run, claim, plan = self._claimed(start, order_input)

        assert self._record(claim, plan, now=timezone.now() + timedelta(days=1)) is None
        self._unchanged(run)

    @pytest.mark.parametrize("state", [RunState.PAUSED, RunState.CANCELLING])
    def test_not_a_run_that_does_not_move_forward(self, start, order_input, state):
        run, claim, plan = self._claimed(start, order_input)
        WorkflowRun.objects.filter(pk=run.pk).update(state=state)

        assert self._record(claim, plan) is None
        self._unchanged(run)

    def test_a_waiting_run_wakes(self, start, order_input):
        run, claim, plan = self._claimed(start, order_input)
        WorkflowRun.objects.filter(pk=run.pk).update(state=RunState.WAITING)

        recorded = self._record(claim, plan)

        run.refresh_from_db()
        assert run.state == RunState.RUNNING
        following = StepRun.objects.get(pk=recorded.next_step_id)
        assert (following.node, following.state) == ("reserve_inventory", StepState.SCHEDULED)
        assert list(
            StepEvent.objects.filter(run=run, step__isnull=False).values_list("kind", flat=True)
        ) == [
            EventKind.STARTED,
            EventKind.COMPLETED,
        ]


def _last_step_claimed(start) -> tuple[WorkflowRun, execute.Claim]:
    """A `remote_then_local` run whose last step (`local`) is claimed, as its record left it."""
    run = start("remote_then_local")
    first = execute.claim_step(run.steps.get().pk, now=timezone.now())
    claim = execute.record_outcome(first, execute.Outcome(result="remote"), now=timezone.now())
    assert claim is not None
    assert claim.step.node == "local"
    return run, claim


class TestTheRunsLastStep:
    def test_is_recorded_with_the_runs_end_in_one_statement(self, start):
        run, claim = _last_step_claimed(start)

        with CaptureQueriesContext(connection) as queries:
            following = execute.record_outcome(
                claim, execute.Outcome(result={"last": 1}), now=timezone.now()
            )

        assert following is None
        [statement] = [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]
        assert statement.startswith(f"SELECT * FROM {straight.end_function().name}(")
        run.refresh_from_db()
        assert (run.state, run.result) == (RunState.SUCCEEDED, {"last": 1})
        assert list(StepEvent.objects.filter(run=run).order_by("id").values_list("kind", "node"))[
            -3:
        ] == [
            (EventKind.STARTED, "local"),
            (EventKind.COMPLETED, "local"),
            (EventKind.COMPLETED, ""),
        ]

    def test_without_functions_it_is_the_statement_itself(self, start, settings):
        settings.BATON_DB_FUNCTIONS = False
        run, claim = _last_step_claimed(start)

        with CaptureQueriesContext(connection) as queries:
            execute.record_outcome(claim, execute.Outcome(result=None), now=timezone.now())

        [statement] = [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]
        assert statement.startswith("WITH run AS (SELECT ")
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED

    def test_the_run_end_hooks_hear_of_the_ended_run(self, start, monkeypatch):
        heard = []
        monkeypatch.setattr(
            registry,
            "_run_end_hooks",
            [lambda *, ended, now: heard.extend((run.pk, run.state, kind) for run, kind in ended)],
        )
        run, claim = _last_step_claimed(start)

        execute.record_outcome(claim, execute.Outcome(result=None), now=timezone.now())

        assert heard == [(run.pk, RunState.SUCCEEDED, EventKind.COMPLETED)]

    def test_a_late_result_goes_the_general_way_undoing_what_the_hooks_wrote(
        self, start, monkeypatch
    ):
        def note_end(*, ended, now):
            for run, _ in ended:
                WorkflowRun.objects.filter(pk=run.pk).update(correlation_id="ended")

        monkeypatch.setattr(registry, "_run_end_hooks", [note_end])
        run, claim = _last_step_claimed(start)

        later = timezone.now() + timedelta(days=1)  # past the attempt's lease
        execute.record_outcome(claim, execute.Outcome(result=None), now=later)

        run.refresh_from_db()
        assert (run.state, run.correlation_id) == (RunState.RUNNING, "")
        assert StepEvent.objects.filter(run=run, kind=EventKind.LATE_RESULT_DISCARDED).exists()

    def test_not_in_a_definition_whose_joins_race(self):
        def call(context):
            return None

        definition = Workflow(
            name="test_straight_racing_join",
            version=1,
            start="fork",
            nodes=(
                Parallel("fork", branches=("a", "b"), join="meet"),
                Activity("a", run=call, mutating=False, next="meet"),
                Activity("b", run=call, mutating=False, next="meet"),
                Join("meet", wait_for="any", next="last"),
                Activity("last", run=call, mutating=False),
            ),
        )

        assert definition.has_racing_joins
        assert straight.plan_for(definition, StepRun(node="last")) is None


@pytest.mark.django_db(transaction=True)
class TestTheRunsLastStepOnItsOwn:
    def test_a_run_end_hook_that_writes_commits_with_the_end_or_not_at_all(
        self, start, monkeypatch
    ):
        def note_end(*, ended, now):
            for run, _ in ended:  # a write: it opens the transaction (BEGIN)
                WorkflowRun.objects.filter(pk=run.pk).update(
                    correlation_id=Concat("correlation_id", Value("+"))
                )

        monkeypatch.setattr(registry, "_run_end_hooks", [note_end])
        run, claim = _last_step_claimed(start)
        refused = replace(claim, token=uuid.uuid4())  # an attempt that lost its lease

        with counting() as counts:
            execute.record_outcome(claim, execute.Outcome(result=None), now=timezone.now())
            execute.record_outcome(refused, execute.Outcome(result=None), now=timezone.now())

        # The hook's write opened the transaction and the end joined it; the refused record
        # rolled the hook's write back and went the general way, which told no hook.
        assert counts.commits == 2
        run.refresh_from_db()
        assert (run.state, run.correlation_id) == (RunState.SUCCEEDED, "+")
        assert StepEvent.objects.filter(run=run, kind=EventKind.LATE_RESULT_DISCARDED).exists()
