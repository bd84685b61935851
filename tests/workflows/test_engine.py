"""The engine's use cases, driven in this process against the real database.

Steps run through `engine.execute_step` exactly as the Celery task calls it; the
clock for due times is passed to `engine.sweep(now=...)`. tests/e2e proves the
same behaviour with real worker processes over a real broker.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import at_once, steps_by_node
from tests.workflows.definitions import step
from workflows import engine, personal, registry
from workflows.activity import ActivityCancelled
from workflows.dsl import Activity, InvalidInput, Join, NoCompensation, Parallel, Workflow
from workflows.engine import batch, execute, work
from workflows.examples.models import ServiceEffect
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun
from workflows.registry import UnknownWorkflow
from workflows.states import EventKind, RunState, StepKind, StepState

pytestmark = pytest.mark.django_db


def _statements(queries: CaptureQueriesContext) -> list[str]:
    """The first word of each statement sent, savepoints aside, batched ones included."""
    return [
        statement.split()[0]
        for query in queries
        if "SAVEPOINT" not in query["sql"]
        for statement in query["sql"].split(batch.SEPARATOR)
    ]


def _round_trips(queries: CaptureQueriesContext) -> int:
    return sum("SAVEPOINT" not in query["sql"] for query in queries)


def later(seconds: float = 3600) -> timezone.datetime:
    return timezone.now() + timedelta(seconds=seconds)


def sweep_until_quiet(run: WorkflowRun, drive, *, seconds: float = 3600) -> WorkflowRun:
    """Fire everything due within `seconds` and run what it scheduled, until nothing is left."""
    for _ in range(20):
        engine.sweep(now=later(seconds))
        drive(run)
        if not run.steps.filter(state__in=[StepState.SCHEDULED, StepState.RETRY_WAIT]).exists():
            break
    run.refresh_from_db()
    return run


class TestStartWorkflow:
    def test_creates_the_run_and_schedules_the_first_step(self, start, order_input):
        run = start("order", order_input(), correlation_id="shop-7")

        assert run.state == RunState.RUNNING
        assert run.correlation_id == "shop-7"
        assert [(s.node, s.state) for s in run.steps.all()] == [("validate", StepState.SCHEDULED)]

    def test_sends_the_first_step_to_a_worker_on_commit(
        self, order_input, django_capture_on_commit_callbacks, monkeypatch
    ):
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)

        with django_capture_on_commit_callbacks(execute=True):
            run, _ = engine.start_workflow(workflow_type="order", input=order_input())

        assert sent == [run.steps.get().pk]

    def test_a_start_without_a_key_writes_its_run_step_and_event_in_one_round_trip(
        self, order_input
    ):
        with CaptureQueriesContext(connection) as starting:
            run, _ = engine.start_workflow(workflow_type="order", input=order_input())

        # One call of the start's function, which inserts the three rows (three
        # statements before it).
        assert _statements(starting) == ["SELECT"]
        assert _round_trips(starting) == 1
        run.refresh_from_db()
        assert (run.state, run.created_at is not None) == (RunState.RUNNING, True)
        assert list(run.events.values_list("kind", flat=True)) == [EventKind.STARTED]
        assert [(s.node, s.state) for s in run.steps.all()] == [("validate", StepState.SCHEDULED)]

    def test_without_functions_a_start_sends_its_three_inserts_together(
        self, order_input, settings
    ):
        settings.BATON_DB_FUNCTIONS = False

        with CaptureQueriesContext(connection) as starting:
            run, _ = engine.start_workflow(workflow_type="order", input=order_input())

        assert _statements(starting) == ["INSERT", "INSERT", "INSERT"]
        assert _round_trips(starting) == 1
        assert list(run.events.values_list("kind", flat=True)) == [EventKind.STARTED]

    def test_a_keyed_start_writes_its_run_first_in_case_the_key_is_taken(self, order_input):
        with CaptureQueriesContext(connection) as starting:
            engine.start_workflow(workflow_type="order", input=order_input(), idempotency_key="k")

        assert _statements(starting) == ["INSERT", "INSERT", "INSERT"]
        assert _round_trips(starting) == 2

    def test_invalid_input_is_refused_and_nothing_is_written(self, order_input):
        with pytest.raises(InvalidInput) as raised:
            engine.start_workflow(workflow_type="order", input=order_input(items=[]))

        assert raised.value.errors[0]["field"] == "items"
        assert WorkflowRun.objects.count() == 0

    def test_unknown_type_is_refused_by_name(self):
        with pytest.raises(UnknownWorkflow, match="Unknown workflow type 'nope'"):
            engine.start_workflow(workflow_type="nope", input={})

    def test_same_idempotency_key_returns_the_first_run(self, order_input):
        first, created_first = engine.start_workflow(
            workflow_type="order", input=order_input(), idempotency_key="order-A-1001"
        )
        second, created_second = engine.start_workflow(
            workflow_type="order", input=order_input(), idempotency_key="order-A-1001"
        )

        assert (created_first, created_second) == (True, False)
        assert second.pk == first.pk
        assert WorkflowRun.objects.count() == 1
        assert StepRun.objects.count() == 1

    def test_runs_stay_on_the_version_they_started_with(self, start):
        run = start("test_linear", {})
        newer = Workflow(
            name="test_linear",
            version=2,
            start="only",
            nodes=(Activity("only", run=lambda c: None, compensate=NoCompensation("test")),),
        )
        registry.register(newer)
        try:
            later_run = start("test_linear", {})
        finally:
            registry.unregister(newer)

        assert (run.workflow_version, later_run.workflow_version) == (1, 2)
        assert run.steps.get().node == "first"


@pytest.mark.django_db(transaction=True)
class TestConcurrentStart:
    def test_two_starts_with_one_key_at_once_make_one_run(self, order_input):
        def start_once():
            return engine.start_workflow(
                workflow_type="order", input=order_input(), idempotency_key="same-key"
            )

        results = at_once(start_once, start_once)

        assert WorkflowRun.objects.count() == 1
        assert sorted(created for _, created in results) == [False, True]
        assert len({run.pk for run, _ in results}) == 1


@pytest.mark.django_db(transaction=True)
class TestClaimOnItsOwn:
    """Outside any transaction (as on a worker), the claim commits without waiting for
    the disk: losing it in a crash only repeats the attempt, which the record's lease
    fence and the sweep already handle."""

    def test_a_claim_commits_asynchronously_in_its_one_round_trip(self, start, order_input):
        step = start("order", order_input()).steps.get()

        with CaptureQueriesContext(connection) as claiming:
            claim = execute.claim_step(step.pk, now=timezone.now())

        # One call of the claim's function, told it runs alone (its last argument):
        # it sets synchronous_commit off for its own transaction.
        assert claim is not None
        assert _statements(claiming) == ["SELECT"]
        assert _round_trips(claiming) == 1
        assert execute.claim_function().name in claiming[0]["sql"]
        assert claiming[0]["sql"].endswith("true::boolean)")
        # Committed, and the setting ended with the claim's own transaction.
        assert connection.get_autocommit()
        assert not connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)
        assert StepRun.objects.get(pk=claim.step_id).state == StepState.RUNNING

    def test_the_claims_statement_sets_its_commit_asynchronous_without_functions(
        self, start, order_input, settings
    ):
        settings.BATON_DB_FUNCTIONS = False
        step = start("order", order_input()).steps.get()

        with CaptureQueriesContext(connection) as claiming:
            claim = execute.claim_step(step.pk, now=timezone.now())

        assert claim is not None
        assert _statements(claiming) == ["SET", "WITH"]
        assert _round_trips(claiming) == 1
        assert claiming[0]["sql"].startswith("SET LOCAL synchronous_commit TO OFF")
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)
        assert StepRun.objects.get(pk=claim.step_id).state == StepState.RUNNING

    def test_a_claim_inside_a_callers_transaction_commits_as_the_caller_does(
        self, start, order_input
    ):
        step = start("order", order_input()).steps.get()

        with transaction.atomic(), CaptureQueriesContext(connection) as claiming:
            claim = execute.claim_step(step.pk, now=timezone.now())
            with connection.cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                inside = cursor.fetchone()

        assert claim is not None
        assert _statements(claiming) == ["SELECT", "SHOW"]
        assert claiming[0]["sql"].endswith("false::boolean)")
        assert inside == ("on",)


class TestEagerDispatch:
    """A worker that records a step claims the remote activity after it itself (as
    Temporal's eager activity execution), up to BATON_EAGER_STEPS in a row."""

    def test_a_worker_runs_the_remote_steps_that_follow_without_messages(
        self, start, settings, django_capture_on_commit_callbacks, monkeypatch
    ):
        settings.BATON_EAGER_STEPS = 10
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)
        run = start("test_linear", {})

        with django_capture_on_commit_callbacks(execute=True):
            engine.execute_step(step_id=run.steps.get().pk)

        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED
        assert sent == []
        assert [(s.node, s.attempt) for s in run.steps.order_by("pk")] == [
            ("first", 1),
            ("second", 1),
            ("third", 1),
        ]
        second = run.steps.get(node="second")
        assert list(second.events.values_list("kind", flat=True)) == [
            EventKind.STARTED,
            EventKind.COMPLETED,
        ]

    def test_past_the_limit_the_next_step_goes_out_as_a_message(
        self, start, settings, django_capture_on_commit_callbacks, monkeypatch
    ):
        settings.BATON_EAGER_STEPS = 1
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)
        run = start("test_linear", {})

        with django_capture_on_commit_callbacks(execute=True):
            engine.execute_step(step_id=run.steps.get().pk)

        steps = steps_by_node(run)
        assert (steps["first"].state, steps["second"].state) == (StepState.SUCCEEDED,) * 2
        assert steps["third"].state == StepState.SCHEDULED
        assert sent == [steps["third"].pk]

    def test_with_no_eager_steps_every_remote_step_goes_out_as_a_message(
        self, start, django_capture_on_commit_callbacks, monkeypatch
    ):
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)
        run = start("test_linear", {})

        with django_capture_on_commit_callbacks(execute=True):
            engine.execute_step(step_id=run.steps.get().pk)

        assert steps_by_node(run)["second"].state == StepState.SCHEDULED
        assert sent == [steps_by_node(run)["second"].pk]

    def test_parallel_branches_past_the_first_still_go_out_as_messages(
        self, start, settings, django_capture_on_commit_callbacks, monkeypatch
    ):
        settings.BATON_EAGER_STEPS = 10
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)
        fan_out = Workflow(
            name="test_then_fan_out",
            version=1,
            start="first",
            nodes=(
                step("first", "fan_out"),
                Parallel("fan_out", branches=("left", "right"), join="together"),
                step("left", "together"),
                step("right", "together"),
                Join("together", wait_for="all"),
            ),
        )
        registry.register(fan_out)
        try:
            run = start("test_then_fan_out", {})
            with django_capture_on_commit_callbacks(execute=True):
                engine.execute_step(step_id=run.steps.get().pk)
        finally:
            registry.unregister(fan_out)

        steps = steps_by_node(run)
        # One branch ran here; the other waits for a worker of its own.
        assert sorted(steps[node].state for node in ("left", "right")) == sorted(
            [StepState.SUCCEEDED, StepState.SCHEDULED]
        )
        [waiting] = [steps[node] for node in ("left", "right") if steps[node].state == "scheduled"]
        assert sent == [waiting.pk]

    def test_a_paused_run_takes_no_next_step_eagerly_or_locally(self, start, settings):
        settings.BATON_EAGER_STEPS = 10
        for workflow_type in ("test_linear", "remote_then_local"):
            run = start(workflow_type, {})
            first = run.steps.get()
            claim = execute.claim_step(first.pk, now=timezone.now())
            engine.pause_run(run_id=run.pk)

            after = execute.record_outcome(
                claim, execute.Outcome(result="done"), now=timezone.now(), eager=True
            )

            assert after is None
            following = run.steps.exclude(pk=first.pk).get()
            assert following.state == StepState.SCHEDULED


