"""Clusters of their own for e2e tests that need another broker or another way to the database.

The package's cluster (see conftest) runs over CELERY_BROKER_URL, straight to
PostgreSQL. `cluster_on` runs two workers and two beats over RabbitMQ, or through
PgBouncer, for one module; `this_process_sends_to` points this process's Celery
app at the same broker meanwhile, since a run started here sends its first step.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from celery import current_app
from django.conf import settings
from kombu import Connection, pools

from config.settings import task_queues
from tests.e2e.conftest import WORKERS, Cluster
from tests.pgbouncer import PgBouncer


@contextmanager
def this_process_sends_to(url: str) -> Iterator[None]:
    """Point this process's Celery app at the broker `url`, with that broker's queues."""
    app = current_app
    # Celery settles the read and write URLs from broker_url at configuration, and
    # connects with those: all three change, or messages still go to the first broker.
    keys = ("broker_url", "broker_read_url", "broker_write_url", "task_queues")
    saved = {key: app.conf[key] for key in keys}
    app.conf.update(
        broker_url=url, broker_read_url=url, broker_write_url=url, task_queues=task_queues(url)
    )
    _forget_connections(app)
    with app.connection_for_write() as connection:
        assert connection.as_uri() == Connection(url).as_uri(), "not pointed at the new broker"
    try:
        yield
    finally:
        app.conf.update(saved)
        _forget_connections(app)


def _forget_connections(app) -> None:
    """Drop the app's pooled connections and its queue table, rebuilt from conf when next used."""
    # kombu keeps pools in a registry by broker: closed, one would be handed back closed.
    pools.reset()
    app._pool = None
    app.__dict__.pop("amqp", None)  # a cached property: its producer pool and queues


@contextmanager
def cluster_on(
    logs: Path, *, broker_url: str | None = None, env: dict[str, str] | None = None
) -> Iterator[Cluster]:
    """Run two workers and two beats over `broker_url` (CELERY_BROKER_URL's by default),
    with `env` on top of the package cluster's environment, and send this process's
    messages to the same broker.

    As the package's own cluster does (see conftest), against the same test database:
    the two must not run at once, or both sweep the same rows. These tests' modules
    do not use the package's `cluster` fixture, so they run before it starts.
    """
    broker_url = broker_url or settings.CELERY_BROKER_URL
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        "CELERY_BROKER_URL": broker_url,
        "BATON_SWEEP_INTERVAL": "1",  # whole seconds, as the database schedules them
        "BATON_REDISPATCH_AFTER": "5",
        "BATON_WORKFLOW_MODULES": "workflows.examples.order,tests.workflows.definitions",
        "BATON_LOG_LEVEL": "INFO",
        **(env or {}),
    }
    with this_process_sends_to(broker_url):
        current_app.control.purge()
        cluster = Cluster(env, logs)
        try:
            cluster.start_beat("beat-a", shared=True)
            cluster.start_beat("beat-b", shared=True)
            cluster.ensure_workers(WORKERS)
            yield cluster
        finally:
            cluster.stop()


@contextmanager
def cluster_behind_pgbouncer(pgbouncer: PgBouncer, logs: Path) -> Iterator[Cluster]:
    """`cluster_on` with the workers and beats reaching PostgreSQL only through PgBouncer
    in transaction mode, with BATON_DB_POOLER=pgbouncer, as a deployment behind it would."""
    env = {
        "DATABASE_URL": pgbouncer.url(settings.DATABASES["default"]["NAME"]),
        "BATON_DB_POOLER": "pgbouncer",
    }
    with cluster_on(logs, env=env) as cluster:
        yield cluster
