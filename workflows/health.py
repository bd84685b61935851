"""Health endpoints for the web app: `/healthz` (alive) and `/readyz` (able to work).

`/healthz` answers 200 while the process serves requests and touches nothing
else: no database, no broker. `/readyz` answers 200 only when Baton can do its
work: the database and the broker answer, every migration is applied, and a
sweep ran recently (the sweep task records when, see `workflows.heartbeats`; a
stale sweep means beat or the workers serving `baton.sweep` are down, so timers,
retries and escalations would not fire). Otherwise it answers 503, naming each
check that failed. Bodies are JSON and give reasons without internal addresses
or credentials; the full error goes to the log.

Both are answered by a middleware placed first, before host validation and the
HTTPS redirect, so a container healthcheck or load balancer probing the process
by its own address gets the answer, not a 400 or a redirect. Neither reads the
Host header, cookies or anything else from the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from workflows import heartbeats

logger = logging.getLogger("baton.health")

OK = "ok"


def check_database() -> str:
    """Run `SELECT 1` on the database."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
    return OK


def check_broker() -> str:
    """Connect to the broker once (no retries), within Celery's connection timeout."""
    with current_app.connection_for_read() as connection:
        connection.ensure_connection(max_retries=0)
    return OK


def check_migrations() -> str:
    """Name the migrations not yet applied to the database."""
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
        raise NotReady(f"{len(names)} not applied: {', '.join(names[:5])}")
    return OK


def check_sweep(*, now: datetime) -> str:
    """Say whether the last sweep is recent enough (BATON_SWEEP_STALE_AFTER seconds)."""
    reason = heartbeats.why_stale(
        name=heartbeats.SWEEP,
        last=heartbeats.last_seen(name=heartbeats.SWEEP),
        now=now,
        stale_after=timedelta(seconds=settings.BATON_SWEEP_STALE_AFTER),
    )
    if reason:
        raise NotReady(f"{reason}: is beat running, and a worker consuming baton.sweep?")
    return OK


class NotReady(Exception):
    """A check failed for a reason it can state safely."""


def readiness(*, now: datetime) -> dict[str, str]:
    """Run every check and return each one's result: "ok", or why it failed."""
    results = {"database": _run("database", check_database)}
    if results["database"] == OK:
        results["migrations"] = _run("migrations", check_migrations)
        results["sweep"] = _run("sweep", lambda: check_sweep(now=now))
    else:
        results["migrations"] = results["sweep"] = "not checked: the database is unreachable"
    results["broker"] = _run("broker", check_broker)
    return results


def _run(name: str, check: Callable[[], str]) -> str:
    try:
        return check()
    except NotReady as reason:
        logger.warning("readiness.failed", extra={"check": name, "reason": str(reason)})
        return f"failed: {reason}"
    except Exception as error:
        # The error's text may carry hosts, ports or user names: log it, answer its kind.
        logger.warning("readiness.failed", extra={"check": name}, exc_info=True)
        return f"failed: {type(error).__name__} (see the web app's log)"


def healthz(request: HttpRequest) -> HttpResponse:
    """Answer 200 while the process serves requests; touch nothing else."""
    return _json({"status": "alive"}, status=200)


def readyz(request: HttpRequest) -> HttpResponse:
    """Answer 200 if Baton can work, else 503 naming each check that failed."""
    checks = readiness(now=timezone.now())
    failed = [name for name, result in checks.items() if result != OK]
    if failed:
        return _json({"status": "not ready", "failed": failed, "checks": checks}, status=503)
    return _json({"status": "ready", "checks": checks}, status=200)


ENDPOINTS: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz,
    "/readyz": readyz,
}


def health_endpoints(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Middleware answering GET or HEAD /healthz and /readyz before all other middleware."""

    def middleware(request: HttpRequest) -> HttpResponse:
        endpoint = ENDPOINTS.get(request.path_info)
        if endpoint is None:
            return get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = _json({"status": "method not allowed"}, status=405)
            response["Allow"] = "GET, HEAD"
            return response
        return endpoint(request)

    return middleware


def _json(body: dict, *, status: int) -> HttpResponse:
    response = JsonResponse(body, status=status)
    add_never_cache_headers(response)
    return response