class TestExecuteStep:
    def test_happy_path_runs_every_step_once_and_succeeds(self, start, drive, order_input, effects):
        run = drive(start("order", order_input()))

        assert run.state == RunState.SUCCEEDED
        assert effects(run) == {
            "inventory.reserve": 1,
            "payments.charge": 1,
            "shipping.ship": 1,
            "notifications.notify": 1,
        }
        assert personal.reveal(run.result)["to"] == "ada@example.com"
        assert all(step.state == StepState.SUCCEEDED for step in run.steps.all())

    def test_a_redelivered_message_for_a_finished_step_does_nothing(
        self, start, drive, order_input, effects
    ):
        run = drive(start("order", order_input()))
        charge = run.steps.get(node="charge_payment")

        engine.execute_step(step_id=charge.pk)

        charge.refresh_from_db()
        assert charge.attempt == 1
        assert effects(run)["payments.charge"] == 1
        assert ServiceEffect.objects.get(action="charge").requests_seen == 1

    def test_a_message_for_a_deleted_step_is_dropped(self):
        engine.execute_step(step_id=999_999)

        assert StepEvent.objects.count() == 0

    def test_each_step_gets_a_stable_idempotency_key(self, start, drive, order_input):
        run = drive(start("order", order_input()))

        keys = ServiceEffect.objects.values_list("idempotency_key", flat=True)
        assert set(keys) == {
            f"{run.pk}:reserve_inventory",
            f"{run.pk}:charge_payment",
            f"{run.pk}:ship",
            f"{run.pk}:notify_customer",
        }

    def test_local_activity_runs_on_the_same_worker_without_a_message(
        self, start, order_input, monkeypatch
    ):
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)
        run = start("order", order_input())
        for node in ("validate", "reserve_inventory", "charge_payment"):
            engine.execute_step(step_id=run.steps.get(node=node).pk)
        ship = run.steps.get(node="ship")

        engine.execute_step(step_id=ship.pk)

        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED
        assert run.steps.get(node="notify_customer").state == StepState.SUCCEEDED

    def test_a_local_step_is_claimed_inside_the_record_of_the_step_before_it(self, start):
        run = start("remote_then_local")
        remote = run.steps.get()

        with CaptureQueriesContext(connection) as queries:
            engine.execute_step(step_id=remote.pk)

        # remote: its claim, then its record, the straight path's one statement, which
        # also inserts `local` already running; local: no claim of its own, only its
        # record, which ends the run: the straight path's end, one statement too.
        assert _statements(queries) == ["SELECT", "SELECT", "SELECT"]
        assert _round_trips(queries) == 1 + 1 + 1
        local = run.steps.get(node="local")
        assert (local.state, local.attempt, local.result) == (StepState.SUCCEEDED, 1, "local")
        assert list(local.events.values_list("kind", flat=True)) == [
            EventKind.STARTED,
            EventKind.COMPLETED,
        ]

    def test_a_step_costs_one_round_trip_to_claim_and_two_to_record(self, start, order_input):
        run = start("order", order_input())
        engine.execute_step(step_id=run.steps.get().pk)
        step = run.steps.get(node="reserve_inventory")

        with CaptureQueriesContext(connection) as claiming:
            claim = execute.claim_step(step.pk, now=timezone.now())
        with CaptureQueriesContext(connection) as recording:
            execute.record_outcome(
                claim, execute.Outcome(result={"reserved": True}), now=timezone.now()
            )

        # Claim: one call of its function, an UPDATE that locks the run in a CTE and
        # starts the step. Record (the next node is an activity: the straight path): one
        # call of its function, a statement that locks the run, finishes this step,
        # inserts its events and the next step. The run row is not rewritten.
        # (Savepoints come from this test's own transaction.)
        assert _statements(claiming) == ["SELECT"]
        assert _statements(recording) == ["SELECT"]
        assert (_round_trips(claiming), _round_trips(recording)) == (1, 1)

    def test_a_claim_holds_the_step_for_its_nodes_first_lease(self, start, order_input):
        run = start("order", order_input())
        step = run.steps.get()
        now = timezone.now()

        claim = execute.claim_step(step.pk, now=now)

        step.refresh_from_db()
        node = registry.get("order").activity(step.node)
        assert (step.state, step.attempt, step.lease_token) == (StepState.RUNNING, 1, claim.token)
        assert (step.started_at, step.due_at) == (now, now + node.timeouts.first_lease)
        # The activity reads the customer's email, which the run's row keeps sealed.
        assert claim.context.input == {**run.input, "customer_email": "ada@example.com"}
        assert run.input["customer_email"] != "ada@example.com"

    def test_a_step_written_before_leases_were_stored_is_still_claimed(self, start, order_input):
        run = start("order", order_input())
        step = run.steps.get()
        StepRun.objects.filter(pk=step.pk).update(lease=None)
        now = timezone.now()

        claim = execute.claim_step(step.pk, now=now)

        step.refresh_from_db()
        node = registry.get("order").activity(step.node)
        assert (step.state, step.lease_token) == (StepState.RUNNING, claim.token)
        assert step.due_at == now + node.timeouts.first_lease
        assert step.lease == node.timeouts.first_lease  # the next claim is one statement

    def test_a_step_whose_definition_this_worker_lacks_is_put_back(
        self, start, order_input, monkeypatch
    ):
        run = start("order", order_input())
        step = run.steps.get()

        def not_deployed_here(run):
            raise UnknownWorkflow(f"{run.workflow_type} v{run.workflow_version} is not deployed")

        monkeypatch.setattr(execute, "definition_of", not_deployed_here)
        with pytest.raises(UnknownWorkflow):
            execute.claim_step(step.pk, now=timezone.now())
        monkeypatch.undo()

        step.refresh_from_db()
        assert (step.state, step.attempt, step.lease_token) == (StepState.SCHEDULED, 0, None)
        claim = execute.claim_step(step.pk, now=timezone.now())
        assert claim is not None
        assert claim.context.attempt == 1

    def test_a_step_of_a_cancelling_run_is_not_claimed(self, start, order_input):
        run = start("order", order_input())
        step = run.steps.get()
        WorkflowRun.objects.filter(pk=run.pk).update(state=RunState.CANCELLING)

        claim = execute.claim_step(step.pk, now=timezone.now())

        step.refresh_from_db()
        assert claim is None
        assert (step.state, step.attempt) == (StepState.SCHEDULED, 0)

    def test_a_result_after_the_lease_was_lost_is_not_recorded(self, start, order_input):
        run = start("order", order_input())
        step = run.steps.get()
        claim = execute.claim_step(step.pk, now=timezone.now())
        engine.sweep(now=later(600))  # the lease expires: a retry is scheduled

        execute.record_outcome(claim, execute.Outcome(result={"late": True}), now=timezone.now())

        step.refresh_from_db()
        assert step.state == StepState.RETRY_WAIT
        assert step.result is None
        assert run.events.filter(kind=EventKind.LEASE_EXPIRED).count() == 1
        assert run.events.filter(kind=EventKind.LATE_RESULT_DISCARDED).count() == 1


