"""Beat's scheduler: django-celery-beat's, made safe to run in several replicas.

Every beat replica sends every due schedule, so two beats send each tick twice.
This scheduler stamps each message with the tick it is for (header
`baton_scheduled_for`), computed so that every beat arrives at the same time for
the same tick; `baton.start_scheduled_workflow` keys the run it starts on the
schedule's name and that time, so the second message finds the first run and
starts nothing. It also records, every few seconds, that this beat is alive
(`workflows.heartbeats`, read by `manage.py liveness beat`).
"""

from __future__ import annotations

import logging
import math
import socket
import time
from datetime import UTC, datetime
from typing import Any

from celery.schedules import BaseSchedule, crontab, schedule
from django.db import DatabaseError
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from workflows import heartbeats

logger = logging.getLogger("baton.beat")

SCHEDULED_FOR_HEADER = "baton_scheduled_for"
# Seconds between two heartbeats of one beat.
HEARTBEAT_EVERY = 10.0


def scheduled_for(*, every: BaseSchedule, last_run_at: datetime, now: datetime) -> datetime:
    """Return when the tick that is due `now` was scheduled, in UTC, the same in every beat.

    A crontab tick is its fire time: the first one after the beat's last run (so a
    beat that sends a little late, or catches up once after a pause, names the
    tick it is late for). An interval's ticks are anchored on the Unix epoch, since
    each beat counts intervals from its own last run: the tick is `now` rounded
    down to a whole number of intervals. Anything else (solar, clocked) is named by
    its due time to the second.
    """
    if isinstance(every, crontab):
        start, delta, _ = every.remaining_delta(last_run_at)
        fire = (start + delta).replace(second=0, microsecond=0)
        return fire.astimezone(UTC)
    if type(every) is schedule:
        seconds = every.run_every.total_seconds()
        ticks = math.floor(now.timestamp() / seconds)
        return datetime.fromtimestamp(ticks * seconds, tz=UTC)
    due = now + every.remaining_estimate(last_run_at)
    return datetime.fromtimestamp(round(due.timestamp()), tz=UTC)


def beat_heartbeat_name(hostname: str | None = None) -> str:
    """Return the heartbeat name of the beat on `hostname` (this host by default)."""
    return f"beat@{hostname or socket.gethostname()}"


class Scheduler(DatabaseScheduler):
    """django-celery-beat's DatabaseScheduler, stamping ticks and recording heartbeats."""

    _last_heartbeat = -math.inf

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any):
        tick = scheduled_for(
            every=entry.schedule, last_run_at=entry.last_run_at, now=timezone.now()
        )
        if advance:
            entry = self.reserve(entry)
        headers = {**entry.options.get("headers", {}), SCHEDULED_FOR_HEADER: tick.isoformat()}
        entry.options = {**entry.options, "headers": headers}
        return super().apply_async(entry, producer=producer, advance=False, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        delay = super().tick(*args, **kwargs)
        if time.monotonic() - self._last_heartbeat >= HEARTBEAT_EVERY:
            self._last_heartbeat = time.monotonic()
            try:
                heartbeats.record(name=beat_heartbeat_name(), now=timezone.now())
            except DatabaseError:
                # Beat keeps sending what is due; its healthcheck will show it stale.
                logger.warning("beat.heartbeat_failed", exc_info=True)
        return delay
