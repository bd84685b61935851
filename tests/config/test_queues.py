"""Every queue Baton sends to is declared, so a worker started without -Q consumes it."""

from __future__ import annotations

from celery import Celery

import workflows.tasks  # noqa: F401  (registers Baton's tasks with the shared app)
from config.celery import app as baton_app
from config.settings import task_queues


def fresh_app() -> Celery:
    """An app configured as a worker's is at start-up, before anything was routed."""
    app = Celery("baton-check")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    return app


class TestDeclaredQueues:
    def test_every_baton_task_routes_to_a_queue_a_plain_worker_consumes(self) -> None:
        app = fresh_app()
        consumed = set(app.amqp.queues)  # what `celery worker` without -Q listens to
        baton_tasks = sorted(name for name in baton_app.tasks if name.startswith("baton."))

        routed = {name: app.amqp.router.route({}, name)["queue"].name for name in baton_tasks}

        assert "baton.sweep" in routed.values()
        assert {name: queue for name, queue in routed.items() if queue not in consumed} == {}

    def test_each_queue_has_its_own_exchange_and_routing_key(self) -> None:
        queues = fresh_app().amqp.queues

        keys = {name: (queue.exchange.name, queue.routing_key) for name, queue in queues.items()}

        assert keys == {
            "baton.steps": ("baton.steps", "baton.steps"),
            "baton.sweep": ("baton.sweep", "baton.sweep"),
        }

    def test_a_dedicated_worker_can_still_choose_one_queue(self) -> None:
        queues = fresh_app().amqp.queues

        queues.select(["baton.sweep"])  # what `-Q baton.sweep` does

        assert list(queues.consume_from) == ["baton.sweep"]


class TestQueuesOnEachBroker:
    def test_on_rabbitmq_both_queues_are_quorum_queues_on_topic_exchanges(self) -> None:
        queues = task_queues("amqp://guest:guest@rabbit:5672/baton")

        declared = {q.name: (q.queue_arguments, q.exchange.type, q.routing_key) for q in queues}

        assert declared == {
            "baton.steps": ({"x-queue-type": "quorum"}, "topic", "baton.steps"),
            "baton.sweep": ({"x-queue-type": "quorum"}, "topic", "baton.sweep"),
        }

    def test_on_redis_the_queues_stay_as_they_were(self) -> None:
        queues = task_queues("redis://127.0.0.1:6379/0")

        declared = {q.name: (q.queue_arguments, q.exchange.type) for q in queues}

        assert declared == {"baton.steps": (None, "direct"), "baton.sweep": (None, "direct")}