class TestRetries:
    def test_a_flaky_service_is_retried_with_backoff_then_succeeds(
        self, start, drive, order_input, effects
    ):
        run = drive(start("order", order_input(simulate={"payment": "flaky"})))
        charge = run.steps.get(node="charge_payment")
        assert charge.state == StepState.RETRY_WAIT
        first_wait = charge.due_at - charge.started_at

        run = sweep_until_quiet(run, drive)

        charge.refresh_from_db()
        assert run.state == RunState.SUCCEEDED
        assert charge.attempt == 3
        assert timedelta(seconds=0.9) < first_wait < timedelta(seconds=1.5)
        assert run.events.filter(node="charge_payment", kind=EventKind.RETRY_SCHEDULED).count() == 2
        assert effects(run)["payments.charge"] == 1
        assert ServiceEffect.objects.get(action="charge").requests_seen == 3

    def test_a_retry_waits_in_the_database_until_it_is_due(self, start, drive, order_input):
        run = drive(start("order", order_input(simulate={"payment": "flaky"})))
        charge = run.steps.get(node="charge_payment")

        engine.sweep(now=charge.due_at - timedelta(milliseconds=10))

        charge.refresh_from_db()
        assert charge.state == StepState.RETRY_WAIT

    def test_attempts_are_bounded_then_the_run_is_undone(self, start, drive, order_input, effects):
        run = drive(start("order", order_input(simulate={"shipping": "fail"})))

        run = sweep_until_quiet(run, drive)

        assert run.state == RunState.COMPENSATED
        assert run.steps.get(node="ship", kind=StepKind.FORWARD).attempt == 4
        assert run.error["node"] == "ship"


