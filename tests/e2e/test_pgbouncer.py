"""Workers behind PgBouncer in transaction mode: killed mid-step, and nothing repeats.

The module's two workers and two beats reach PostgreSQL only through PgBouncer
(tests/pgbouncer.py: a handful of server connections for all of them), with
BATON_DB_POOLER=pgbouncer, as a deployment behind it would. The crash tests are
the default cluster's (tests/e2e/test_worker_processes.py), inherited whole, and
a run of every step kind finishes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tests.e2e.test_worker_processes as straight_to_postgresql
from tests.e2e.clusters import cluster_behind_pgbouncer
from tests.e2e.conftest import WORKERS, Cluster
from tests.pgbouncer import PgBouncer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pooled_cluster(pgbouncer: PgBouncer, tmp_path_factory) -> Iterator[Cluster]:
    with cluster_behind_pgbouncer(pgbouncer, tmp_path_factory.mktemp("pgbouncer")) as cluster:
        yield cluster


@pytest.fixture
def workers(pooled_cluster: Cluster, transactional_db) -> Cluster:
    """The cluster behind PgBouncer, with both workers up (a crash test may have killed one)."""
    pooled_cluster.ensure_workers(WORKERS)
    return pooled_cluster


class TestCrashRecoveryBehindPgBouncer(straight_to_postgresql.TestCrashRecovery):
    """Workers SIGKILLed mid-activity; their server connections go back to PgBouncer's pool."""


class TestOrderSagaBehindPgBouncer(straight_to_postgresql.TestOrderSaga):
    pass


class TestGraphBehindPgBouncer(straight_to_postgresql.TestGraph):
    pass
