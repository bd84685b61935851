"""A plain `celery -A config worker` (the command every Celery user types) does all the work."""

from __future__ import annotations

import pytest

from workflows.states import EventKind, RunState

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