class TestCompensation:
    def test_a_declined_payment_undoes_completed_steps_in_reverse_each_once(
        self, start, drive, order_input, effects
    ):
        run = drive(start("order", order_input(simulate={"payment": "decline"})))

        assert run.state == RunState.COMPENSATED
        assert run.error["type"] == "PaymentDeclined"
        assert effects(run) == {"inventory.reserve": 1, "inventory.release": 1}
        assert steps_by_node(run)["reserve_inventory"].state == StepState.COMPENSATED
        assert steps_by_node(run)["charge_payment"].state == StepState.FAILED
        assert "ship" not in steps_by_node(run)

    def test_a_failed_shipment_refunds_then_releases(self, start, drive, order_input):
        run = sweep_until_quiet(
            drive(start("order", order_input(simulate={"shipping": "fail"}))), drive
        )

        undone = run.events.filter(kind=EventKind.COMPENSATED).exclude(node="").order_by("id")
        assert [event.node for event in undone] == ["charge_payment", "reserve_inventory"]
        assert ServiceEffect.objects.filter(action__in=["refund", "release"]).count() == 2

    def test_a_failing_compensation_dead_letters_the_run_with_its_context(
        self, start, drive, order_input
    ):
        failing = order_input(simulate={"shipping": "fail", "refund": "outage"})

        run = sweep_until_quiet(drive(start("order", failing)), drive)

        assert run.state == RunState.DEAD_LETTERED
        assert run.error["node"] == "ship"
        assert run.error["dead_letter"]["node"] == "charge_payment"
        assert run.error["dead_letter"]["compensation_error"]["type"] == "ServiceUnavailable"
        assert steps_by_node(run)["reserve_inventory"].state == StepState.SUCCEEDED

    def test_an_operator_retry_finishes_the_undo(self, start, drive, order_input, effects):
        failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
        run = sweep_until_quiet(drive(start("order", failing)), drive)

        engine.retry_dead_letter(run_id=run.pk)
        run = sweep_until_quiet(drive(run), drive)

        assert run.state == RunState.COMPENSATED
        assert effects(run)["payments.refund"] == 1
        assert effects(run)["inventory.release"] == 1
        assert run.events.filter(kind=EventKind.OPERATOR, detail__action="retried").exists()

    def test_an_operator_resume_skips_the_failed_undo_and_goes_on(
        self, start, drive, order_input, effects
    ):
        failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
        run = sweep_until_quiet(drive(start("order", failing)), drive)

        engine.resume_dead_letter(run_id=run.pk)
        run = drive(run)

        assert run.state == RunState.COMPENSATED
        assert "payments.refund" not in effects(run)
        assert effects(run)["inventory.release"] == 1
        assert (
            run.steps.get(node="charge_payment", kind=StepKind.COMPENSATION).state
            == StepState.SKIPPED
        )

    def test_only_a_dead_lettered_run_can_be_retried(self, start, order_input):
        run = start("order", order_input())

        with pytest.raises(engine.IllegalRunOperation, match="this one is running"):
            engine.retry_dead_letter(run_id=run.pk)


