"""The engine behind PgBouncer in transaction mode, driven in this process.

Every query here goes through PgBouncer (tests/pgbouncer.py), with the settings
BATON_DB_POOLER=pgbouncer gives, and each test's data is committed: each
transaction may land on a different server connection, so anything Baton left
on a session (a SET without LOCAL, a session advisory lock, a prepared
statement, a server-side cursor) would show. The classes are the engine's own
tests (tests/workflows/test_engine.py), inherited; tests/e2e/test_pgbouncer.py
runs real workers through it.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

import tests.workflows.test_engine as engine_tests
from workflows import engine

# e2e: they start a PgBouncer process (tests/pgbouncer.py).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.fixture(autouse=True)
def every_query_through_pgbouncer(through_pgbouncer) -> None:
    """Send every query of these tests through PgBouncer."""


# The engine's tests that count a use case's statements or round trips assume the
# transaction pytest-django wraps each test in (no BEGIN, no COMMIT among them); they
# hold through PgBouncer too, which adds no statement, and are not repeated here.


class TestStartWorkflowBehindPgBouncer(engine_tests.TestStartWorkflow):
    """Starts take a transaction-scoped advisory lock; nothing holds it after commit."""

    test_a_start_without_a_key_writes_its_run_step_and_event_in_one_round_trip = None
    test_a_keyed_start_writes_its_run_first_in_case_the_key_is_taken = None
    test_without_functions_a_start_sends_its_three_inserts_together = None


class TestConcurrentStartBehindPgBouncer(engine_tests.TestConcurrentStart):
    pass


class TestClaimBehindPgBouncer(engine_tests.TestClaimOnItsOwn):
    """The claim's SET LOCAL synchronous_commit (set_config inside its function, or the
    statement without functions) ends with its transaction."""


class TestExecuteStepBehindPgBouncer(engine_tests.TestExecuteStep):
    test_a_local_step_is_claimed_inside_the_record_of_the_step_before_it = None
    test_a_step_costs_one_round_trip_to_claim_and_two_to_record = None


class TestRetriesBehindPgBouncer(engine_tests.TestRetries):
    pass


class TestSweepBehindPgBouncer(engine_tests.TestSweep):
    pass


class TestConcurrentSweepsBehindPgBouncer(engine_tests.TestConcurrentSweeps):
    pass


class TestNothingOutlivesATransaction:
    def test_the_claims_asynchronous_commit_does_not_leak_to_the_next_transaction(
        self, start, order_input
    ):
        run = start("order", order_input())

        engine.execute_step(step_id=run.steps.get().pk)

        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)

    def test_no_session_advisory_lock_is_left_held_after_a_start(self, start, order_input):
        start("order", order_input(), idempotency_key="behind-pgbouncer")

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            assert cursor.fetchone() == (0,)

    def test_iterating_a_large_queryset_uses_no_server_side_cursor(self, start, order_input):
        for number in range(3):
            start("order", order_input(), idempotency_key=f"iterated-{number}")

        from workflows.models import WorkflowRun

        keys = [run.idempotency_key for run in WorkflowRun.objects.iterator(chunk_size=1)]

        assert sorted(keys) == ["iterated-0", "iterated-1", "iterated-2"]
        assert connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] is True
