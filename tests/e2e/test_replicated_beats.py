"""Two real beats over one database (the cluster's): each tick of a schedule starts one run."""

from __future__ import annotations

import json
import time

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from tests.e2e.conftest import wait_until
from workflows import heartbeats
from workflows.models import WorkflowRun

pytestmark = pytest.mark.e2e

SHARED_BEATS = ("beat-a", "beat-b")
SENDING = "Scheduler: Sending due task every-second "
RELOADED = '"message": "beat.schedule_read"'


def seconds_sent(log: str) -> list[str]:
    """The seconds at which a beat's JSON log says it sent the schedule's message."""
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [line["asctime"][:19] for line in lines if line["message"].startswith(SENDING)]


class TestTwoBeats:
    def test_a_schedule_every_second_starts_one_run_per_tick(self, workers):
        logs = {name: workers.logs / f"{name}.log" for name in SHARED_BEATS}
        offsets = {name: log.stat().st_size for name, log in logs.items()}

        def since(name: str, offset: int) -> str:
            return logs[name].read_bytes()[offset:].decode(errors="replace")

        def sent(name: str) -> list[str]:
            """The seconds at which beat `name` logged sending the schedule's message."""
            return seconds_sent(since(name, offsets[name]))

        task = PeriodicTask.objects.create(
            name="every-second",
            task="baton.start_scheduled_workflow",
            interval=IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS),
            kwargs=json.dumps(
                {"workflow_type": "test_signalled", "input": {}, "correlation_id": "every-second"}
            ),
        )
        wait_until(
            lambda: all(len(sent(name)) >= 8 for name in logs),
            timeout=60,
            what="both beats to send 8 ticks",
        )
        stopped = {name: log.stat().st_size for name, log in logs.items()}
        task.enabled = False
        task.save()
        wait_until(
            lambda: all(RELOADED in since(name, stopped[name]) for name in logs),
            timeout=30,
            what="both beats to read the schedule disabled",
        )
        messages = {name: sent(name) for name in logs}
        ticks = {second for seconds in messages.values() for second in seconds}
        runs = WorkflowRun.objects.filter(correlation_id="every-second")
        wait_until(lambda: runs.count() >= len(ticks) - 2, timeout=60, what="the runs to start")
        time.sleep(3)  # the last messages land

        keys = list(runs.values_list("idempotency_key", flat=True))
        assert len(ticks) - 2 <= len(keys) <= len(ticks) + 2, (len(keys), sorted(ticks))
        assert len(keys) < 0.75 * sum(len(seconds) for seconds in messages.values())
        assert all(key.startswith("schedule:every-second@") for key in keys), keys


class TestTheBeatsAfterAFlush:
    def test_they_reinstall_the_sweep_and_go_on_sweeping(self, workers):
        call_command("flush", interactive=False)  # as each test's teardown does, beats running
        flushed = timezone.now()

        PeriodicTasks.update_changed()  # a change to the schedule, as the next test may make

        wait_until(
            lambda: PeriodicTask.objects.filter(name="baton-sweep", enabled=True).exists(),
            timeout=30,
            what="the sweep's schedule to be reinstalled",
        )
        wait_until(
            lambda: (heartbeats.last_seen(name=heartbeats.SWEEP) or flushed) > flushed,
            timeout=30,
            what="a sweep after the flush",
        )
