"""Two real beats over one database: each tick of a schedule starts one run."""

from __future__ import annotations

import json
import time

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from tests.e2e.conftest import wait_until
from workflows.models import WorkflowRun

pytestmark = pytest.mark.e2e

SENDING = "Scheduler: Sending due task every-second "


def seconds_sent(log: str) -> list[str]:
    """The seconds at which a beat's JSON log says it sent the schedule's message."""
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [line["asctime"][:19] for line in lines if line["message"].startswith(SENDING)]


class TestTwoBeats:
    def test_a_schedule_every_second_starts_one_run_per_tick(self, workers):
        PeriodicTask.objects.create(
            name="every-second",
            task="baton.start_scheduled_workflow",
            interval=IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS),
            kwargs=json.dumps(
                {"workflow_type": "test_signalled", "input": {}, "correlation_id": "every-second"}
            ),
        )
        names = ("db-beat-a", "db-beat-b")

        def sent(name: str) -> list[str]:
            """The seconds at which beat `name` logged sending the schedule's message."""
            log = workers.logs / f"{name}.log"
            return seconds_sent(log.read_text()) if log.exists() else []

        beats = []
        try:
            for name in names:
                beats.append(workers.start_beat(name, database_scheduler=True))
                wait_until(lambda name=name: sent(name), timeout=60, what=f"{name} to send")
            time.sleep(8)  # both beats send every tick
        finally:
            for beat in beats:
                workers.stop_beat(beat)
        messages = {name: sent(name) for name in names}
        ticks = {second for seconds in messages.values() for second in seconds}
        runs = WorkflowRun.objects.filter(correlation_id="every-second")
        wait_until(lambda: runs.count() >= len(ticks) - 2, timeout=60, what="the runs to start")
        time.sleep(3)  # the last messages land

        keys = list(runs.values_list("idempotency_key", flat=True))
        assert all(len(seconds) >= 5 for seconds in messages.values()), messages
        assert len(ticks) - 2 <= len(keys) <= len(ticks) + 2, (len(keys), sorted(ticks))
        assert len(keys) < 0.75 * sum(len(seconds) for seconds in messages.values())
        assert all(key.startswith("schedule:every-second@") for key in keys), keys
