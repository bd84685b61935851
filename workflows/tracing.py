"""OpenTelemetry traces spanning a run: one trace per run, however long it lasts.

A run's start is a span (`baton.start <type>`), the child of whatever span is
current: the HTTP request that started it (opentelemetry-instrumentation-django),
or none. Its context is stored on the run (`WorkflowRun.trace_context`, W3C
trace-context fields), and every step message carries it in a header
(`baton_trace`), taken from the run in memory when the step is sent: by the
use case that scheduled it, or by the sweep hours later. The worker makes it the
parent of the attempt's span (`baton.step <node>`, `baton.compensate <node>`,
with run id, node, attempt, idempotency key and outcome), so every step of a run
joins the run's trace, whichever process runs it and whenever. A human task's
span (`baton.human_task <node>`) covers its opening to its decision.

Off by default, and then every call here returns at once. The standard OTEL_*
variables turn it on (`configure`, called when Django starts): an OTLP endpoint
(OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
OTEL_TRACES_EXPORTER=otlp|console; OTEL_SDK_DISABLED=true keeps it off. The
SDK reads the rest itself (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
OTEL_TRACES_SAMPLER, OTEL_BSP_*, the exporter's headers and timeout).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

    from workflows.models import StepRun, WorkflowRun

logger = logging.getLogger("baton.tracing")

# The Celery header carrying each step's run context: {"<step id>": {"traceparent": ...}}.
HEADER = "baton_trace"
_tracer: Tracer | None = None
_provider: TracerProvider | None = None

F = TypeVar("F", bound=Callable[..., Any])


def enabled() -> bool:
    return _tracer is not None


def wanted(environ: Mapping[str, str] = os.environ) -> str:
    """Return the exporter the OTEL_* variables ask for ("otlp", "console"), or "" for none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ""
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        if exporter == "none":
            return ""
        if exporter not in ("otlp", "console"):
            raise ImproperlyConfigured(
                f"OTEL_TRACES_EXPORTER={exporter!r} is not supported by Baton: use otlp, console "
                "or none."
            )
        return exporter
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return "otlp" if endpoint else ""


def configure() -> None:
    """Turn tracing on in this process if the OTEL_* variables ask for it (once)."""
    if _provider is not None:
        return
    exporter_name = wanted()
    if not exporter_name:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()  # reads OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, ...
    provider.add_span_processor(BatchSpanProcessor(_exporter(exporter_name)))
    trace.set_tracer_provider(provider)
    use_provider(provider)
    _instrument_django(provider)
    logger.info("tracing.on", extra={"exporter": exporter_name})


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ImproperlyConfigured(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "installed; Baton ships the http/protobuf exporter (port 4318)."
            ) from None
        return OTLPSpanExporter()
    if protocol != "http/protobuf":
        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported: use http/protobuf or grpc."
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout)


def _instrument_django(provider: TracerProvider) -> None:
    """Give each request a server span (the parent of the runs it starts)."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        # Probes and scrapes are not worth a trace each (OTEL_PYTHON_DJANGO_EXCLUDED_URLS wins).
        excluded = os.environ.get("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", "healthz,readyz,metrics")
        instrumentor.instrument(tracer_provider=provider, excluded_urls=excluded)


def use_provider(provider: TracerProvider | None) -> None:
    """Trace with `provider` (None: stop tracing). Tests pass one with an in-memory exporter."""
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer("baton") if provider is not None else None


def flush() -> None:
    """Export what is buffered (a worker process about to exit)."""
    if _provider is not None:
        _provider.force_flush()


# ---------------------------------------------------------------------------
# Runs: the start span and the context stored on the run
# ---------------------------------------------------------------------------


def traced_start(function: F) -> F:
    """Wrap a use case that starts a run in its `baton.start` span (made current)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _tracer is None:
            return function(*args, **kwargs)
        workflow_type = kwargs.get("workflow_type", "")
        with _tracer.start_as_current_span(f"baton.start {workflow_type}") as span:
            run, created = function(*args, **kwargs)
            span.set_attributes(
                {
                    "baton.run_id": str(run.pk),
                    "baton.workflow_type": run.workflow_type,
                    "baton.workflow_version": run.workflow_version,
                    "baton.created": created,
                }
            )
            return run, created

    return wrapper  # type: ignore[return-value]


