"""Per-activity queues and limits: what `Activity(queue=, rate_limit=, concurrency=)` means.

A queue names the Celery queue an activity's steps are sent to (workers choose
theirs with `-Q`), so PCI or GPU work runs on workers of its own. A limit caps how
many of an activity's attempts may run at once (`concurrency`) and how many may
start per window of time (`rate_limit`, "N/s", "N/m" or "N/h"), across every
worker: the database keeps the count (see `workflows.engine.limits`).

This module holds the pure part: reading a rate, the static check's problems,
and the decision whether one more attempt may start now. No ORM, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

# Queue names Celery and both brokers accept without quoting: letters, digits, ".", "-", "_".
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_RATE = re.compile(r"^\s*(\d+)\s*/\s*([smh])\s*$")
_PERIODS = {"s": 1, "m": 60, "h": 3600}
# Queues Baton's own tasks use: an activity routed there would share them with the sweep.
RESERVED_QUEUES = ("baton.sweep",)


@dataclass(frozen=True)
class Rate:
    """At most `count` attempts may start in each window of `seconds` seconds."""

    count: int
    seconds: int

    def __str__(self) -> str:
        unit = {1: "s", 60: "m", 3600: "h"}[self.seconds]
        return f"{self.count}/{unit}"

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        """Return the window `now` falls in: windows are aligned to the clock (a "/m"
        window starts at a whole minute), so every worker agrees on them."""
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        elapsed = (now - epoch) // timedelta(seconds=self.seconds)
        start = epoch + timedelta(seconds=elapsed * self.seconds)
        return start, start + timedelta(seconds=self.seconds)


def parse_rate(text: str) -> Rate:
    """Return the rate `text` says ("50/m": fifty a minute); raise ValueError if it says none."""
    match = _RATE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a rate: write it as N/s, N/m or N/h, e.g. '50/m'")
    count = int(match.group(1))
    if count < 1:
        raise ValueError(f"{text!r} allows no attempt at all: the count must be at least 1")
    return Rate(count=count, seconds=_PERIODS[match.group(2)])


class Limited(Protocol):
    """What an Activity or a Map says about its queue and limits."""

    name: str
    queue: str | None
    rate_limit: str | None
    concurrency: int | None


def is_limited(node: Limited) -> bool:
    """Whether attempts of `node` wait for the database's count before they start."""
    return node.rate_limit is not None or node.concurrency is not None


def dispatched_eagerly(node: Limited) -> bool:
    """Whether a worker may run `node` right after the step before it (eager dispatch):
    not when it belongs to another queue's workers, nor when its limits must be counted."""
    return node.queue is None and not is_limited(node)


def limit_key(workflow_type: str, node: str) -> str:
    """The name the database counts `node`'s attempts under (shared by every version)."""
    return f"{workflow_type}:{node}"


def problems(node: Limited, *, kind: str, local: bool = False) -> list[str]:
    """Return what is wrong with `node`'s queue and limits, for the static check."""
    found = []
    if node.queue is not None:
        if not isinstance(node.queue, str) or not _QUEUE_NAME.match(node.queue):
            found.append(
                f"{kind} {node.name!r} has queue={node.queue!r}: a queue name is letters, "
                "digits, '.', '-' and '_' (at most 100)"
            )
        elif node.queue in RESERVED_QUEUES:
            found.append(
                f"{kind} {node.name!r} has queue={node.queue!r}, the sweep's own queue: "
                "name a queue for its workers"
            )
    if node.rate_limit is not None:
        try:
            parse_rate(node.rate_limit)
        except ValueError as error:
            found.append(f"{kind} {node.name!r} has rate_limit={node.rate_limit!r}: {error}")
    concurrency = node.concurrency
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        found.append(
            f"{kind} {node.name!r} has concurrency={concurrency!r}: it must be a whole number "
            "of at least 1"
        )
    if local and (node.queue is not None or is_limited(node)):
        found.append(
            f"{kind} {node.name!r} is local (it runs on the worker that ran the step before) "
            "and so can have no queue, rate_limit or concurrency"
        )
    return found


@dataclass(frozen=True)
class Admission:
    """The decision for one attempt: start now, or wait until `retry_at`."""

    admitted: bool
    retry_at: datetime | None = None
    # "concurrency" or "rate" when refused, for the logs.
    reason: str = ""
    # The time the decision was made for (set by engine.limits when it read the clock).
    at: datetime | None = None


# How long an attempt refused for want of a free slot waits before it asks again; the
# sweep then sends it as slots free up (an attempt's end frees its slot at once).
CONCURRENCY_RECHECK = timedelta(seconds=1)


def admit(
    *,
    rate: Rate | None,
    concurrency: int | None,
    in_flight: int,
    window_start: datetime | None,
    window_count: int,
    now: datetime,
) -> Admission:
    """Decide whether one more attempt may start at `now`.

    `in_flight` attempts are running; `window_count` started in the window that
    began at `window_start` (a window other than the current one counts for nothing).
    """
    if concurrency is not None and in_flight >= concurrency:
        return Admission(False, now + CONCURRENCY_RECHECK, "concurrency")
    if rate is not None:
        start, end = rate.window(now)
        started = window_count if window_start == start else 0
        if started >= rate.count:
            return Admission(False, end, "rate")
    return Admission(True)


def free_slots(
    *,
    rate: Rate | None,
    concurrency: int | None,
    in_flight: int,
    window_start: datetime | None,
    window_count: int,
    now: datetime,
) -> int:
    """Return how many more attempts `admit` would let start at `now`, all else equal
    (the sweep sends no more than that many waiting steps). None means no limit."""
    free = None
    if concurrency is not None:
        free = max(concurrency - in_flight, 0)
    if rate is not None:
        start, _ = rate.window(now)
        left = rate.count - (window_count if window_start == start else 0)
        free = max(left, 0) if free is None else min(free, max(left, 0))
    return free if free is not None else UNLIMITED


# As many as anyone would send: what `free_slots` says when nothing limits.
UNLIMITED = 1_000_000
