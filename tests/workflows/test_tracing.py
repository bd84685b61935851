"""Traces spanning a run, recorded with the SDK's in-memory exporter."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from approvals import human_tasks
from approvals.states import Channel
from workflows import tasks, tracing
from workflows.engine import work
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Trace into memory for the test, as configure() would into OTLP."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    yield exporter
    tracing.use_provider(None)


@pytest.fixture
def sent(monkeypatch) -> dict[int, dict[str, Any]]:
    """The headers each step's message would carry, by step id (no message is sent)."""
    headers: dict[int, dict[str, Any]] = {}

    def send_steps(step_ids: list[int], *, traces: dict | None = None) -> None:
        for step_id in step_ids:
            headers[step_id] = tracing.message_headers(traces or {}, [step_id])

    monkeypatch.setattr(work, "send_steps", send_steps)
    return headers


@pytest.fixture
def worker(sent, django_capture_on_commit_callbacks) -> Callable[..., Any]:
    """Run a run's scheduled steps as a worker would, each from its message's headers."""

    def deliver(run):
        for _ in range(20):
            step = run.steps.filter(state=StepState.SCHEDULED).order_by("id").first()
            if step is None:
                break
            with django_capture_on_commit_callbacks(execute=True):
                tasks.execute_step.apply(args=[step.pk], headers=sent.get(step.pk, {}))
        run.refresh_from_db()
        return run

    return deliver


def committed(django_capture_on_commit_callbacks, function, *args, **kwargs):
    with django_capture_on_commit_callbacks(execute=True):
        return function(*args, **kwargs)


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith(prefix)]


class TestOffByDefault:
    def test_a_run_stores_no_context_and_its_messages_carry_none(
        self, start, sent, worker, django_capture_on_commit_callbacks
    ):
        run = committed(django_capture_on_commit_callbacks, start, "test_linear")

        worker(run)

        assert run.trace_context == {}
        assert len(sent) == 3
        assert all(headers == {} for headers in sent.values())

    @pytest.mark.parametrize(
        ("environ", "exporter"),
        [
            ({}, ""),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
            ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
            ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
            ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ""),
            ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ""),
        ],
    )
    def test_the_standard_variables_turn_it_on(self, environ, exporter):
        assert tracing.wanted(environ) == exporter

    def test_an_exporter_it_does_not_ship_is_refused_by_name(self):
        with pytest.raises(ImproperlyConfigured, match="zipkin"):
            tracing.wanted({"OTEL_TRACES_EXPORTER": "zipkin"})


class TestOneTracePerRun:
    def test_the_start_is_a_child_of_the_current_span_and_its_context_is_kept_on_the_run(
        self, exporter, start
    ):
        tracer = tracing._provider.get_tracer("test")
        with tracer.start_as_current_span("POST /api/v1/workflows") as request:
            run = start("test_linear")

        [started] = named(exporter, "baton.start")
        assert started.name == "baton.start test_linear"
        assert started.parent.span_id == request.get_span_context().span_id
        assert started.attributes["baton.run_id"] == str(run.pk)
        assert run.trace_context["traceparent"].split("-")[2] == f"{started.context.span_id:016x}"
        run.refresh_from_db()
        assert run.trace_context["traceparent"].split("-")[1] == f"{started.context.trace_id:032x}"

    def test_each_attempt_joins_the_runs_trace_through_its_message(
        self, exporter, start, worker, sent, django_capture_on_commit_callbacks
    ):
        run = committed(django_capture_on_commit_callbacks, start, "test_linear")

        run = worker(run)

        assert run.state == RunState.SUCCEEDED
        [started] = named(exporter, "baton.start")
        steps = named(exporter, "baton.step")
        assert [span.name for span in steps] == [
            "baton.step first",
            "baton.step second",
            "baton.step third",
        ]
        for span in steps:
            assert span.context.trace_id == started.context.trace_id
            assert span.parent.span_id == started.context.span_id
            assert span.attributes["baton.run_id"] == str(run.pk)
            assert span.attributes["baton.attempt"] == 1
            assert span.attributes["baton.outcome"] == "completed"
        assert steps[1].attributes["baton.idempotency_key"] == f"{run.pk}:second"
        assert all(tracing.HEADER in headers for headers in sent.values())

    def test_a_failed_attempt_says_why_and_compensations_have_spans_of_their_own(
        self, exporter, start, worker, django_capture_on_commit_callbacks
    ):
        run = committed(
            django_capture_on_commit_callbacks,
            start,
            "test_linear",
            {"simulate": {"second": "decline"}},
        )

        run = worker(run)

        assert run.state == RunState.COMPENSATED
        [started] = named(exporter, "baton.start")
        [failed] = [s for s in named(exporter, "baton.step") if s.name == "baton.step second"]
        assert failed.attributes["baton.outcome"] == "errored"
        assert failed.attributes["baton.retryable"] is False
        assert not failed.status.is_ok
        [undo] = named(exporter, "baton.compensate")
        assert undo.name == "baton.compensate first"
        assert undo.attributes["baton.compensation"] is True
        assert undo.context.trace_id == started.context.trace_id

    def test_a_human_task_spans_its_opening_to_its_decision(
        self, exporter, start_expense, carol, django_capture_on_commit_callbacks
    ):
        run = start_expense()
        task = run.human_tasks.get()

        committed(
            django_capture_on_commit_callbacks,
            human_tasks.approve_human_task,
            task_id=task.pk,
            user=carol,
            channel=Channel.INBOX,
        )

        [started] = named(exporter, "baton.start")
        [decided] = named(exporter, "baton.human_task")
        assert decided.name == "baton.human_task manager_approval"
        assert decided.context.trace_id == started.context.trace_id
        assert decided.parent.span_id == started.context.span_id
        assert decided.attributes["baton.outcome"] == "approved"
        assert decided.start_time == int(task.created_at.timestamp() * 1_000_000_000)
        assert decided.end_time > decided.start_time


class TestLogLines:
    def test_carry_the_ids_of_the_span_they_were_written_in(self, exporter, start, caplog):
        caplog.set_level(logging.INFO, logger="baton")
        caplog.handler.addFilter(tracing.TraceIdsFilter())

        run = start("test_linear")

        [started] = named(exporter, "baton.start")
        [line] = [r for r in caplog.records if r.message == "run.started"]
        assert line.trace_id == f"{started.context.trace_id:032x}"
        assert line.span_id == f"{started.context.span_id:016x}"
        assert line.run_id == str(run.pk)

    def test_carry_no_ids_while_tracing_is_off(self, start, caplog):
        caplog.set_level(logging.INFO, logger="baton")
        caplog.handler.addFilter(tracing.TraceIdsFilter())

        start("test_linear")

        [line] = [r for r in caplog.records if r.message == "run.started"]
        assert not hasattr(line, "trace_id")