def current_context() -> dict[str, str]:
    """The current span's context as W3C fields, to store on a new run ({} when off)."""
    if _tracer is None:
        return {}
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


def step_contexts(steps: list[StepRun]) -> dict[str, dict[str, str]]:
    """The run context of each step about to be sent, read from the runs in memory."""
    if _tracer is None:
        return {}
    from workflows.models import StepRun

    return run_contexts(
        (step.pk, step.run.trace_context) for step in steps if StepRun.run.is_cached(step)
    )


def run_contexts(steps: Iterable[tuple[int, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """The run context of each (step id, its run's `trace_context`) about to be sent."""
    if _tracer is None:
        return {}
    return {str(step_id): context for step_id, context in steps if context}


def message_headers(contexts: dict[str, dict[str, str]], step_ids: list[int]) -> dict[str, Any]:
    """The headers of a message for `step_ids` ({} when none of them has a context)."""
    carried = {str(i): contexts[str(i)] for i in step_ids if str(i) in contexts}
    return {HEADER: carried} if carried else {}


def step_message_context(
    headers: Mapping[str, Any] | None, step_id: int
) -> AbstractContextManager[Any]:
    """Make the run context a step's message carries current, for the attempt's span."""
    if _tracer is None or not headers:
        return nullcontext()
    carried = (headers.get(HEADER) or {}).get(str(step_id))
    return _attached(carried) if carried else nullcontext()


@contextmanager
def _attached(carrier: Mapping[str, str]) -> Iterator[None]:
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(dict(carrier)))
    try:
        yield
    finally:
        context.detach(token)


# ---------------------------------------------------------------------------
# Step attempts and human tasks
# ---------------------------------------------------------------------------


def traced_attempt(function: F) -> F:
    """Wrap running an attempt's activity in its span, under the run's context if current."""

    @functools.wraps(function)
    def wrapper(claim: Any) -> Any:
        if _tracer is None:
            return function(claim)
        context = claim.context
        compensation = bool(context.undoes_key)
        name = f"baton.{'compensate' if compensation else 'step'} {context.node}"
        with _tracer.start_as_current_span(
            name, start_time=_nanoseconds(claim.started_at), record_exception=False
        ) as span:
            span.set_attributes(
                {
                    "baton.run_id": context.run_id,
                    "baton.node": context.node,
                    "baton.attempt": context.attempt,
                    "baton.idempotency_key": context.idempotency_key,
                    "baton.compensation": compensation,
                }
            )
            outcome = function(claim)
            _describe_outcome(span, outcome)
            return outcome

    return wrapper  # type: ignore[return-value]


def _describe_outcome(span: Any, outcome: Any) -> None:
    from opentelemetry.trace import Status, StatusCode

    if outcome.cancelled:
        span.set_attribute("baton.outcome", "cancelled")
    elif outcome.error is None:
        span.set_attribute("baton.outcome", "completed")
    else:
        span.set_attributes(
            {
                "baton.outcome": "errored",
                "baton.error_type": outcome.error["type"],
                "baton.retryable": not outcome.final,
            }
        )
        span.set_status(Status(StatusCode.ERROR, outcome.error["message"][:200]))


def human_task_closed(
    *,
    run: WorkflowRun,
    node: str,
    task_id: Any,
    opened_at: datetime,
    closed_at: datetime,
    outcome: str,
) -> None:
    """Record a human task's span, from its opening to its decision (or cancel), in the run's
    trace, once the transaction that closed it commits."""
    if _tracer is None:
        return
    parent = dict(run.trace_context or {})
    attributes = {
        "baton.run_id": str(run.pk),
        "baton.node": node,
        "baton.human_task_id": str(task_id),
        "baton.outcome": str(outcome),
    }

    def record() -> None:
        from opentelemetry.propagate import extract

        if _tracer is None:
            return
        span = _tracer.start_span(
            f"baton.human_task {node}",
            context=extract(parent),
            start_time=_nanoseconds(opened_at),
            attributes=attributes,
        )
        span.end(end_time=_nanoseconds(closed_at))

    transaction.on_commit(record, robust=True)


class TraceIdsFilter(logging.Filter):
    """Write the current span's `trace_id` and `span_id` on each record while tracing is on,
    so a log line leads to its trace (and back); never drop a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _tracer is None:
            return True
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = f"{context.trace_id:032x}"
            record.span_id = f"{context.span_id:016x}"
        return True


def _nanoseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
