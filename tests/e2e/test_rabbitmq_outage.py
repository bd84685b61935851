"""Workers ride out a RabbitMQ outage, and nothing is lost.

The machine's RabbitMQ is shared and never stopped: these tests start a RabbitMQ
node of their own (free ports, a temporary folder; see tests/e2e/rabbitmq.py),
run two workers and two beats over it, and stop and start that node. About six
seconds each way.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.clusters import cluster_on
from tests.e2e.conftest import WORKERS, Cluster
from tests.e2e.rabbitmq import RabbitMQNode
from tests.e2e.test_worker_processes import ORDER_EFFECTS, wait_for_effect
from workflows.states import EventKind, RunState

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rabbitmq_node() -> Iterator[RabbitMQNode]:
    # Not under pytest's tmp_path: its folders are closed to the rabbitmq user.
    base = Path(tempfile.mkdtemp(prefix="baton-rabbitmq-"))
    node = RabbitMQNode(base)
    node.start()
    try:
        yield node
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def node_cluster(rabbitmq_node, django_db_setup, tmp_path_factory) -> Iterator[Cluster]:
    logs = tmp_path_factory.mktemp("rabbitmq-node")
    with cluster_on(logs, broker_url=rabbitmq_node.url) as cluster:
        yield cluster


@pytest.fixture
def workers(node_cluster: Cluster, transactional_db) -> Cluster:
    node_cluster.ensure_workers(WORKERS)
    return node_cluster


class TestBrokerOutageOnRabbitMQ:
    def test_a_run_started_while_the_broker_is_down_finishes_once_it_is_back(
        self, workers, rabbitmq_node, start, finished, order_input, effects
    ):
        rabbitmq_node.stop()
        try:
            run = start("order", order_input())  # committed; its message cannot be sent
        finally:
            rabbitmq_node.start()

        run = finished(run, RunState.SUCCEEDED, timeout=120)

        assert effects(run) == ORDER_EFFECTS
        assert run.events.filter(node="validate", kind=EventKind.REDISPATCHED).exists()

    def test_a_run_in_flight_when_the_broker_goes_down_finishes_once_it_is_back(
        self, workers, rabbitmq_node, start, finished, order_input, effects
    ):
        run = start("order", order_input(simulate={"shipping": "slow"}))
        # The slow shipping service applies its effect, then takes seconds to answer.
        wait_for_effect(run, "ship")

        rabbitmq_node.stop()
        rabbitmq_node.start()

        run = finished(run, RunState.SUCCEEDED, timeout=120)
        assert effects(run) == ORDER_EFFECTS
