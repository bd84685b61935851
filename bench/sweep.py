"""The sweep's cost with few and with many waiting runs, the same number of timers due.

In each seeded database, `due_timers` sleeping runs are cloned with timers already
due, then `engine.sweep(now=...)` is called in-process until it finds nothing due,
timed as a whole. The cloned runs are deleted afterwards, so the seeded database
stays as it was for the next run. The large database's timers are fired a second
time with the set path off (`workflows.engine.timers`), every timer the per-run way:
the same run's baseline for timers per second.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from unittest import mock

from django.utils import timezone

from bench import seed
from bench.measure import now_ns
from bench.profiles import Profile
from bench.report import Result
from bench.switch import using_database
from workflows import engine
from workflows.engine import timers


def drain(*, now: Any) -> tuple[float, int, int]:
    """Sweep until nothing is due; return seconds taken, timers fired and sweeps made."""
    fired = calls = 0
    started = now_ns()
    while True:
        counts = engine.sweep(now=now)
        calls += 1
        fired += counts["steps"]
        if counts["steps"] == 0:
            break
    return (now_ns() - started) / 1e9, fired, calls


def measure(
    *, database: str, templates: dict[str, Any], count: int, per_run: bool = False, rounds: int = 1
) -> tuple[float, int, int]:
    """Fire `count` cloned timers; return seconds, timers fired and sweeps made. With
    `per_run`, the set path is switched off (every timer fired the per-run way), for a
    baseline measured in the same run. With `rounds`, that many sets are cloned and fired
    one after another, and the median round is returned: one drain is tens of
    milliseconds, and a single one measured the neighbours as much as the sweep."""
    measured = []
    with using_database(database):
        drain(now=timezone.now())  # warm the connection; nothing of ours is due yet
        for _ in range(rounds):
            tag = f"bench-due-{os.getpid()}-{now_ns()}"
            seed.add_due_timers(
                templates=templates, count=count, due_before=timezone.now(), tag=tag
            )
            try:
                with _set_path_off() if per_run else nullcontext():
                    measured.append(drain(now=timezone.now()))
            finally:
                seed.remove_runs(tag=tag)
    return sorted(measured)[len(measured) // 2]


@contextmanager
def _set_path_off() -> Iterator[None]:
    with mock.patch.object(timers, "fire_due_timers", return_value=set()):
        yield


def run(*, profile: Profile, seeded: dict[str, dict[str, Any]]) -> list[Result]:
    small, large = seeded["small"], seeded["large"]
    count = profile.due_timers
    small_s, small_fired, small_calls = measure(
        database=small["name"], templates=small["templates"], count=count
    )
    large_s, large_fired, large_calls = measure(
        database=large["name"], templates=large["templates"], count=count
    )
    per_run_s, per_run_fired, _ = measure(
        database=large["name"], templates=large["templates"], count=count, per_run=True
    )

    def about(fired: int, calls: int, runs: int) -> str:
        return f"{fired:,} of {count:,} timers fired by {calls} sweeps; {runs:,} waiting runs"

    return [
        Result(
            "sweep_small_s",
            small_s,
            samples=small_fired,
            note=about(small_fired, small_calls, profile.small.waiting_runs),
        ),
        Result(
            "sweep_large_s",
            large_s,
            small_s,
            samples=large_fired,
            note=about(large_fired, large_calls, profile.large.waiting_runs),
        ),
        Result(
            "timers_per_run_per_s",
            per_run_fired / per_run_s if per_run_s else None,
            note="the large sweep's timers fired with the set path off (workflows.engine.timers)",
        ),
        Result(
            "timers_per_s",
            large_fired / large_s if large_s else None,
            per_run_fired / per_run_s if per_run_s else None,
            note="timers fired ÷ the large sweep's time (a fired timer moves its run on to a "
            "no-op activity, enqueued)",
        ),
    ]
