"""The engine's PostgreSQL functions (workflows.engine.functions): installed as compiled.

The migrations freeze each function's text; the code compiles it again from the
models at run time and calls it by a name that hashes that text. These tests are
the functions' `makemigrations --check`: a state machine changed on a model without
a migration that installs its new function fails here, not in production.
"""

from __future__ import annotations

import importlib
import uuid

import pytest
from django.db import connection, transaction
from django.utils import timezone

from bench.measure import counting
from workflows import engine, registry
from workflows.dsl import Activity, NoCompensation, Workflow
from workflows.engine import execute, functions, start, straight
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import StepState

pytestmark = pytest.mark.django_db

# The migration that installs each function as the code compiles it now (the latest one
# that holds its text).
_MIGRATIONS = {
    "RECORD_STRAIGHT": "0019_engine_functions",
    "CLAIM_STEP": "0020_last_step_functions",
    "START_RUN": "0023_start_constants_in_text",
    "RECORD_END": "0020_last_step_functions",
}
_NAMES = list(_MIGRATIONS)


def _compiled() -> dict[str, functions.Function]:
    return {
        "RECORD_STRAIGHT": straight.function(),
        "CLAIM_STEP": execute.claim_function(),
        "START_RUN": start.start_function(),
        "RECORD_END": straight.end_function(),
    }


def _claiming_start(now, workflow_type: str = "local_chain", *, here: bool = True):
    """A start by a process that runs what it may (`start_workflow_here`): a local first
    step, as local_chain's, is claimed by the starter."""
    return start.start_claiming(
        workflow_type=workflow_type,
        input={},
        idempotency_key=None,
        correlation_id="",
        started_by=None,
        now=now,
        parent_step=None,
        here=here,
    )


class TestTheMigrationsInstallWhatTheCodeCompiles:
    @pytest.mark.parametrize("name", _NAMES)
    def test_the_migration_holds_the_text_the_code_compiles(self, name):
        migration = importlib.import_module(f"workflows.migrations.{_MIGRATIONS[name]}")

        assert getattr(migration, name) == _compiled()[name].create_sql()

    def test_the_database_holds_only_the_functions_some_code_calls(self):
        # A function superseded by a new name stays installed for the release that still
        # calls it; a later migration drops it (workflows 0028, approvals 0031).
        with connection.cursor() as cursor:
            cursor.execute("SELECT proname FROM pg_proc WHERE proname LIKE 'baton\\_%'")
            installed = {name for (name,) in cursor.fetchall()}

        assert installed == {function.name for function in functions.registered()}

    def test_a_changed_text_is_a_new_name(self):
        function = straight.function()
        changed = functions.Function(
            prefix=function.prefix,
            arguments=function.arguments,
            returns=function.returns,
            body=function.body.replace("'{running}'", "'{running,scheduled}'"),
        )

        assert changed.body != function.body
        assert changed.name != function.name


@pytest.mark.django_db(transaction=True)
class TestTheClaimsFunction:
    def test_alone_its_commit_does_not_wait_for_the_disk_and_the_setting_ends_with_it(
        self, start, order_input
    ):
        step = start("order", order_input()).steps.get()
        call = execute.claim_function().call_sql
        now = timezone.now()

        with connection.cursor() as cursor:
            # One query, one implicit transaction: the SHOW sees what the claim set.
            cursor.execute(
                call + ";\nSHOW synchronous_commit",
                [step.pk, uuid.uuid4(), now, "here", [], True],
            )
            claimed = cursor.fetchone()
            cursor.nextset()
            during = cursor.fetchone()
            cursor.execute("SHOW synchronous_commit")
            after = cursor.fetchone()

        assert claimed[0] == "validate"
        assert (during, after) == (("off",), ("on",))

    def test_inside_a_transaction_it_leaves_the_commit_to_the_caller(self, start, order_input):
        step = start("order", order_input()).steps.get()
        call = execute.claim_function().call_sql

        with connection.cursor() as cursor:
            cursor.execute(
                call + ";\nSHOW synchronous_commit",
                [step.pk, uuid.uuid4(), timezone.now(), "here", [], False],
            )
            cursor.nextset()
            during = cursor.fetchone()

        assert during == ("on",)


