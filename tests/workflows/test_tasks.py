"""The Celery tasks: thin entry points, and what they say in the log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS
from django.utils import timezone

from workflows.states import RunState
from workflows.tasks import CELERY_TASK_LOGGERS, QuietSweepLogs, quiet_sweep_logs, sweep


@pytest.fixture
def quiet() -> Iterator[QuietSweepLogs]:
    installed = quiet_sweep_logs()
    yield installed
    for name in CELERY_TASK_LOGGERS:
        logging.getLogger(name).removeFilter(installed)


def celery_lines(task: str) -> None:
    """Log what a worker and beat log around one message of `task`, as Celery does."""
    context = {"id": "m-1", "name": task, "args": "()", "kwargs": "{}", "eta": None}
    logging.getLogger("celery.worker.strategy").info(LOG_RECEIVED, context)
    logging.getLogger("celery.app.trace").info(
        LOG_SUCCESS, {**context, "return_value": "{}", "runtime": 0.01}
    )
    logging.getLogger("celery.beat").info(
        "Scheduler: Sending due task %s (%s)", f"schedule-of-{task}", task
    )


class TestQuietSweepLogs:
    def test_celerys_lines_about_the_sweep_stay_out_of_an_info_log(self, quiet, caplog):
        caplog.set_level(logging.INFO)

        celery_lines("baton.sweep")

        assert caplog.records == []

    def test_they_are_kept_at_debug_when_debug_logging_is_on(self, quiet, caplog):
        caplog.set_level(logging.DEBUG)
        caplog.set_level(logging.DEBUG, logger="celery")  # BATON_CELERY_LOG_LEVEL=DEBUG

        celery_lines("baton.sweep")

        assert [(r.name, r.levelname) for r in caplog.records] == [
            ("celery.worker.strategy", "DEBUG"),
            ("celery.app.trace", "DEBUG"),
            ("celery.beat", "DEBUG"),
        ]

    def test_lines_about_other_tasks_are_untouched(self, quiet, caplog):
        caplog.set_level(logging.INFO)

        celery_lines("baton.execute_step")

        assert [r.levelname for r in caplog.records] == ["INFO", "INFO", "INFO"]

    def test_an_error_about_the_sweep_is_never_hidden(self, quiet, caplog):
        caplog.set_level(logging.INFO)

        logging.getLogger("celery.app.trace").error(
            "Task %(name)s[%(id)s] raised: %(exc)s", {"name": "baton.sweep", "id": "m-2", "exc": 1}
        )

        assert [r.levelname for r in caplog.records] == ["ERROR"]

    def test_installing_it_twice_filters_once(self, quiet):
        again = quiet_sweep_logs()

        assert again is quiet
        assert logging.getLogger("celery.app.trace").filters.count(quiet) == 1


@pytest.mark.django_db
class TestSweepTask:
    def test_a_sweep_that_found_nothing_logs_at_debug(self, caplog):
        caplog.set_level(logging.DEBUG, logger="baton")

        sweep.apply()

        # Celery's own line about the task is QuietSweepLogs' business (above).
        baton = [(r.message, r.levelname) for r in caplog.records if r.name.startswith("baton")]
        assert baton == [("sweep.done", "DEBUG")]

    def test_a_sweep_that_fired_a_timer_logs_at_info_with_its_counts(self, start, drive, caplog):
        run = drive(start("test_sleeping", {}))
        run.steps.update(due_at=timezone.now() - timedelta(seconds=1))
        caplog.set_level(logging.INFO, logger="baton")

        sweep.apply()

        (record,) = [r for r in caplog.records if r.message == "sweep.done"]
        assert record.levelname == "INFO"
        assert record.counts["steps"] == 1
        run.refresh_from_db()
        assert run.state == RunState.RUNNING  # the timer fired; wake_up is scheduled
