"""Serving Baton's metrics to Prometheus: `/metrics` on the web app and a port on each worker.

Both answer only a request bearing `Authorization: Bearer <BATON_METRICS_TOKEN>`;
with no token set, `/metrics` answers 404 saying so and workers open no port, so
nothing is exposed unless an operator asks for it.

The web app's `/metrics` is answered by a middleware placed first, like
`/healthz`, so Prometheus can scrape the process by its own address whatever
DJANGO_ALLOWED_HOSTS and the HTTPS redirect say. It also carries the gauges read
from the database at scrape time (the due backlog and how late the oldest due
step is, human tasks by SLA and by group), each from an indexed query whose
count stops at `COUNT_CAP`, so a scrape costs the same however many rows exist.
A worker's port (BATON_METRICS_PORT) serves what its processes counted, never
the database gauges, so they are counted once, by the web app.

Each process counts in its own memory. Under gunicorn or Celery's prefork pool,
prometheus-client's multiprocess mode adds the processes up at scrape time: set
PROMETHEUS_MULTIPROC_DIR to an empty directory of the process group's own
(gunicorn.conf.py makes one for gunicorn when it is unset).
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from workflows import metrics
from workflows.models import StepRun
from workflows.states import RUNS_THAT_START_STEPS, SWEPT_STEP_STATES

logger = logging.getLogger("baton.metrics")

PATH = "/metrics"
# Counts read at scrape time stop here: past it the number says "at least this many".
COUNT_CAP = 10_000


def exposition(*, with_database: bool) -> bytes:
    """Render every process's metrics (and, for the web app, the database gauges)."""
    # No auto-describe: registering a collector would otherwise collect it (and query
    # the database) once more, to learn its names.
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY if not with_database else _with(REGISTRY, registry)
    if with_database:
        registry.register(DatabaseGauges())
    return generate_latest(registry)


def _with(source: CollectorRegistry, target: CollectorRegistry) -> CollectorRegistry:
    class _Process(Collector):
        def collect(self) -> Iterator[Any]:
            return iter(source.collect())

    target.register(_Process())
    return target


def refusal(authorization: str) -> tuple[int, str] | None:
    """Return why a scrape with this Authorization header is refused (status, reason), or None."""
    token = settings.BATON_METRICS_TOKEN
    if not token:
        return 404, "Metrics are off: set BATON_METRICS_TOKEN to serve them (see README)."
    scheme, _, offered = authorization.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(offered.strip(), token):
        return 401, "Send the metrics token as Authorization: Bearer <BATON_METRICS_TOKEN>."
    return None


def metrics_endpoint(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Middleware answering GET or HEAD /metrics before all other middleware."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if request.path_info != PATH:
            return get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = HttpResponse("Use GET.\n", status=405, content_type="text/plain")
            response["Allow"] = "GET, HEAD"
            return response
        refused = refusal(request.headers.get("Authorization", ""))
        if refused is not None:
            status, reason = refused
            response = HttpResponse(reason + "\n", status=status, content_type="text/plain")
            if status == 401:
                response["WWW-Authenticate"] = 'Bearer realm="baton-metrics"'
        else:
            response = HttpResponse(
                exposition(with_database=True), content_type=CONTENT_TYPE_LATEST
            )
        response["Cache-Control"] = "no-store"
        return response

    return middleware


class DatabaseGauges(Collector):
    """Gauges read from the database when Prometheus scrapes: how late the engine is, and
    what the apps registered (`workflows.metrics.add_scrape_gauges`)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        yield from _families(engine_gauges(now))
        for function in metrics.scrape_gauges():
            yield from _families(function(now))


def _families(gauges: list) -> Iterator[GaugeMetricFamily]:
    for name, documentation, labels, samples in gauges:
        family = GaugeMetricFamily(name, documentation, labels=labels)
        for values, value in samples:
            family.add_metric(values, value)
        yield family


def engine_gauges(now: datetime) -> list:
    """The due backlog and the age of its oldest step, as the sweep sees them (its index)."""
    due = StepRun.objects.filter(
        state__in=SWEPT_STEP_STATES,
        due_at__isnull=False,
        due_at__lte=now,
        run__state__in=RUNS_THAT_START_STEPS,
    )
    backlog = capped_count(due)
    oldest = due.order_by("due_at").values_list("due_at", flat=True).first()
    lag = max((now - oldest).total_seconds(), 0.0) if oldest is not None else 0.0
    return [
        (
            "baton_due_steps",
            f"Steps due for the sweep now (retries, timers, lost messages, expired leases; "
            f"counted up to {COUNT_CAP}).",
            [],
            [([], backlog)],
        ),
        (
            "baton_oldest_due_step_age_seconds",
            "How long the oldest due step has been due: how late the engine is.",
            [],
            [([], lag)],
        ),
    ]


def capped_count(queryset: Any) -> int:
    """Count rows up to COUNT_CAP, reading no more index entries than that."""
    return queryset.values("pk")[:COUNT_CAP].count()


# ---------------------------------------------------------------------------
# A worker's port
# ---------------------------------------------------------------------------


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every 15 s is not worth a log line


def worker_app(environ: dict[str, Any], start_response: Callable) -> list[bytes]:
    """WSGI app of a worker's metrics port: /metrics behind the token, nothing else."""
    if environ.get("PATH_INFO") != PATH:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"Only /metrics is served here.\n"]
    refused = refusal(environ.get("HTTP_AUTHORIZATION", ""))
    if refused is not None:
        status, reason = refused
        headers = [("Content-Type", "text/plain")]
        if status == 401:
            headers.append(("WWW-Authenticate", 'Bearer realm="baton-metrics"'))
        start_response(f"{status} {'Unauthorized' if status == 401 else 'Not Found'}", headers)
        return [reason.encode() + b"\n"]
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
    return [exposition(with_database=False)]


def serve_worker_metrics() -> WSGIServer | None:
    """Open this worker's metrics port if BATON_METRICS_PORT is set (in its main process).

    The settings refuse the port without a token, or without PROMETHEUS_MULTIPROC_DIR
    (the pool's processes count in their own memory, which only that directory
    lets the main process read).
    """
    port = settings.BATON_METRICS_PORT
    if not port:
        return None
    server = make_server(
        settings.BATON_METRICS_ADDRESS,
        port,
        worker_app,
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )
    threading.Thread(target=server.serve_forever, name="baton-metrics", daemon=True).start()
    logger.info("metrics.serving", extra={"address": settings.BATON_METRICS_ADDRESS, "port": port})
    return server
