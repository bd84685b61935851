"""The engine through Celery: two worker processes over Redis, against raw Celery chains.

Both sides run on the same two workers, queue and settings. The end of a run is
seen through a bench-only trigger that calls pg_notify when a run becomes
succeeded (the benchmark LISTENs with psycopg); the end of a raw chain through its
last task pushing to a Redis list (the benchmark BLPOPs). Both are pushed to the
benchmark the moment they happen: nothing polls.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psycopg
import redis
from celery import chain, current_app
from django.conf import settings
from django.db import connection
from psycopg import sql

from bench import definitions, processes, tasks
from bench.measure import median, now_ns, percentile
from bench.profiles import Profile
from bench.report import Result
from workflows import engine
from workflows.models import WorkflowRun
from workflows.states import RunState

CHANNEL = "bench_run_succeeded"
TIMEOUT = 120.0


@contextmanager
def run_notifications() -> Iterator[psycopg.Connection]:
    """Install the trigger, LISTEN on its channel; remove the trigger afterwards."""
    table = sql.Identifier(WorkflowRun._meta.db_table)
    state = sql.Identifier(WorkflowRun._meta.get_field("state").column)
    succeeded = sql.Literal(str(RunState.SUCCEEDED))
    with connection.cursor() as cursor:
        cursor.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION bench_notify_succeeded() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify({channel}, NEW.id::text); "
                "RETURN NEW; END $$"
            )
            .format(channel=sql.Literal(CHANNEL))
            .as_string(cursor.connection)
        )
        cursor.execute(
            sql.SQL(
                "DROP TRIGGER IF EXISTS bench_run_succeeded ON {table}; "
                "CREATE TRIGGER bench_run_succeeded AFTER UPDATE OF {state} ON {table} "
                "FOR EACH ROW WHEN (NEW.{state} = {succeeded} AND OLD.{state} <> {succeeded}) "
                "EXECUTE FUNCTION bench_notify_succeeded()"
            )
            .format(table=table, state=state, succeeded=succeeded)
            .as_string(cursor.connection)
        )
    params = connection.get_connection_params()
    listener = psycopg.connect(**params, autocommit=True)
    try:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
        yield listener
    finally:
        listener.close()
        with connection.cursor() as cursor:
            cursor.execute(
                sql.SQL("DROP TRIGGER IF EXISTS bench_run_succeeded ON {}")
                .format(table)
                .as_string(cursor.connection)
            )


class Completion:
    """Waits for runs to succeed (notifications) and chains to end (a Redis list)."""

    def __init__(self, listener: psycopg.Connection, broker: redis.Redis) -> None:
        self.listener = listener
        self.broker = broker
        self.key = f"bench:done:{uuid.uuid4()}"
        self.seen: dict[str, int] = {}

    def run_finished(self, run_ids: set[str]) -> int:
        """Block until every run in `run_ids` succeeded; return when the last one did (ns)."""
        deadline = time.monotonic() + TIMEOUT
        waiting = run_ids - self.seen.keys()
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(waiting)} runs did not succeed within {TIMEOUT:.0f}s")
            for notify in self.listener.notifies(timeout=remaining, stop_after=1):
                self.seen[notify.payload] = now_ns()
            waiting = run_ids - self.seen.keys()
        return max(self.seen.pop(run_id) for run_id in run_ids)

    def chains_finished(self, tokens: set[str]) -> int:
        """Block until each token was pushed by a chain's last task; return when the last was."""
        waiting = set(tokens)
        while waiting:
            popped = self.broker.blpop([self.key], timeout=TIMEOUT)
            if popped is None:
                raise TimeoutError(f"{len(waiting)} chains did not end within {TIMEOUT:.0f}s")
            waiting.discard(popped[1].decode())
        return now_ns()


def _start(workflow_type: str) -> str:
    run, _ = engine.start_workflow(workflow_type=workflow_type, input={})
    return str(run.pk)


def _raw_chain(completion: Completion, links: int) -> str:
    token = uuid.uuid4().hex
    signatures = [tasks.noop.si() for _ in range(links - 1)]
    chain(*signatures, tasks.done.si(completion.key, token)).apply_async()
    return token


def _sample(count: int, once: Callable[[], float]) -> list[float]:
    return [once() for _ in range(count)]


