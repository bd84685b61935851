"""The Celery application: configured from Django settings under the CELERY_ namespace."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import (
    beat_init,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_shutdown,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("baton")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def run_system_checks(**kwargs: object) -> None:
    """Refuse to start a worker or beat on a definition that fails its static check."""
    from django.core import checks

    errors = [message for message in checks.run_checks() if message.is_serious()]
    if errors:
        # Celery logs a handler's Exception and starts anyway; SystemExit stops it.
        raise SystemExit("\n".join(str(message) for message in errors))


@worker_init.connect
def refuse_to_start(**kwargs: object) -> None:
    """Refuse to start a worker while runs wait on a workflow version it does not register,
    or on a database without the functions it calls (their next step would fail): name
    the type, the version and the run count, or the function (workflows.checks).

    Reads the database once, here and not at import; the connection is closed before
    the pool forks, so no child inherits it.
    """
    from django.core.exceptions import ImproperlyConfigured
    from django.db import connections

    from workflows.checks import refuse_to_start as refuse

    try:
        refuse()
    except ImproperlyConfigured as refusal:
        # Celery logs a handler's Exception and starts anyway; SystemExit stops it.
        raise SystemExit(f"Refusing to start the worker: {refusal}") from None
    finally:
        connections.close_all()


@setup_logging.connect
def use_django_logging(**kwargs: object) -> None:
    """Leave logging to Django's LOGGING: Celery's lines then come out as JSON like the rest.

    Connected, this receiver stops Celery from installing its own plain-text handlers
    on the root logger (and from redirecting stdout into the log).
    """


@worker_init.connect
def serve_worker_metrics(sender: object, **kwargs: object) -> None:
    """Open this worker's metrics port when BATON_METRICS_PORT is set (see README, Metrics)."""
    from workflows import exposition

    exposition.serve_worker_metrics()


@worker_process_shutdown.connect
def flush_traces(**kwargs: object) -> None:
    """Export a pool process's last spans before it exits."""
    from workflows import tracing

    tracing.flush()


@worker_init.connect
@beat_init.connect
def quiet_idle_sweeps(**kwargs: object) -> None:
    """Keep Celery's per-message lines about the sweep out of an info-level log."""
    from workflows.tasks import quiet_sweep_logs

    quiet_sweep_logs()


@task_prerun.connect
@task_postrun.connect
def reuse_database_connections(**kwargs: object) -> None:
    """Treat each task as Django treats a request: keep a healthy connection open.

    Celery's Django fix-up closes the connection around every task unless
    CELERY_DB_REUSE_MAX is set, which cost each step a new PostgreSQL session
    (about 2.4 ms, a quarter of a step). With reuse allowed, Django's own rules
    apply here instead: drop a connection past CONN_MAX_AGE, one left inside a
    transaction (none leaks into the next task), and one that fails its health
    check after a database restart.
    """
    from django.db import close_old_connections

    task = kwargs.get("task")
    if task is not None and getattr(task.request, "is_eager", False):
        return  # run in the caller's process, inside the caller's transaction
    close_old_connections()
