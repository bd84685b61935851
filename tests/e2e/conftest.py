"""Real processes for end-to-end tests: two Celery workers and two beats over Redis.

The workers and beats are started once for this package (and stopped after it, so
they never touch other tests' rows) against pytest-django's test
database (PostgreSQL) and the broker in CELERY_BROKER_URL. Tests use committed
data (`transactional_db`) so the workers see it, and wait for the database to
show the outcome, as an operator would.

The browser tests drive runs in the test process and must run before the first
test that starts the cluster, whose workers would claim their steps:
`pytest_collection_modifyitems` below runs every test using the cluster last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings
from django.db import connection

from workflows.models import WorkflowRun

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]


class Cluster:
    """Worker and beat processes, each in its own process group so it can be killed whole."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.workers: dict[str, subprocess.Popen] = {}
        self.beats: list[subprocess.Popen] = []

    def _spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        return subprocess.Popen(
            [str(BIN / "celery"), "-A", "config", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_worker(self, name: str, *, queues: str | None = "baton.steps,baton.sweep") -> None:
        """Start a worker consuming `queues` (None: no -Q, as `celery -A config worker`)."""
        log = self.logs / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        self.workers[name] = self._spawn(
            name,
            "worker",
            "-n",
            f"{name}@%h",
            "--concurrency=2",
            *(["-Q", queues] if queues else []),
            "--without-mingle",
            "--without-gossip",
            "--loglevel=INFO",
        )
        wait_until(lambda: b" ready." in log.read_bytes()[offset:], timeout=60, what=f"{name} up")

    def stop_worker(self, name: str) -> None:
        """Stop a worker as an operator would (SIGTERM: warm shutdown)."""
        process = self.workers.pop(name)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    @contextmanager
    def workers_paused(self) -> Iterator[None]:
        """Freeze every running worker (SIGSTOP) for the block, so others' work is seen alone."""
        frozen = [p for p in self.workers.values() if p.poll() is None]
        for process in frozen:
            os.killpg(process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for process in frozen:
                os.killpg(process.pid, signal.SIGCONT)

    def start_beat(self, name: str, *, database_scheduler: bool = False) -> subprocess.Popen:
        """Start a beat: with a local schedule file, or Baton's scheduler over the database."""
        env = {}
        if database_scheduler:
            args = ["-S", "workflows.beat:Scheduler", "--loglevel=INFO"]
            # Database interval schedules count whole seconds: the sweep's 0.5 s would be 0.
            env["BATON_SWEEP_INTERVAL"] = "1"
        else:
            args = [
                "-S",
                "celery.beat:PersistentScheduler",
                "-s",
                str(self.logs / f"{name}-schedule"),
            ]
        process = self._spawn(name, "beat", *args, env=env)
        self.beats.append(process)
        return process

    def stop_beat(self, process: subprocess.Popen) -> None:
        self.beats.remove(process)
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker and its pool processes: no shutdown, no acknowledgements."""
        process = self.workers.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def ensure_workers(self, names: tuple[str, ...]) -> None:
        for name in names:
            if name not in self.workers or self.workers[name].poll() is not None:
                self.start_worker(name)

    def stop(self) -> None:
        processes = [*self.workers.values(), *self.beats]
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that use the cluster after all others (a stable sort keeps each order)."""
    items.sort(key=lambda item: "cluster" in getattr(item, "fixturenames", ()))


WORKERS = ("worker-a", "worker-b")


@pytest.fixture(scope="package")
def cluster(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Cluster]:
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.fail("End-to-end tests need PostgreSQL: set DATABASE_URL (see README).")
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        pytest.fail("End-to-end tests need a broker server: set CELERY_BROKER_URL (see README).")
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "BATON_SWEEP_INTERVAL": "0.5",
        "BATON_REDISPATCH_AFTER": "5",
        "BATON_WORKFLOW_MODULES": "workflows.examples.order,tests.workflows.definitions",
        "BATON_LOG_LEVEL": "INFO",
    }
    current_app.control.purge()
    logs = tmp_path_factory.mktemp("cluster")
    cluster = Cluster(env, logs)
    try:
        cluster.start_beat("beat-a")
        cluster.start_beat("beat-b")  # two sweepers at once, as in production
        cluster.ensure_workers(WORKERS)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def workers(cluster: Cluster, transactional_db) -> Cluster:
    """The running cluster, with both workers up (a crash test may have killed one)."""
    cluster.ensure_workers(WORKERS)
    return cluster


def wait_until(condition: Callable[[], object], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def finished() -> Callable[..., WorkflowRun]:
    """Wait until a run reaches one of `states` and return it."""

    def wait_for(run: WorkflowRun, *states: str, timeout: float = 60) -> WorkflowRun:
        try:
            wait_until(
                lambda: WorkflowRun.objects.filter(pk=run.pk, state__in=states).exists(),
                timeout=timeout,
                what=f"run {run.pk} to be {' or '.join(states)}",
            )
        except AssertionError as error:
            timeline = [str(event) for event in run.events.all()]
            raise AssertionError(f"{error}; it is {_state(run)}; timeline: {timeline}") from None
        run.refresh_from_db()
        return run

    return wait_for


def _state(run: WorkflowRun) -> str:
    return WorkflowRun.objects.filter(pk=run.pk).values_list("state", flat=True).first() or "gone"
