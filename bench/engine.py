"""The engine's hot path in-process, against Celery's memory:// broker (no broker server).

Steps are driven as a worker would drive them, by `engine.execute_step(step_id=...)`,
with the next step's id looked up outside the timed region; runs are started by
`engine.start_workflow`. The baseline is a raw commit round trip: a small INSERT
committed through Django's connection, as every engine transaction is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import connection, transaction

from bench import definitions
from bench.measure import counting, median, now_ns
from bench.profiles import Profile
from bench.report import Result
from workflows import engine
from workflows.models import StepRun, WorkflowRun
from workflows.states import StepState

PROBE_TABLE = "bench_commit_probe"


def commit_round_trip(*, samples: int) -> list[float]:
    """Time `samples` one-row INSERTs, each committed on its own (milliseconds)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {PROBE_TABLE} "
            "(id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), note text)"
        )
    times = []
    for _ in range(samples):
        started = now_ns()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {PROBE_TABLE} (note) VALUES (%s)", ["probe"])
        times.append((now_ns() - started) / 1e6)
    return times


def start(*, workflow_type: str) -> WorkflowRun:
    run, _ = engine.start_workflow(workflow_type=workflow_type, input={})
    return run


def next_step(*, run: WorkflowRun) -> int | None:
    """Return the id of the run's next scheduled step (read outside any timed region)."""
    return (
        StepRun.objects.filter(run=run, state=StepState.SCHEDULED)
        .order_by("id")
        .values_list("id", flat=True)
        .first()
    )


def drive(
    *,
    run: WorkflowRun,
    on_step: Callable[[int, float], None],
    on_cpu: Callable[[float], None] | None = None,
) -> int:
    """Execute the run's steps one by one; call `on_step(number, milliseconds)` for each,
    and `on_cpu(milliseconds)` with the CPU time this process spent on it."""
    number = 0
    while (step_id := next_step(run=run)) is not None:
        number += 1
        cpu = time.process_time_ns()
        started = now_ns()
        engine.execute_step(step_id=step_id)
        on_step(number, (now_ns() - started) / 1e6)
        if on_cpu is not None:
            on_cpu((time.process_time_ns() - cpu) / 1e6)
    return number


def _average(total: int, count: int) -> float:
    return total / count if count else float("nan")


def run(*, profile: Profile) -> list[Result]:
    """Measure the in-process figures of the `engine` group."""
    results: list[Result] = []
    commit = median(commit_round_trip(samples=profile.commit_samples))
    results.append(Result("commit_round_trip_ms", commit, samples=profile.commit_samples))

    # Counts: a start, the steps of a remote run, and a local chain. The first start of a
    # process also reads which events webhooks subscribe to (cached for
    # BATON_WEBHOOKS_REFRESH_SECONDS): the one counted comes after it, as most starts do.
    start(workflow_type=definitions.NOOP10)
    with counting() as counts:
        counted_run = start(workflow_type=definitions.NOOP10)
    results += [
        Result(
            "commits_per_start",
            counts.commits,
            note="bench_noop10 (10 remote no-op steps); the process's second start",
        ),
        Result("statements_per_start", counts.statements),
        Result("round_trips_per_start", counts.round_trips),
    ]
    per_step: list[tuple[int, int, int]] = []
    while (step_id := next_step(run=counted_run)) is not None:
        with counting() as counts:
            engine.execute_step(step_id=step_id)
        per_step.append((counts.commits, counts.statements, counts.round_trips))
    commits = [item[0] for item in per_step]
    statements = [item[1] for item in per_step]
    spread = (
        f"mean of the 10 steps of one run; per step {min(statements)}-{max(statements)} "
        f"statements, {min(commits)}-{max(commits)} commits (the last step also ends the run); "
        "the claim's commit does not wait for the disk (sent as statements, not functions, "
        "its SET LOCAL that says so counts as a statement)"
    )
    results += [
        Result("commits_per_remote_step", _average(sum(commits), len(commits)), note=spread),
        Result("statements_per_remote_step", _average(sum(statements), len(statements))),
        Result(
            "round_trips_per_remote_step",
            _average(sum(item[2] for item in per_step), len(per_step)),
        ),
    ]
    # The same chain started for a worker: the message's execute_step claims the first
    # step, a commit of its own (its fence), and runs the ten.
    message_run = start(workflow_type=definitions.LOCAL10)
    first = next_step(run=message_run)
    with counting() as by_message:
        engine.execute_step(step_id=first)  # type: ignore[arg-type]
    # Started by the process that runs it: the start's one write also claims the first
    # step, so the chain's figures are the call's less the start's (counted above, and the
    # same here: one statement, one round trip, one commit).
    with counting() as counts:
        local_run, _ = engine.start_workflow_here(workflow_type=definitions.LOCAL10, input={})
    local_steps = StepRun.objects.filter(run=local_run, state=StepState.SUCCEEDED).count()
    results += [
        Result(
            "commits_per_local_step",
            _average(counts.commits - 1, local_steps),
            note=(
                f"a run of {local_steps} local steps started and run by one process "
                f"(engine.start_workflow_here): totals less the start's one statement, round "
                f"trip and commit, ÷ {local_steps}; started for a worker instead (a message, "
                f"then one execute_step), {_average(by_message.commits, local_steps):.2f} "
                f"commits, {_average(by_message.statements, local_steps):.2f} statements and "
                f"{_average(by_message.round_trips, local_steps):.2f} round trips a step: the "
                "first step's claim is a commit of its own"
            ),
        ),
        Result("statements_per_local_step", _average(counts.statements - 1, local_steps)),
        Result("round_trips_per_local_step", _average(counts.round_trips - 1, local_steps)),
    ]

    # Times.
    remote_times: list[float] = []
    remote_cpu: list[float] = []
    for _ in range(profile.step_runs):
        drive(
            run=start(workflow_type=definitions.NOOP10),
            on_step=lambda _number, ms: remote_times.append(ms),
            on_cpu=remote_cpu.append,
        )
    results.append(
        Result("step_in_process_ms", median(remote_times), commit, samples=len(remote_times))
    )
    local_times: list[float] = []
    local_cpu: list[float] = []
    for _ in range(profile.step_runs):
        chain_run = start(workflow_type=definitions.LOCAL10)
        step_id = next_step(run=chain_run)
        cpu = time.process_time_ns()
        started = now_ns()
        engine.execute_step(step_id=step_id)  # type: ignore[arg-type]
        local_times.append((now_ns() - started) / 1e6 / 10)
        local_cpu.append((time.process_time_ns() - cpu) / 1e6 / 10)
    results.append(
        Result(
            "local_step_in_process_ms",
            median(local_times),
            commit,
            samples=len(local_times),
            note="one execute_step runs the 10 local steps; its time ÷ 10",
        )
    )
    results += [
        Result(
            "step_cpu_ms",
            median(remote_cpu),
            samples=len(remote_cpu),
            note="this process's CPU time (Python and the driver), without the server's",
        ),
        Result("local_step_cpu_ms", median(local_cpu), samples=len(local_cpu)),
    ]
    start_times = []
    for _ in range(profile.start_samples):
        started = now_ns()
        start(workflow_type=definitions.NOOP3)
        start_times.append((now_ns() - started) / 1e6)
    results.append(Result("start_p50_ms", median(start_times), commit, samples=len(start_times)))
    return results
