"""Beat's scheduler: every replica names a tick alike, so each tick starts one run; and a
signal stops it without a query from its handler (in a real beat: test_beat_shutdown.py).
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from celery import beat, current_app
from celery.schedules import crontab, schedule
from django.db import IntegrityError
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from workflows import heartbeats
from workflows.beat import SCHEDULED_FOR_HEADER, Scheduler, beat_heartbeat_name, scheduled_for
from workflows.models import Heartbeat, WorkflowRun
from workflows.tasks import schedule_key, start_scheduled_workflow


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class TestScheduledFor:
    def test_two_beats_sending_one_cron_tick_name_its_fire_time(self):
        every_five_minutes = crontab(minute="*/5")

        # Each beat last sent the 10:05 tick at a slightly different moment.
        first = scheduled_for(
            every=every_five_minutes,
            last_run_at=at("2026-12-01T10:05:00.3"),
            now=at("2026-12-01T10:10:00.2"),
        )
        second = scheduled_for(
            every=every_five_minutes,
            last_run_at=at("2026-12-01T10:05:00.9"),
            now=at("2026-12-01T10:10:01.4"),
        )

        assert first == second == at("2026-12-01T10:10:00")

    def test_a_beat_catching_up_after_a_pause_names_the_tick_it_missed(self):
        tick = scheduled_for(
            every=crontab(minute="*/5"),
            last_run_at=at("2026-12-01T10:05:00.3"),
            now=at("2026-12-01T10:31:07"),
        )

        assert tick == at("2026-12-01T10:10:00")  # the other beat started that one already

    def test_interval_ticks_are_whole_intervals_since_the_epoch(self):
        every_second = schedule(timedelta(seconds=1))
        hourly = schedule(timedelta(hours=1))

        assert scheduled_for(
            every=every_second,
            last_run_at=at("2026-12-01T12:00:02.1"),
            now=at("2026-12-01T12:00:03.7"),
        ) == at("2026-12-01T12:00:03")
        assert scheduled_for(
            every=hourly, last_run_at=at("2026-12-01T11:20:00"), now=at("2026-12-01T12:20:00.4")
        ) == at("2026-12-01T12:00:00")


class TestScheduleKey:
    def test_a_tick_is_keyed_on_its_schedule_and_time(self):
        key = schedule_key(
            schedule_name="nightly", scheduled_for="2026-12-01T02:00:00+00:00", message_id="m-1"
        )

        assert key == "schedule:nightly@2026-12-01T02:00:00+00:00"

    def test_a_long_schedule_name_is_hashed_to_fit(self):
        key = schedule_key(
            schedule_name="n" * 200, scheduled_for="2026-12-01T02:00:00+00:00", message_id="m"
        )

        assert len(key) <= 200
        assert key.endswith("@2026-12-01T02:00:00+00:00")

    def test_a_message_without_a_tick_is_keyed_on_its_id(self):
        assert (
            schedule_key(schedule_name=None, scheduled_for=None, message_id="m-1") == "schedule:m-1"
        )


@pytest.mark.django_db
class TestScheduledStartAcrossBeats:
    def test_two_messages_for_one_tick_start_one_run(self, order_input):
        headers = {
            "periodic_task_name": "nightly",
            SCHEDULED_FOR_HEADER: "2026-12-01T02:00:00+00:00",
        }

        first = start_scheduled_workflow.apply(
            args=("order", order_input()), task_id="beat-a", headers=headers
        ).get()
        second = start_scheduled_workflow.apply(
            args=("order", order_input()), task_id="beat-b", headers=headers
        ).get()

        assert first == second
        assert (
            WorkflowRun.objects.get().idempotency_key
            == "schedule:nightly@2026-12-01T02:00:00+00:00"
        )

    def test_the_next_tick_starts_the_next_run(self, order_input):
        for tick in ("2026-12-01T02:00:00+00:00", "2026-12-02T02:00:00+00:00"):
            headers = {"periodic_task_name": "nightly", SCHEDULED_FOR_HEADER: tick}
            start_scheduled_workflow.apply(args=("order", order_input()), headers=headers)

        assert WorkflowRun.objects.count() == 2


@pytest.mark.django_db
class TestScheduler:
    def test_each_message_carries_its_schedule_and_tick(self, monkeypatch, order_input):
        interval = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.create(
            name="every-second",
            task="baton.start_scheduled_workflow",
            interval=interval,
            kwargs=json.dumps({"workflow_type": "order", "input": order_input()}),
        )
        sent = []
        monkeypatch.setattr(
            start_scheduled_workflow, "apply_async", lambda *a, **options: sent.append(options)
        )
        scheduler = Scheduler(app=current_app, lazy=True)
        entry = scheduler.Entry(PeriodicTask.objects.get(name="every-second"), app=current_app)

        scheduler.apply_async(entry, advance=True)

        (options,) = sent
        assert options["headers"]["periodic_task_name"] == "every-second"
        tick = datetime.fromisoformat(options["headers"][SCHEDULED_FOR_HEADER])
        assert tick.microsecond == 0
        assert timedelta(0) <= datetime.now(UTC) - tick < timedelta(seconds=2)


@pytest.mark.django_db(transaction=True)  # the scheduler commits and recycles its connection
class TestSchedulerTick:
    def test_a_tick_records_that_this_beat_is_alive(self):
        scheduler = Scheduler(app=current_app, lazy=True)

        scheduler.tick()

        assert heartbeats.last_seen(name=beat_heartbeat_name()) is not None


@pytest.fixture
def start_scheduler() -> Iterator[Callable[[], Scheduler]]:
    """Start schedulers as `celery beat` does (celery's signal handlers first); restore after."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}

    def start() -> Scheduler:
        service = beat.Service(app=current_app, scheduler_cls=Scheduler)
        current_app.Beat().install_sync_handler(service)
        return service.scheduler

    try:
        yield start
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@pytest.mark.django_db(transaction=True)  # the scheduler commits
class TestStopSignal:
    def test_a_signal_between_ticks_exits_at_once(self, start_scheduler):
        start_scheduler()

        with pytest.raises(SystemExit):
            signal.raise_signal(signal.SIGTERM)

    def test_a_signal_mid_tick_lets_no_further_statement_run_and_exits_after_it(
        self, start_scheduler, monkeypatch
    ):
        scheduler = start_scheduler()
        statements = []

        def record_after_a_signal(*, name: str, now: datetime) -> None:
            signal.raise_signal(signal.SIGINT)
            statements.append("before the heartbeat")
            Heartbeat.objects.create(name=name, at=now)
            statements.append("after the heartbeat")

        monkeypatch.setattr(heartbeats, "record", record_after_a_signal)

        with pytest.raises(SystemExit):
            scheduler.tick()

        assert statements == ["before the heartbeat"]
        assert not Heartbeat.objects.exists()

    def test_a_signal_while_a_message_is_sent_exits_at_once_and_leaves_the_tick_unsaved(
        self, start_scheduler, monkeypatch
    ):
        interval = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.create(
            name="every-second",
            task="baton.sweep",
            interval=interval,
            last_run_at=datetime.now(UTC) - timedelta(seconds=5),
        )
        scheduler = start_scheduler()
        steps = []

        def send_to_a_broker_that_stopped_answering(*args: object, **kwargs: object) -> None:
            signal.raise_signal(signal.SIGTERM)
            steps.append("sent")

        monkeypatch.setattr(beat.Scheduler, "apply_async", send_to_a_broker_that_stopped_answering)

        with pytest.raises(SystemExit):
            scheduler.tick()
        scheduler.close()  # as beat does on its way out

        assert steps == []
        assert PeriodicTask.objects.get(name="every-second").total_run_count == 0

    def test_the_schedule_is_saved_on_the_way_out(self, start_scheduler):
        interval = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.create(name="every-second", task="baton.sweep", interval=interval)
        scheduler = start_scheduler()
        sent = scheduler.reserve(scheduler.schedule["every-second"])  # as apply_async does
        with pytest.raises(SystemExit):
            signal.raise_signal(signal.SIGTERM)  # between ticks: beat leaves its loop

        scheduler.close()  # as beat does on its way out

        saved = PeriodicTask.objects.get(name="every-second")
        assert saved.total_run_count == 1
        assert saved.last_run_at == sent.last_run_at


@pytest.mark.django_db(transaction=True)  # the scheduler commits
class TestScheduleRowsGone:
    def test_a_change_after_the_change_log_was_emptied_is_read(self, start_scheduler):
        scheduler = start_scheduler()
        PeriodicTasks.objects.all().delete()  # as a flush's TRUNCATE does
        scheduler.schedule  # reads the emptied change log  # noqa: B018
        interval = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.create(name="every-second", task="baton.sweep", interval=interval)

        schedule = scheduler.schedule

        assert "every-second" in schedule

    def test_an_entry_of_the_settings_whose_row_was_deleted_is_reinstalled_at_the_next_read(
        self, start_scheduler
    ):
        scheduler = start_scheduler()
        PeriodicTask.objects.filter(name="baton-sweep").delete()

        schedule = scheduler.schedule

        assert "baton-sweep" in schedule
        assert PeriodicTask.objects.get(name="baton-sweep").enabled

    def test_an_entry_another_beat_installed_meanwhile_is_no_error(
        self, start_scheduler, monkeypatch, caplog
    ):
        scheduler = start_scheduler()
        sweep = PeriodicTask.objects.get(name="baton-sweep")
        PeriodicTask.objects.filter(pk=sweep.pk).delete()
        install = scheduler.Entry.from_entry

        def lost_the_race(name, **kwargs):
            install(name, **kwargs)  # the other beat's, committed first
            raise IntegrityError("periodic task with this name already exists")

        monkeypatch.setattr(scheduler.Entry, "from_entry", lost_the_race)

        with caplog.at_level(logging.INFO, logger="baton.beat"):
            schedule = scheduler.schedule

        assert "baton-sweep" in schedule
        assert [r.levelname for r in caplog.records if r.msg == "beat.reinstall_failed"] == []
        assert "beat.entry_installed_elsewhere" in [r.msg for r in caplog.records]

    def test_an_entry_of_the_settings_disabled_in_the_database_stays_disabled(
        self, start_scheduler
    ):
        scheduler = start_scheduler()
        sweep = PeriodicTask.objects.get(name="baton-sweep")
        sweep.enabled = False
        sweep.save()

        schedule = scheduler.schedule

        assert "baton-sweep" not in schedule
        assert not PeriodicTask.objects.get(name="baton-sweep").enabled
