"""The engine's and the services' metrics: they move for committed work, and only for it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from prometheus_client import REGISTRY

from approvals import human_tasks
from approvals.notify import links
from approvals.states import Channel
from workflows import engine
from workflows.engine import sweep, work
from workflows.states import RunState

pytestmark = pytest.mark.django_db


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def committed(django_capture_on_commit_callbacks, monkeypatch) -> Callable[..., Any]:
    """Call a use case and run what it left for its commit (no Celery message is sent)."""
    monkeypatch.setattr(work, "send_steps", lambda step_ids, **options: None)

    def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return function(*args, **kwargs)

    return call


class TestARunThatSucceeds:
    def test_counts_its_start_each_attempt_and_its_end(self, start, drive, committed):
        before = {
            "started": value("baton_runs_started_total", type="test_linear"),
            "ended": value("baton_runs_ended_total", type="test_linear", state="succeeded"),
            "second": value(
                "baton_step_attempts_total", type="test_linear", node="second", kind="forward"
            ),
            "durations": value(
                "baton_step_duration_seconds_count",
                type="test_linear",
                node="second",
                kind="forward",
                outcome="completed",
            ),
            "latencies": value(
                "baton_step_schedule_to_start_seconds_count",
                type="test_linear",
                node="second",
                kind="forward",
            ),
        }

        run = committed(start, "test_linear")
        run = committed(drive, run)

        assert run.state == RunState.SUCCEEDED
        assert value("baton_runs_started_total", type="test_linear") == before["started"] + 1
        assert (
            value("baton_runs_ended_total", type="test_linear", state="succeeded")
            == before["ended"] + 1
        )
        assert (
            value("baton_step_attempts_total", type="test_linear", node="second", kind="forward")
            == before["second"] + 1
        )
        assert (
            value(
                "baton_step_duration_seconds_count",
                type="test_linear",
                node="second",
                kind="forward",
                outcome="completed",
            )
            == before["durations"] + 1
        )
        assert (
            value(
                "baton_step_schedule_to_start_seconds_count",
                type="test_linear",
                node="second",
                kind="forward",
            )
            == before["latencies"] + 1
        )


class TestAStepThatFailsForGood:
    def test_counts_its_retries_its_failure_the_compensation_and_the_runs_end(
        self, start, drive, committed
    ):
        labels = {"type": "test_linear", "node": "second", "kind": "forward"}
        before = {
            "retries": value("baton_step_retries_total", **labels),
            "failures": value("baton_step_failures_total", **labels),
            "errored": value("baton_step_duration_seconds_count", **labels, outcome="errored"),
            "undone": value("baton_compensations_total", type="test_linear", node="first"),
            "ended": value("baton_runs_ended_total", type="test_linear", state="compensated"),
        }
        run = committed(start, "test_linear", {"simulate": {"second": "fail"}})
        later = timezone.now()

        for _ in range(3):  # three attempts, each retry fired by the sweep
            run = committed(drive, run)
            later += timedelta(seconds=5)
            committed(sweep, now=later)
        run = committed(drive, run)

        assert run.state == RunState.COMPENSATED
        assert value("baton_step_retries_total", **labels) == before["retries"] + 2
        assert value("baton_step_failures_total", **labels) == before["failures"] + 1
        assert (
            value("baton_step_duration_seconds_count", **labels, outcome="errored")
            == before["errored"] + 3
        )
        assert (
            value("baton_compensations_total", type="test_linear", node="first")
            == before["undone"] + 1
        )
        assert (
            value("baton_runs_ended_total", type="test_linear", state="compensated")
            == before["ended"] + 1
        )


class TestACancelledRun:
    def test_a_step_cancelled_while_it_waited_to_retry_adds_no_attempt_duration(
        self, start, drive, committed
    ):
        labels = {"type": "test_linear", "node": "second", "kind": "forward"}
        before = {
            outcome: value("baton_step_duration_seconds_count", **labels, outcome=outcome)
            for outcome in ("errored", "cancelled")
        }
        ended = value("baton_runs_ended_total", type="test_linear", state="cancelled")
        run = committed(start, "test_linear", {"simulate": {"second": "fail"}})
        run = committed(drive, run)  # the second step's first attempt fails: it waits to retry

        committed(engine.cancel_run, run_id=run.pk)
        run = committed(drive, run)  # the first step is undone

        assert run.state == RunState.CANCELLED
        assert value("baton_step_duration_seconds_count", **labels, outcome="errored") == (
            before["errored"] + 1
        )
        assert (
            value("baton_step_duration_seconds_count", **labels, outcome="cancelled")
            == (before["cancelled"])
        )
        assert value("baton_runs_ended_total", type="test_linear", state="cancelled") == ended + 1


class TestRolledBackWork:
    def test_counts_nothing(self, start, django_capture_on_commit_callbacks):
        before = value("baton_runs_started_total", type="test_linear")

        def start_then_fail() -> None:
            with transaction.atomic():
                start("test_linear")
                raise RuntimeError("the caller's transaction rolls back")

        with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
            start_then_fail()

        assert value("baton_runs_started_total", type="test_linear") == before


class TestDecisions:
    def test_a_persons_decision_is_observed_with_its_latency(self, manager_task, carol, committed):
        labels = {"type": "expense", "node": "manager_approval", "outcome": "approved"}

        def bucket(le: str) -> float:
            return value("baton_decision_latency_seconds_bucket", **labels, le=le)

        before = {"count": value("baton_decision_latency_seconds_count", **labels)}
        before.update(hour=bucket("3600.0"), four_hours=bucket("14400.0"))

        committed(
            human_tasks.approve_human_task,
            task_id=manager_task.pk,
            user=carol,
            channel=Channel.INBOX,
            now=manager_task.created_at + timedelta(hours=2),
        )

        assert value("baton_decision_latency_seconds_count", **labels) == before["count"] + 1
        assert bucket("3600.0") == before["hour"]  # two hours is not within the hour
        assert bucket("14400.0") == before["four_hours"] + 1


class TestEmailLinks:
    def test_a_refused_link_is_counted_with_why(self):
        before = value("baton_email_links_total", result="refused", reason="tampered")

        with pytest.raises(links.LinkProblem):
            links.resolve("not-a-link", now=timezone.now())

        assert value("baton_email_links_total", result="refused", reason="tampered") == before + 1
