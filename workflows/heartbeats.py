"""Heartbeats: when the sweep last ran and each beat last ticked, kept in the database.

The sweep task records one after every sweep, so `/readyz` and `manage.py
liveness sweep` can tell that beat sends sweeps and a worker runs them. Each
beat records its own as it ticks (see `workflows.beat`), so a container's
healthcheck can tell that this beat, not only some beat, is alive. Recording is
one upsert on a one-row-per-name table.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workflows.models import Heartbeat

SWEEP = "sweep"


def record(*, name: str, now: datetime) -> None:
    """Remember that `name` was alive at `now` (one INSERT ... ON CONFLICT UPDATE)."""
    Heartbeat.objects.bulk_create(
        [Heartbeat(name=name, at=now)],
        update_conflicts=True,
        unique_fields=["name"],
        update_fields=["at"],
    )


def last_seen(*, name: str) -> datetime | None:
    """Return when `name` last recorded a heartbeat, or None if it never did."""
    return Heartbeat.objects.filter(name=name).values_list("at", flat=True).first()


def why_stale(
    *, name: str, last: datetime | None, now: datetime, stale_after: timedelta
) -> str | None:
    """Return why `name` does not look alive at `now`, or None if it does."""
    if last is None:
        return f"no {name} has been recorded yet"
    age = now - last
    if age > stale_after:
        return (
            f"the last {name} was {age.total_seconds():.0f} s ago, "
            f"more than the {stale_after.total_seconds():.0f} s allowed"
        )
    return None
