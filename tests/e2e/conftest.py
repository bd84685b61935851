"""Real processes for end-to-end tests: two Celery workers and two beats over Redis.

The beats run Baton's scheduler over the database (`workflows.beat:Scheduler`), as
production does, so the tests exercise its ticks, heartbeats and stops.

The workers and beats are started once for this package (and stopped after it, so
they never touch other tests' rows) against pytest-django's test
database (PostgreSQL) and the broker in CELERY_BROKER_URL. Tests use committed
data (`transactional_db`) so the workers see it, and wait for the database to
show the outcome, as an operator would.

The browser tests drive runs in the test process and must run before the first
test that starts the cluster, whose workers would claim their steps:
`pytest_collection_modifyitems` below runs every test using the cluster last,
and keeps these tests in file order when pytest-randomly shuffles the others.

Every process a test starts is ended by the time its teardown begins: stopping
one sends SIGTERM, then SIGKILL after a grace, and a test whose process
outlived it, or needed SIGKILL, fails on its own (`pytest_runtest_teardown`),
before the database is flushed under a process still writing to it. The shared
workers and beats do go on through the flush, and a sweep that locked one table
before the flush's TRUNCATE reached it can deadlock with it: the flush is then
tried again (`_flush_through_deadlocks`), as a retrying client would. The flush
empties the beats' schedule tables too: they keep the schedule they hold, and
reinstall the settings' entries (the sweep) at their next read of it.

Waits scale with BATON_TEST_SLOWDOWN (a float, 1 by default), which a slower
or loaded machine raises: see `scaled`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
import pytest
from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection

from workflows.models import WorkflowRun

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

# Seconds a process has to exit on SIGTERM before it is killed (times the slowdown).
GRACE = 15


def slowdown() -> float:
    """Return BATON_TEST_SLOWDOWN, the factor by which this machine is slower (1 by default)."""
    text = os.environ.get("BATON_TEST_SLOWDOWN", "").strip() or "1"
    try:
        factor = float(text)
    except ValueError:
        factor = 0.0
    if not factor > 0:
        raise pytest.UsageError(f"BATON_TEST_SLOWDOWN must be a positive number, not {text!r}")
    return factor


def scaled(seconds: float) -> float:
    """Return `seconds` stretched by BATON_TEST_SLOWDOWN, for a timeout inside a test."""
    return seconds * slowdown()


# The processes tests started themselves (not the cluster's shared workers and
# beats): each must have ended when its test's teardown begins.
_started_by_tests: dict[int, tuple[str, subprocess.Popen]] = {}


def start_process(
    name: str, argv: list[str], *, env: dict[str, str], log: Path, shared: bool = False
) -> subprocess.Popen:
    """Start `argv` in a process group of its own, its output appended to `log`.

    Unless it is `shared` (it serves every test and its fixture ends it), the
    test that starts it must have ended it when its teardown begins.
    """
    with open(log, "ab") as output:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if not shared:
        _started_by_tests[process.pid] = (name, process)
    return process


def end_process(process: subprocess.Popen, *, grace: float | None = None) -> bool:
    """End `process` and its group: SIGTERM, then SIGKILL after `grace` (GRACE) scaled seconds.

    Return whether it ended on SIGTERM. It has always ended when this returns.
    """
    return not end_processes([process], grace=grace)


def end_processes(
    processes: list[subprocess.Popen], *, grace: float | None = None
) -> list[subprocess.Popen]:
    """End each process as `end_process` does, all in one grace; return those it killed."""
    for process in processes:
        if process.poll() is None:
            _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + scaled(GRACE if grace is None else grace)
    killed = []
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()
            killed.append(process)
    return killed


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with suppress(ProcessLookupError):  # it ended (and was reaped) since the caller looked
        os.killpg(process.pid, signum)


class Cluster:
    """Worker and beat processes, each in its own process group so it can be killed whole."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.workers: dict[str, subprocess.Popen] = {}
        self.beats: list[tuple[str, subprocess.Popen]] = []

    def _spawn(
        self, name: str, *args: str, env: dict[str, str] | None = None, shared: bool = False
    ) -> subprocess.Popen:
        """Start `celery -A config *args`; one not `shared` must end before its test does."""
        return start_process(
            name,
            [str(BIN / "celery"), "-A", "config", *args],
            env={**self.env, **(env or {})},
            log=self.logs / f"{name}.log",
            shared=shared,
        )

    def start_worker(
        self,
        name: str,
        *,
        queues: str | None = "baton.steps,baton.sweep",
        shared: bool = False,
        concurrency: int = 2,
    ) -> None:
        """Start a worker consuming `queues` (None: no -Q, as `celery -A config worker`)
        with `concurrency` pool processes.

        A `shared` worker serves every test and is stopped with the cluster; any
        other must be stopped by the test that started it.
        """
        log = self.logs / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        self.workers[name] = self._spawn(
            name,
            "worker",
            "-n",
            f"{name}@%h",
            f"--concurrency={concurrency}",
            *(["-Q", queues] if queues else []),
            "--without-mingle",
            "--without-gossip",
            "--loglevel=INFO",
            shared=shared,
        )
        wait_until(lambda: b" ready." in log.read_bytes()[offset:], timeout=60, what=f"{name} up")

    def stop_worker(self, name: str) -> None:
        """Stop a worker as an operator would (SIGTERM: warm shutdown), killing it after a grace."""
        self._stop(name, self.workers.pop(name))

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

    def start_beat(self, name: str, *, shared: bool = False) -> subprocess.Popen:
        """Start a beat on Baton's scheduler over the database, as production runs it.

        Stop it with `stop_beat` before the test ends, unless it is `shared`.
        """
        process = self._spawn(
            name, "beat", "-S", "workflows.beat:Scheduler", "--loglevel=INFO", shared=shared
        )
        self.beats.append((name, process))
        return process

    def stop_beat(self, process: subprocess.Popen) -> None:
        """Stop a beat with SIGTERM, killing it after a grace; fail if it needed killing."""
        (name,) = [name for name, beat in self.beats if beat is process]
        self.beats.remove((name, process))
        self._stop(name, process)

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker and its pool processes: no shutdown, no acknowledgements."""
        process = self.workers.pop(name)
        _signal_group(process, signal.SIGKILL)
        process.wait()

    def ensure_workers(self, names: tuple[str, ...]) -> None:
        for name in names:
            if name not in self.workers or self.workers[name].poll() is not None:
                self.start_worker(name, shared=True)

    def stop(self) -> None:
        """End every worker and beat still running: all get SIGTERM at once, then SIGKILL."""
        processes = dict(self.beats) | self.workers
        self.workers, self.beats = {}, []
        killed = end_processes(list(processes.values()))
        killed = [name for name, process in processes.items() if process in killed]
        assert not killed, f"{', '.join(killed)} ignored SIGTERM for {scaled(GRACE)}s; killed"

    def _stop(self, name: str, process: subprocess.Popen) -> None:
        ended = end_process(process)
        assert ended, f"{name} ignored SIGTERM for {scaled(GRACE)}s; killed"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run these tests after the others, in file order, and those using the cluster last.

    pytest-randomly shuffles the items before this hook: the others keep its order,
    which `-p randomly --randomly-seed=N` (N printed atop each run) reproduces; these
    real-process tests keep the order they need. Each of these tests gets
    pytest-timeout's limit times BATON_TEST_SLOWDOWN.
    """
    mine = [item for item in items if item.path.is_relative_to(HERE)]
    others = [item for item in items if not item.path.is_relative_to(HERE)]
    mine.sort(
        key=lambda item: (
            "cluster" in getattr(item, "fixturenames", ()),
            str(item.path),
            item.location[1] or 0,
        )
    )
    items[:] = [*others, *mine]
    limit = float(config.getini("timeout") or 0)
    if limit and slowdown() != 1:
        for item in mine:
            item.add_marker(pytest.mark.timeout(scaled(limit)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """End what the test started and left running, before its fixtures (and the flush), then fail.

    The process ended before this test's teardown so that a process of this
    test never writes into the next test's rows.
    """
    outlived = []
    for pid, (name, process) in list(_started_by_tests.items()):
        if process.poll() is None:
            end_process(process, grace=5)
            outlived.append(f"{name} (pid {pid})")
        del _started_by_tests[pid]
    yield
    if outlived:
        pytest.fail(f"{item.nodeid} left {', '.join(outlived)} running; ended it now")


@pytest.fixture(scope="package", autouse=True)
def _flush_through_deadlocks() -> Iterator[None]:
    """Retry a test's closing flush that PostgreSQL chose as a deadlock's victim.

    The flush's TRUNCATE takes its tables' locks one by one, beside the shared
    beats' sweeps, which take theirs in another order. Each try is one transaction,
    so a try that lost leaves no table emptied.
    """
    operations = type(connection.ops)
    flush = operations.execute_sql_flush

    def execute_sql_flush(self, sql_list: list[str]) -> None:
        for attempt in range(1, 6):
            try:
                return flush(self, sql_list)
            except DatabaseError as error:
                lost = isinstance(error.__cause__, psycopg.errors.DeadlockDetected)
                if not lost or attempt == 5:
                    raise
                print(f"the flush lost a deadlock to a sweep (try {attempt}); again")

    operations.execute_sql_flush = execute_sql_flush
    try:
        yield
    finally:
        operations.execute_sql_flush = flush


WORKERS = ("worker-a", "worker-b")


@pytest.fixture(scope="package")
def process_env(django_db_setup, django_db_blocker) -> dict[str, str]:
    """The environment of the processes tests start: the test database and the broker."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.fail("End-to-end tests need PostgreSQL: set DATABASE_URL (see README).")
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        pytest.fail("End-to-end tests need a broker server: set CELERY_BROKER_URL (see README).")
    database = settings.DATABASES["default"]
    return {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        # Database interval schedules count whole seconds: 0.5 would be 0.
        "BATON_SWEEP_INTERVAL": "1",
        "BATON_REDISPATCH_AFTER": "5",
        "BATON_WORKFLOW_MODULES": "workflows.examples.order,tests.workflows.definitions",
        "BATON_LOG_LEVEL": "INFO",
        # The shared workers read webhook subscriptions at every event, so an endpoint a
        # test registers hears the events its run makes on them at once.
        "BATON_WEBHOOKS_REFRESH_SECONDS": "0",
    }


@pytest.fixture(scope="package")
def cluster(process_env, tmp_path_factory) -> Iterator[Cluster]:
    current_app.control.purge()
    cluster = Cluster(process_env, tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start_beat("beat-a", shared=True)
        cluster.start_beat("beat-b", shared=True)  # two sweepers at once, as in production
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
    """Wait until `condition()` is true, for at most `timeout` seconds (scaled)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


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
