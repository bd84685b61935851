"""Workers ride out a restart of the broker or of PostgreSQL, and nothing is lost.

These restart the machine's own Redis and PostgreSQL (loopback only, a few
seconds each) and always leave them running.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.e2e.clusters import cluster_behind_pgbouncer
from tests.e2e.conftest import WORKERS, Cluster, wait_until
from tests.pgbouncer import PgBouncer
from workflows.states import EventKind, RunState

pytestmark = pytest.mark.e2e

ORDER_EFFECTS = {
    "inventory.reserve": 1,
    "payments.charge": 1,
    "shipping.ship": 1,
    "notifications.notify": 1,
}


def redis_is_up() -> bool:
    return subprocess.run(["redis-cli", "ping"], capture_output=True).returncode == 0


def stop_redis() -> None:
    subprocess.run(["redis-cli", "shutdown", "nosave"], capture_output=True)
    wait_until(lambda: not redis_is_up(), timeout=10, what="Redis to stop")


def start_redis() -> None:
    for folder in ("/var/lib/redis", "/var/log/redis"):
        Path(folder).mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/var/lib/redis",
            "--logfile",
            "/var/log/redis/ci.log",
        ],
        check=True,
    )
    wait_until(redis_is_up, timeout=20, what="Redis to start")


def restart_postgresql() -> None:
    version = next(Path("/etc/postgresql").iterdir()).name
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True
    )
    connection.close()  # this test process's own connection died with the server


@pytest.fixture(scope="class")
def pooled_cluster(pgbouncer: PgBouncer, tmp_path_factory) -> Iterator[Cluster]:
    """Two workers and two beats behind PgBouncer, for one class: stopped at its end."""
    logs = tmp_path_factory.mktemp("pgbouncer-restart")
    with cluster_behind_pgbouncer(pgbouncer, logs) as cluster:
        yield cluster


class TestDatabaseRestartBehindPgBouncer:
    """PostgreSQL restarts under workers that reach it only through PgBouncer in
    transaction mode: PgBouncer's connections to the server die with it, while the
    workers' connections to PgBouncer stay open.

    With a cluster of its own for this class only, stopped before the package's
    cluster starts for the tests below (two clusters must not sweep the same
    database at once): tests/e2e/conftest.py runs the tests that use the package's
    cluster last."""

    @pytest.fixture
    def workers(self, pooled_cluster: Cluster, transactional_db) -> Cluster:
        pooled_cluster.ensure_workers(WORKERS)
        return pooled_cluster

    def test_workers_carry_on_after_postgresql_restarts(
        self, workers, start, finished, order_input, effects
    ):
        restart_postgresql()

        run = finished(start("order", order_input()), RunState.SUCCEEDED, timeout=120)

        assert effects(run) == ORDER_EFFECTS


class TestBrokerRestart:
    def test_a_run_started_while_the_broker_is_down_finishes_once_it_is_back(
        self, workers, start, finished, order_input, effects
    ):
        stop_redis()
        try:
            run = start("order", order_input())  # committed; its message cannot be sent
        finally:
            start_redis()

        run = finished(run, RunState.SUCCEEDED, timeout=120)

        assert effects(run) == ORDER_EFFECTS
        assert run.events.filter(node="validate", kind=EventKind.REDISPATCHED).exists()


class TestDatabaseRestart:
    def test_workers_carry_on_after_postgresql_restarts(
        self, workers, start, finished, order_input, effects
    ):
        restart_postgresql()

        run = finished(start("order", order_input()), RunState.SUCCEEDED, timeout=120)

        assert effects(run) == ORDER_EFFECTS