def run(*, profile: Profile, logs: Path) -> list[Result]:
    """Measure the `celery` group's figures with two worker processes.

    First with Baton's default settings (eager dispatch on: a worker claims the
    remote step after the one it recorded itself, see BATON_EAGER_STEPS), then
    again with two workers that send every step through the broker.
    """
    current_app.control.purge()
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    with run_notifications() as listener:
        completion = Completion(listener, broker)
        with _workers(logs, eager_steps=None):
            results, raw_ten, raw_throughput = _measure(profile, completion)
        with _workers(logs, eager_steps=0):
            for _ in range(min(5, profile.ten_step_samples)):  # warm both workers up
                _workflow(completion, definitions.NOOP3)
            ten = _ten_step_run(profile, completion)
            results += [
                Result(
                    "step_via_celery_no_eager_ms",
                    median(ten),
                    raw_ten,
                    samples=len(ten),
                    note="BATON_EAGER_STEPS=0 on both workers; the raw chain's figure is "
                    "the one above",
                ),
                replace(
                    _throughput(profile.throughput_runs, completion, raw=raw_throughput),
                    key="throughput_no_eager_per_s",
                    note="BATON_EAGER_STEPS=0 on both workers; the raw chains' figure is "
                    "the one above",
                ),
            ]
    return results


@contextmanager
def _workers(logs: Path, *, eager_steps: int | None) -> Iterator[None]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings"}
    if eager_steps is not None:
        env["BATON_EAGER_STEPS"] = str(eager_steps)
    else:
        env.pop("BATON_EAGER_STEPS", None)  # Baton's default
    with processes.Children(env=env, logs=logs) as children:
        for name in ("bench-worker-1", "bench-worker-2"):
            processes.celery_worker(children, name, queue=settings.CELERY_TASK_DEFAULT_QUEUE)
        yield


def _workflow(completion: Completion, workflow_type: str) -> float:
    started = now_ns()
    run_id = _start(workflow_type)
    return (completion.run_finished({run_id}) - started) / 1e6


def _ten_step_run(profile: Profile, completion: Completion) -> list[float]:
    return [
        value / 10
        for value in _sample(
            profile.ten_step_samples, lambda: _workflow(completion, definitions.NOOP10)
        )
    ]


def _measure(profile: Profile, completion: Completion) -> tuple[list[Result], float, float]:
    def raw(links: int) -> float:
        started = now_ns()
        token = _raw_chain(completion, links)
        return (completion.chains_finished({token}) - started) / 1e6

    def round_trip() -> float:
        started = now_ns()
        token = uuid.uuid4().hex
        tasks.done.apply_async(args=[completion.key, token])
        return (completion.chains_finished({token}) - started) / 1e6

    for _ in range(min(5, profile.ten_step_samples)):  # warm both workers up
        _workflow(completion, definitions.NOOP3)
        raw(3)
    results = [
        Result(
            "celery_round_trip_ms",
            median(trips := _sample(profile.round_trip_samples, round_trip)),
            samples=len(trips),
        )
    ]
    ten = _ten_step_run(profile, completion)
    raw_ten = [value / 10 for value in _sample(profile.ten_step_samples, lambda: raw(10))]
    results.append(
        Result(
            "step_via_celery_ms",
            median(ten),
            median(raw_ten),
            samples=len(ten),
            note="runs one after another, start to succeeded ÷ 10 (start included); "
            f"Baton's default eager dispatch ({settings.BATON_EAGER_STEPS} steps a message)",
        )
    )
    e2e = _sample(profile.e2e_samples, lambda: _workflow(completion, definitions.NOOP3))
    raw_three = _sample(profile.e2e_samples, lambda: raw(3))
    results += [
        Result(
            "e2e3_p50_ms",
            median(e2e),
            median(raw_three),
            samples=len(e2e),
            note="from before start_workflow to the pg_notify of its success; raw: "
            "from before apply_async to the last task's LPUSH",
        ),
        Result("e2e3_p99_ms", percentile(e2e, 0.99), percentile(raw_three, 0.99), samples=len(e2e)),
    ]
    throughput = _throughput(profile.throughput_runs, completion)
    results.append(throughput)
    return results, median(raw_ten), throughput.baseline


def _throughput(count: int, completion: Completion, *, raw: float | None = None) -> Result:
    """Workflows per second against raw chains per second (measured here unless given)."""
    started = now_ns()
    run_ids = {_start(definitions.NOOP3) for _ in range(count)}
    finished = completion.run_finished(run_ids)
    workflows_per_s = count / ((finished - started) / 1e9)
    if raw is None:
        started = now_ns()
        tokens = {_raw_chain(completion, 3) for _ in range(count)}
        finished = completion.chains_finished(tokens)
        raw = count / ((finished - started) / 1e9)
    return Result(
        "throughput_per_s",
        workflows_per_s,
        raw,
        samples=count,
        note=f"{count:,} started from one process as fast as it can, 2 worker processes; "
        "from the first start to the last success",
    )