class TestCancel:
    def test_cancelling_a_waiting_run_undoes_its_steps_and_ends_cancelled(
        self, start, drive, effects
    ):
        run = drive(start("test_signalled", {}))
        assert run.state == RunState.WAITING

        engine.cancel_run(run_id=run.pk)
        run = drive(run)

        assert run.state == RunState.CANCELLED
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}
        assert steps_by_node(run)["await_go"].state == StepState.CANCELLED

    def test_no_new_step_starts_after_cancel(self, start, drive, effects):
        run = start("test_linear", {})

        engine.cancel_run(run_id=run.pk)
        run = drive(run)

        assert run.state == RunState.CANCELLED
        assert effects(run) == {}

    def test_a_running_activity_hears_of_it_at_its_next_heartbeat(self, start, order_input):
        run = start("order", order_input())
        engine.execute_step(step_id=run.steps.get().pk)
        claim = execute.claim_step(run.steps.get(node="reserve_inventory").pk, now=timezone.now())

        engine.cancel_run(run_id=run.pk)

        with pytest.raises(ActivityCancelled):
            claim.context.heartbeat()

    def test_a_finished_run_cannot_be_cancelled(self, start, drive, order_input):
        run = drive(start("order", order_input()))

        with pytest.raises(engine.RunAlreadyEnded, match="already ended \\(succeeded\\)"):
            engine.cancel_run(run_id=run.pk)

    def test_an_unknown_run_is_named(self):
        with pytest.raises(engine.RunNotFound):
            engine.cancel_run(run_id="00000000-0000-0000-0000-000000000000")


