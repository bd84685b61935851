"""The engine's promises kept over RabbitMQ: quorum queues, and workers killed mid-step.

The other e2e tests run over the broker in CELERY_BROKER_URL (Redis in CI); these
run over RabbitMQ, in a virtual host of the tests' own on the machine's RabbitMQ
(BATON_TEST_RABBITMQ_URL), with two workers and two beats of their own for this
module. The crash tests are the default broker's, inherited whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tests.e2e.test_worker_processes as on_the_default_broker
from tests.e2e.clusters import cluster_on
from tests.e2e.conftest import WORKERS, Cluster
from tests.e2e.rabbitmq import ensure_virtual_host, queue_types, rabbitmq_url

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rabbitmq_cluster(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Cluster]:
    url = rabbitmq_url()
    ensure_virtual_host(url)
    with cluster_on(tmp_path_factory.mktemp("rabbitmq"), broker_url=url) as cluster:
        yield cluster


@pytest.fixture
def workers(rabbitmq_cluster: Cluster, transactional_db) -> Cluster:
    """The RabbitMQ cluster, with both workers up (a crash test may have killed one)."""
    rabbitmq_cluster.ensure_workers(WORKERS)
    return rabbitmq_cluster


class TestQuorumQueues:
    def test_the_steps_and_sweep_queues_are_quorum_queues(self, workers):
        types = queue_types(rabbitmq_url())

        assert types["baton.steps"] == "quorum"
        assert types["baton.sweep"] == "quorum"

    def test_workers_take_a_prefetch_count_per_consumer_as_quorum_queues_require(self, workers):
        log = (workers.logs / "worker-a.log").read_text()

        assert "Global QoS is disabled" in log


class TestCrashRecoveryOnRabbitMQ(on_the_default_broker.TestCrashRecovery):
    """Workers SIGKILLed mid-activity: RabbitMQ delivers their messages again at once."""


class TestRedeliveryOnRabbitMQ(on_the_default_broker.TestRedelivery):
    """The same message twice applies one effect, on RabbitMQ too."""
