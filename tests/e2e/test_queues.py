"""A plain `celery -A config worker` (the command every Celery user types) does all the work."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import WORKERS, wait_until
from workflows.states import EventKind, RunState, StepState

pytestmark = pytest.mark.e2e


class TestPlainWorker:
    def test_a_worker_started_without_queues_fires_timers_and_runs_steps(
        self, cluster, transactional_db, start, finished
    ):
        # The cluster's workers (started with -Q) are frozen: only the plain one can act.
        with cluster.workers_paused():
            cluster.start_worker("plain", queues=None)
            try:
                run = start("test_sleeping", {})

                run = finished(run, RunState.SUCCEEDED, timeout=45)
            finally:
                cluster.stop_worker("plain")

        completed = run.events.filter(kind=EventKind.COMPLETED).exclude(node="")
        assert list(completed.values_list("node", flat=True)) == ["nap", "wake_up"]
        banner = (cluster.logs / "plain.log").read_text()
        assert ".> baton.steps" in banner
        assert ".> baton.sweep" in banner


class TestActivityQueues:
    def test_a_payments_step_waits_for_a_payments_worker_and_runs_only_there(
        self, cluster, workers, start, finished
    ):
        shared = {cluster.workers[name].pid for name in WORKERS}
        run = start("test_payments", {"seconds": 0})
        # The sweep re-sends the step it finds untaken: still to the payments queue,
        # which the shared workers do not read.
        wait_until(
            lambda: run.events.filter(node="charge", kind=EventKind.REDISPATCHED).exists(),
            timeout=60,
            what="the sweep to re-send the charge",
        )
        charge = run.steps.get(node="charge")
        assert (charge.state, charge.attempt) == (StepState.SCHEDULED, 0)

        cluster.start_worker("payments", queues="payments")
        payments = cluster.workers["payments"].pid
        try:
            run = finished(run, RunState.SUCCEEDED, timeout=60)
        finally:
            cluster.stop_worker("payments")

        ran_on = {step.node: step.result["worker"] for step in run.steps.all()}
        assert ran_on["charge"] == payments
        assert ran_on["receipt"] in shared