class TestParallel:
    def test_join_all_waits_for_every_branch(self, start, drive, effects):
        run = start("test_parallel_all", {})
        assert {s.node for s in run.steps.filter(state=StepState.SCHEDULED)} == {"left", "right"}

        engine.execute_step(step_id=run.steps.get(node="left").pk)
        assert run.steps.get(node="together").state == StepState.WAITING
        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert sorted(run.steps.get(node="together").result["arrived"]) == ["left", "right"]
        assert effects(run) == {"test.left": 1, "test.right": 1, "test.after": 1}

    def test_join_any_goes_on_with_the_first_and_cancels_the_rest(self, start, drive, effects):
        run = drive(start("test_parallel_any", {}))

        assert run.state == RunState.SUCCEEDED
        assert steps_by_node(run)["gate"].state == StepState.CANCELLED
        assert "right" not in steps_by_node(run)
        assert effects(run) == {"test.left": 1, "test.after": 1}

    def test_a_failed_branch_undoes_the_other(self, start, drive, effects):
        run = drive(start("test_parallel_all", {"simulate": {"right": "decline"}}))

        assert run.state == RunState.COMPENSATED
        assert effects(run) == {"test.left": 1, "test.undo_left": 1}


class TestBranch:
    @pytest.mark.parametrize(
        ("amount", "taken", "skipped"), [(500, "big", "small"), (5, "small", "big")]
    )
    def test_goes_the_way_the_condition_says(self, start, drive, effects, amount, taken, skipped):
        run = drive(start("test_branching", {"amount": amount}))

        assert run.state == RunState.SUCCEEDED
        assert steps_by_node(run)["is_big"].result == {"took": amount > 100}
        assert effects(run) == {f"test.{taken}": 1}
        assert skipped not in steps_by_node(run)


