"""Starting a run in the process that runs it (engine.start_workflow_here).

The start's one write also claims the run's first step for this process, as a worker's
record claims the step after it; the claim is fenced by its lease like any other.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from bench.measure import counting
from workflows import engine
from workflows.engine import execute, start, work
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """The ids of the steps handed to workers (none leaves for a broker)."""
    ids: list[int] = []
    monkeypatch.setattr(work, "send_steps", lambda step_ids, **options: ids.extend(step_ids))
    return ids


def _states(run) -> list[tuple[str, str, int]]:
    return list(run.steps.order_by("id").values_list("node", "state", "attempt"))


class TestStartWorkflowHere:
    def test_a_local_first_step_is_claimed_by_the_start_and_the_chain_runs_here(self, sent):
        with counting() as counts:
            run, created = engine.start_workflow_here(workflow_type="local_chain", input={})

        run.refresh_from_db()
        assert created
        assert run.state == RunState.SUCCEEDED
        assert _states(run) == [
            ("first", StepState.SUCCEEDED, 1),
            ("second", StepState.SUCCEEDED, 1),
        ]
        assert sent == []
        # The start, which also claims `first`; then one record a step (`first`'s claims
        # `second`, `second`'s ends the run): one statement, round trip and commit each.
        assert (counts.commits, counts.statements, counts.round_trips) == (3, 3, 3)

    def test_a_remote_first_step_is_claimed_only_with_eager_dispatch(
        self, settings, order_input, sent
    ):
        settings.BATON_EAGER_STEPS = 0
        for_a_worker, _ = engine.start_workflow_here(workflow_type="order", input=order_input())
        settings.BATON_EAGER_STEPS = 2
        here, _ = engine.start_workflow_here(workflow_type="order", input=order_input())

        assert _states(for_a_worker) == [("validate", StepState.SCHEDULED, 0)]
        # Two steps in a row here, the start's claim counted as the first of them.
        assert _states(here) == [
            ("validate", StepState.SUCCEEDED, 1),
            ("reserve_inventory", StepState.SUCCEEDED, 1),
            ("charge_payment", StepState.SCHEDULED, 0),
        ]
        assert sent == [
            for_a_worker.steps.get().pk,
            here.steps.get(node="charge_payment").pk,
        ]

    def test_a_starter_that_dies_leaves_its_claim_to_the_sweep(self, sent):
        run, _, claim = start.start_claiming(
            workflow_type="local_chain",
            input={},
            idempotency_key=None,
            correlation_id="",
            started_by=None,
            now=None,
            parent_step=None,
            here=True,
        )
        step = run.steps.get()
        assert (step.state, step.attempt, step.lease_holder) == (
            StepState.RUNNING,
            1,
            execute.worker_name(),
        )

        # The process died before it ran the step: its lease expires, the attempt counts.
        engine.sweep(now=timezone.now() + timedelta(seconds=600))
        execute.record_outcome(claim, execute.Outcome(result="late"), now=timezone.now())

        step.refresh_from_db()
        assert step.state == StepState.RETRY_WAIT
        assert step.result is None
        assert run.events.filter(kind=EventKind.LEASE_EXPIRED).count() == 1
        assert run.events.filter(kind=EventKind.LATE_RESULT_DISCARDED).count() == 1
        assert sent == []

    def test_inside_a_transaction_it_starts_the_run_for_a_worker(self, sent):
        with transaction.atomic():
            run, _ = engine.start_workflow_here(workflow_type="local_chain", input={})

        assert _states(run) == [("first", StepState.SCHEDULED, 0)]
        assert sent == [run.steps.get().pk]

    def test_a_keyed_start_is_claimed_by_the_start_too_and_a_second_one_runs_nothing(self, sent):
        run, created = engine.start_workflow_here(
            workflow_type="local_chain", input={}, idempotency_key="once"
        )
        again, created_again = engine.start_workflow_here(
            workflow_type="local_chain", input={}, idempotency_key="once"
        )

        run.refresh_from_db()
        assert (created, created_again) == (True, False)
        assert again.pk == run.pk
        assert run.state == RunState.SUCCEEDED
        assert _states(run) == [
            ("first", StepState.SUCCEEDED, 1),
            ("second", StepState.SUCCEEDED, 1),
        ]
        assert sent == []