def _prepared() -> list[str]:
    """The statements prepared on this session's server connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


_START_FUNCTION = start.start_function


class TestTheCalls:
    def _a_run_and_its_first_step(self, start, order_input) -> None:
        run = start("order", order_input())
        claim = execute.claim_step(run.steps.get().pk, now=timezone.now())
        following = execute.record_outcome(
            claim, execute.Outcome(result={"ok": True}), now=timezone.now()
        )
        assert following is None
        assert run.steps.get(node="reserve_inventory").state == StepState.SCHEDULED

    def test_straight_to_the_server_each_is_prepared_once_for_the_connection(
        self, start, order_input
    ):
        for _ in range(3):
            self._a_run_and_its_first_step(start, order_input)

        # One statement per function and the types of its values (psycopg types an int by
        # its size: ids either side of 32,767 make two), not one per call.
        prepared = _prepared()
        for function in (_START_FUNCTION(), execute.claim_function(), straight.function()):
            calls = [s for s in prepared if s.startswith(f"SELECT * FROM {function.name}(")]
            assert 1 <= len(calls) < 3, function.name

    def test_behind_pgbouncer_they_are_sent_as_every_other_query(
        self, start, order_input, monkeypatch
    ):
        connection.ensure_connection()
        # What config.settings.database gives a connection through PgBouncer.
        monkeypatch.setattr(connection.connection, "prepare_threshold", None)
        before = _prepared()

        self._a_run_and_its_first_step(start, order_input)

        assert _prepared() == before

    def test_the_statements_sent_instead_are_not_prepared(self, start, order_input, settings):
        settings.BATON_DB_FUNCTIONS = False
        before = _prepared()

        self._a_run_and_its_first_step(start, order_input)

        assert _prepared() == before


@pytest.mark.django_db(transaction=True)
class TestAfterTheServerDroppedTheConnection:
    def test_the_next_claim_reconnects_as_every_other_query_does(self, start, order_input):
        run = start("order", order_input())
        step_id = run.steps.get().pk
        # What a PostgreSQL restart leaves a worker between two tasks: a dead connection
        # that Celery's task_prerun (close_old_connections) marks for a health check.
        connection.connection.close()
        connection.health_check_done = False

        claim = execute.claim_step(step_id, now=timezone.now())

        assert claim is not None
        assert run.steps.get().state == StepState.RUNNING


class TestWithoutFunctions:
    def test_sqlite_and_the_setting_turned_off_send_the_statements(self, settings):
        class SQLite:
            vendor = "sqlite"

        settings.BATON_DB_FUNCTIONS = True
        assert functions.used(connection)
        assert not functions.used(SQLite())
        settings.BATON_DB_FUNCTIONS = False
        assert not functions.used(connection)


def _rows(run: WorkflowRun, also: frozenset[str] | set[str] = frozenset()) -> dict[str, list[dict]]:
    """The run's rows, less what differs between two runs however alike they are (and
    the columns `also` names)."""
    own = {"id", "run_id", "step_id", "created_at", "updated_at", "trace_context", "input", *also}

    def values(row) -> dict:
        return {
            field.attname: getattr(row, field.attname)
            for field in row._meta.concrete_fields
            if field.attname not in own
        }

    run.refresh_from_db()
    return {
        "run": [values(run)],
        "steps": [values(step) for step in run.steps.order_by("id")],
        "events": [values(event) for event in StepEvent.objects.filter(run=run).order_by("id")],
    }


class TestTheStartsFunction:
    def test_it_writes_the_rows_the_general_way_writes(self, order_input, settings):
        now = timezone.now()
        called, _ = engine.start_workflow(workflow_type="order", input=order_input(), now=now)
        settings.BATON_DB_FUNCTIONS = False
        general, _ = engine.start_workflow(workflow_type="order", input=order_input(), now=now)

        assert _rows(called) == _rows(general)
        assert _rows(called)["steps"][0]["state"] == StepState.SCHEDULED

    def test_a_first_step_claimed_by_the_starter_is_written_as_the_general_way_claims_it(
        self, settings
    ):
        now = timezone.now()
        called, _, claimed = _claiming_start(now)
        settings.BATON_DB_FUNCTIONS = False
        general, _, _ = _claiming_start(now)

        ignored = {"lease_token"}  # each claim's own fencing token
        assert _rows(called, also=ignored) == _rows(general, also=ignored)
        assert _rows(called)["steps"][0]["state"] == StepState.RUNNING
        step = called.steps.get()
        assert (claimed.step_id, claimed.token) == (step.pk, step.lease_token)
        assert not claimed.step._state.adding
        assert not claimed.step.changed_fields()

    @pytest.mark.parametrize("claims", [False, True], ids=["scheduled", "claimed"])
    def test_the_rows_it_returns_are_the_rows_it_wrote_in_every_column(self, claims):
        if claims:
            run, _, claim = _claiming_start(timezone.now())
            rows = [run, claim.step]
        else:
            run, _ = engine.start_workflow(workflow_type="local_chain", input={})
            rows = [run]

        for row in rows:
            written = type(row).objects.get(pk=row.pk)
            assert {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields} == {
                f.attname: getattr(written, f.attname) for f in row._meta.concrete_fields
            }

    def test_every_start_it_takes_is_one_the_general_way_writes_as_one_run_event_and_step(
        self, settings, monkeypatch
    ):
        """The function is compiled from a start's rows, so it may take only the starts whose
        general way writes those three rows and nothing else: a run, its STARTED event,
        and its first step, sent to a worker or claimed by the starter."""
        straight_ones = [
            definition
            for definition in registry.all_definitions()
            if registry.get(definition.name) is definition and start._starts_straight(definition)
        ]
        written = []
        monkeypatch.setattr(Workflow, "validate_input", lambda self, data: data)
        monkeypatch.setattr(start.UnitOfWork, "finish", lambda work, run: written.append(work))
        settings.BATON_DB_FUNCTIONS = False
        settings.BATON_EAGER_STEPS = 2

        for definition, here in [(d, here) for d in straight_ones for here in (False, True)]:
            run, _, claim = _claiming_start(timezone.now(), definition.name, here=here)
            work = written.pop()
            [step] = work.new_steps
            assert (work.new_runs, work.changed, work.ended) == ([run], {}, [])
            assert [(event.kind, event.step) for event in work.events] == [("started", None)]
            assert work.to_send == ([] if claim else [step])
            assert claim is None or claim.step is step
        assert len(straight_ones) > 5

    def test_the_run_it_returns_is_saved_with_its_first_step(self, order_input):
        run, created = engine.start_workflow(workflow_type="order", input=order_input())

        assert created
        assert not run._state.adding
        run.correlation_id = "later"
        run.save_changes()
        assert WorkflowRun.objects.get(pk=run.pk).correlation_id == "later"

    def test_not_a_keyed_start_a_child_or_a_limited_type(self):
        assert start._starts_straight(registry.get("order"))
        limited = Workflow(
            name="limited_start",
            version=1,
            start="only",
            nodes=(Activity("only", run=lambda c: None, compensate=NoCompensation("test")),),
            concurrency_limit=1,
        )
        assert not start._starts_straight(limited)


@pytest.mark.django_db(transaction=True)
class TestAStartOnItsOwn:
    def test_it_is_one_statement_one_round_trip_and_one_commit(self, order_input):
        with counting() as counts:
            run, _ = engine.start_workflow(workflow_type="order", input=order_input())

        assert (counts.statements, counts.round_trips, counts.commits) == (1, 1, 1)
        assert run.steps.get().state == StepState.SCHEDULED

    def test_a_start_hook_that_writes_commits_with_the_run_or_not_at_all(
        self, order_input, monkeypatch
    ):
        def note_start(*, started, now):
            for run in started:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_current_xact_id()")  # a statement: BEGIN
                notes.append(run.pk)

        notes: list = []
        monkeypatch.setattr(registry, "_run_start_hooks", [note_start])

        with counting() as counts:
            run, _ = engine.start_workflow(workflow_type="order", input=order_input())

        # The hook's statement opened the transaction; the call joined it.
        assert notes == [run.pk]
        assert (counts.statements, counts.commits) == (2, 1)
        assert counts.round_trips == 2 + 2

    def test_a_start_hooks_commit_work_runs_after_the_run_is_written(
        self, order_input, monkeypatch
    ):
        def on_commit_only(*, started, now):
            for run in started:
                transaction.on_commit(
                    lambda pk=run.pk: seen.append(WorkflowRun.objects.filter(pk=pk).exists())
                )

        seen: list = []
        monkeypatch.setattr(registry, "_run_start_hooks", [on_commit_only])

        run, _ = engine.start_workflow(workflow_type="order", input=order_input())

        # Nothing goes out before the commit that writes the run (house rule 4).
        assert seen == [True]
        assert WorkflowRun.objects.filter(pk=run.pk).exists()

    def test_a_start_hook_that_fails_leaves_no_run(self, order_input, monkeypatch):
        def refuse(*, started, now):
            raise RuntimeError("no")

        monkeypatch.setattr(registry, "_run_start_hooks", [refuse])

        with pytest.raises(RuntimeError):
            engine.start_workflow(workflow_type="order", input=order_input())

        assert not WorkflowRun.objects.exists()
        assert not StepRun.objects.exists()