class TestSignals:
    def test_a_waiting_run_resumes_when_its_signal_arrives(self, start, drive, effects):
        run = drive(start("test_signalled", {}))

        engine.signal_run(run_id=run.pk, name="go", payload={"by": "ops"})
        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert run.results["await_go"] == {"signal": "go", "payload": {"by": "ops"}}
        assert effects(run)["test.went"] == 1

    def test_a_signal_sent_before_the_wait_is_kept_for_it(self, start, drive):
        run = start("test_signalled", {})
        engine.signal_run(run_id=run.pk, name="go", signal_id="early")

        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert Signal.objects.get(signal_id="early").consumed_by.node == "await_go"

    def test_the_same_signal_id_is_accepted_once(self, start, drive):
        run = drive(start("test_signalled", {}))

        _, first = engine.signal_run(run_id=run.pk, name="go", signal_id="s-1")
        _, again = engine.signal_run(run_id=run.pk, name="go", signal_id="s-1")

        assert (first, again) == (True, False)
        assert run.signals.count() == 1

    def test_the_first_of_several_signals_wins_and_leaves_no_wait_behind(
        self, start, drive, effects
    ):
        run = start("test_signalled", {})
        engine.signal_run(run_id=run.pk, name="stop", signal_id="first")
        engine.signal_run(run_id=run.pk, name="go", signal_id="second")

        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert run.results["await_go"]["signal"] == "stop"
        assert not run.steps.filter(state=StepState.WAITING).exists()
        assert Signal.objects.get(signal_id="second").consumed_by is None
        assert "test.went" not in effects(run)

    def test_a_wait_that_times_out_takes_its_timeout_path(self, start, drive, effects):
        run = drive(start("test_signalled", {}))

        run = sweep_until_quiet(run, drive, seconds=301)

        assert run.state == RunState.SUCCEEDED
        assert effects(run)["test.timed_out"] == 1
        assert run.events.filter(kind=EventKind.TIMED_OUT).count() == 1

    def test_a_signal_to_an_ended_run_is_refused(self, start, drive, order_input):
        run = drive(start("order", order_input()))

        with pytest.raises(engine.RunAlreadyEnded):
            engine.signal_run(run_id=run.pk, name="go")


