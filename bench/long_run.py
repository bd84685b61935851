"""Step cost at the start and at the end of one long run (10,000 chained no-op steps).

The run is driven in-process with the real engine only (`start_workflow`, then
`execute_step` on each next step), so it measures what a long run costs the
engine, whatever the schema. It takes minutes, so it is a group of its own, and
it rides out a lost database connection the way Baton's durability promises: a
step interrupted mid-attempt is left to the sweep (its lease expires, its retry
is scheduled), the interrupted attempt's time is discarded, and driving goes on.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from bench import long_chain
from bench.engine import next_step, start
from bench.measure import median, now_ns
from bench.profiles import Profile
from bench.report import Result
from workflows import engine
from workflows.models import WorkflowRun

_LOST = (OperationalError, InterfaceError)


def _reconnect() -> None:
    """Wait (up to two minutes) until the database answers again."""
    deadline = time.monotonic() + 120
    while True:
        connection.close()
        try:
            connection.ensure_connection()
            return
        except _LOST:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _unstick(run: WorkflowRun, *, after: datetime) -> datetime:
    """Sweep at ever later times until the run has a step to execute again; return the time."""
    moment = after
    for _ in range(20):
        if next_step(run=run) is not None:
            break
        moment += timedelta(hours=1)
        engine.sweep(now=moment)
    return moment


def run(*, profile: Profile) -> list[Result]:
    steps = profile.long_run_steps
    long = start(workflow_type=long_chain.name_for(steps))
    times: dict[int, float] = {}
    number = interruptions = 0
    moment = timezone.now()
    while True:
        try:
            step_id = next_step(run=long)
            if step_id is None:
                break
            number += 1
            started = now_ns()
            engine.execute_step(step_id=step_id)
            times[number] = (now_ns() - started) / 1e6
        except _LOST:
            interruptions += 1
            _reconnect()
            moment = _unstick(long, after=max(moment, timezone.now()))
    long.refresh_from_db()
    # Medians over a twentieth of the run at each end (at least 11 steps): 11 samples
    # alone moved the ratio between 1.08 and 1.61 from one run to the next on one VM.
    window = max(11, steps // 20)
    early = [times[index] for index in range(5, 5 + window) if index in times]
    late = [times[index] for index in range(number - window + 1, number + 1) if index in times]
    plural = "s" if interruptions != 1 else ""
    lost = f"; resumed after {interruptions} lost connection{plural}" if interruptions else ""
    return [
        Result(
            "long_run_step_ms",
            median(late),
            median(early),
            note=f"one run of {steps:,} chained no-op steps; median of steps "
            f"{number - window + 1:,}-{number:,} vs steps 5-{4 + window:,}; "
            f"the run ended {long.state}{lost}",
            samples=len(times),
            extra={"steps": number, "state": long.state, "interruptions": interruptions},
        )
    ]
