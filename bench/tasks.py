"""Raw Celery tasks, the baselines: no database, nothing but the broker and the worker.

They run on the same workers, queue and settings as the engine's steps (acks late,
prefetch 1, JSON). `done` reports completion by pushing to a Redis list the
benchmark is blocked on (BLPOP), so the end of a chain is seen the moment it happens.
"""

from __future__ import annotations

from functools import cache

import redis
from celery import shared_task
from django.conf import settings


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


@shared_task(name="bench.noop", acks_late=True, reject_on_worker_lost=True)
def noop() -> None:
    """Do nothing: one link of a raw chain."""


@shared_task(name="bench.done", acks_late=True, reject_on_worker_lost=True)
def done(key: str, token: str) -> None:
    """Tell the benchmark that a chain (or a single round trip) reached its end."""
    _redis().lpush(key, token)