class TestPause:
    def test_a_paused_run_starts_nothing_until_resumed(self, start, drive, effects):
        run = start("test_linear", {})
        engine.pause_run(run_id=run.pk)

        drive(run)
        engine.sweep(now=later(3600))
        assert effects(run) == {}

        engine.resume_run(run_id=run.pk)
        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert effects(run) == {"test.first": 1, "test.second": 1, "test.third": 1}

    def test_a_running_step_finishes_and_is_recorded_while_paused(self, start):
        run = start("test_linear", {})
        claim = execute.claim_step(run.steps.get().pk, now=timezone.now())
        engine.pause_run(run_id=run.pk)

        execute.record_outcome(claim, execute.Outcome(result={"ok": 1}), now=timezone.now())

        run.refresh_from_db()
        assert run.state == RunState.PAUSED
        assert run.steps.get(node="first").state == StepState.SUCCEEDED
        assert run.steps.get(node="second").state == StepState.SCHEDULED


class TestSweep:
    def test_a_lost_message_is_sent_again(self, start, monkeypatch):
        sent = []
        monkeypatch.setattr(work, "send_steps", sent.extend)
        run = start("test_linear", {})
        step = run.steps.get()

        counts = engine.sweep(now=later(31))

        assert counts["steps"] == 1
        assert run.events.filter(kind=EventKind.REDISPATCHED).count() == 1
        step.refresh_from_db()
        assert step.due_at > later(30)

    def test_an_expired_lease_counts_as_a_failed_attempt(self, start):
        run = start("test_linear", {})
        execute.claim_step(run.steps.get().pk, now=timezone.now())

        engine.sweep(now=later(600))

        step = run.steps.get()
        assert step.state == StepState.RETRY_WAIT
        assert step.last_error["type"] == "StartToCloseTimeout"

    def test_a_sleep_fires_when_due(self, start, drive, effects):
        run = drive(start("test_sleeping", {}))
        assert run.state == RunState.WAITING

        run = sweep_until_quiet(run, drive, seconds=2)

        assert run.state == RunState.SUCCEEDED
        assert effects(run) == {"test.wake_up": 1}


@pytest.mark.django_db(transaction=True)
class TestConcurrentSweeps:
    def test_two_sweeps_at_once_fire_each_timer_once(self, start, drive, effects):
        runs = [drive(start("test_signalled", {})) for _ in range(6)]
        when = later(301)

        at_once(lambda: engine.sweep(now=when), lambda: engine.sweep(now=when))

        assert StepEvent.objects.filter(kind=EventKind.TIMED_OUT).count() == 6
        for run in runs:
            assert run.steps.get(node="timed_out").state == StepState.SCHEDULED


class TestConcurrencyLimit:
    def test_runs_past_the_limit_wait_pending_until_a_slot_frees(self, start, drive):
        limited = Workflow(
            name="test_limited",
            version=1,
            start="only",
            concurrency_limit=1,
            nodes=(Activity("only", run=lambda c: 1, compensate=NoCompensation("test")),),
        )
        registry.register(limited)
        try:
            first = start("test_limited", {})
            second = start("test_limited", {})
            assert (first.state, second.state) == (RunState.RUNNING, RunState.PENDING)

            drive(first)
            engine.sweep(now=timezone.now())
            second = drive(second)
        finally:
            registry.unregister(limited)

        assert second.state == RunState.SUCCEEDED


class TestWhereAndWhyAnAttemptFailed:
    def test_the_step_keeps_the_last_traceback_for_operators_not_in_its_error(
        self, start, drive, order_input
    ):
        run = drive(start("order", order_input(simulate={"payment": "flaky"})))

        charge = run.steps.get(node="charge_payment")
        assert charge.state == StepState.RETRY_WAIT
        assert charge.last_traceback.startswith("Traceback (most recent call last):")
        assert charge.last_error["type"] in charge.last_traceback.splitlines()[-1]
        assert "traceback" not in charge.last_error

    def test_the_claim_names_the_worker_process_holding_the_lease(self, start, drive, order_input):
        run = drive(start("order", order_input(simulate={"payment": "flaky"})))

        charge = run.steps.get(node="charge_payment")
        assert charge.lease_holder == f"{socket.gethostname()}:{os.getpid()}"
