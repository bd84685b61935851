"""Limits counted by the database hold across real workers: two of them, eight processes,
a map of 200 items whose activity allows 5 at once and 10 a second."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest

from workflows.models import StepEvent, StepRun
from workflows.states import EventKind, RunState

pytestmark = pytest.mark.e2e

LIMITED_WORKERS = ("limited-a", "limited-b")
ENDS_OF_AN_ATTEMPT = (EventKind.COMPLETED, EventKind.ERRORED, EventKind.LEASE_EXPIRED)


def most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one moment (one ending as another starts is not both)."""
    edges = sorted(
        [(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
        key=lambda edge: (edge[0], edge[1]),  # at a tie, an end comes before a start
    )
    open_now = most = 0
    for _, change in edges:
        open_now += change
        most = max(most, open_now)
    return most


class TestLimitsAcrossWorkers:
    def test_two_workers_never_run_more_than_five_at_once_nor_ten_in_a_second(
        self, cluster, transactional_db, start, finished
    ):
        # Eight pool processes could run eight at once; only the database's count stops them.
        for name in LIMITED_WORKERS:
            cluster.start_worker(name, queues="limited", concurrency=4)
        worker_groups = {cluster.workers[name].pid for name in LIMITED_WORKERS}
        try:
            run = start("test_limited_map", {"count": 200, "seconds": 0.2})

            run = finished(run, RunState.SUCCEEDED, timeout=240)
        finally:
            for name in LIMITED_WORKERS:
                cluster.stop_worker(name)

        items = StepRun.objects.filter(run=run, item__isnull=False)
        events = StepEvent.objects.filter(run=run, step__in=items)
        started = {(e.step_id, e.attempt): e.at for e in events.filter(kind=EventKind.STARTED)}
        ended = {(e.step_id, e.attempt): e.at for e in events.filter(kind__in=ENDS_OF_AN_ATTEMPT)}
        assert items.count() == 200
        assert len(started) >= 200
        assert started.keys() == ended.keys()
        assert most_at_once([(at, ended[key]) for key, at in started.items()]) <= 5
        per_second = Counter(at.replace(microsecond=0) for at in started.values())
        assert max(per_second.values()) <= 10
        ran_on = {step.result["worker"] for step in items}
        assert ran_on == worker_groups  # both workers took part
        # The map sends more items than 5 at once: those refused waited, and each such
        # attempt said so on the timeline once, however many sweeps and claims looked again.
        held = Counter((e.step_id, e.attempt) for e in events.filter(kind=EventKind.HELD))
        assert len(held) >= 5
        assert max(held.values()) == 1
