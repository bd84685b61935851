"""Step messages: built as Celery builds them, published inline."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any

import pytest
from celery import current_app
from celery.app.routes import Router, prepare

from workflows import tasks
from workflows.engine import publish, work


@pytest.fixture
def published(monkeypatch) -> list[dict[str, Any]]:
    """Each message handed to Celery's publish (send_task_message), instead of the broker.

    The step tasks are registered (`workflows.tasks` imported), as in a worker: their own
    options, such as the serializer, are then in what `send_task` publishes."""
    assert current_app.tasks[work.EXECUTE_STEP_TASK].name == tasks.execute_step.name
    messages: list[dict[str, Any]] = []

    def send_task_message(producer, name, message, **options):
        messages.append({"name": name, "message": message, **options})

    monkeypatch.setattr(current_app.amqp, "send_task_message", send_task_message)
    return messages


def _comparable(sent: dict[str, Any]) -> dict[str, Any]:
    """A published message and its options, but for its own ids and whether to declare
    its queue (Celery asks every time; Baton once a connection, see TestTheQueuesDeclaration)."""
    headers = dict(sent["message"].headers)
    properties = dict(sent["message"].properties)
    for unique in ("id", "root_id"):
        assert headers.pop(unique)
    assert properties.pop("correlation_id") == sent["message"].headers["id"]
    options = {key: value for key, value in sent.items() if key not in ("message", "declare")}
    options["queue"] = options["queue"].name
    options.setdefault("headers", None)  # send_task passes none; Baton passes its trace's
    return {
        "headers": headers,
        "properties": properties,
        "body": sent["message"].body,
        "sent_event": sent["message"].sent_event,
        **options,
    }


class TestAStepsMessage:
    def test_is_the_one_celerys_send_task_would_publish(self, published):
        with current_app.producer_or_acquire() as producer:
            current_app.send_task(work.EXECUTE_STEP_TASK, args=[7], producer=producer)
        work.send_steps([7])

        by_celery, by_baton = (_comparable(sent) for sent in published)
        assert by_baton == by_celery

    def test_to_a_named_queue_is_the_one_celery_would_publish_there(self, published):
        with current_app.producer_or_acquire() as producer:
            current_app.send_task(
                work.EXECUTE_STEP_TASK, args=[7], producer=producer, queue="payments"
            )
        work.send_steps([7], routes={7: "payments"})

        by_celery, by_baton = (_comparable(sent) for sent in published)
        assert by_baton == by_celery

    def test_follows_the_task_routes_as_celery_would(self, published, monkeypatch):
        amqp = current_app.amqp
        routes = prepare({work.EXECUTE_STEP_TASK: {"queue": "elsewhere"}})
        monkeypatch.setattr(
            amqp, "router", Router(routes, amqp.queues, create_missing=True, app=current_app)
        )
        with current_app.producer_or_acquire() as producer:
            current_app.send_task(work.EXECUTE_STEP_TASK, args=[7], producer=producer)
        work.send_steps([7])

        by_celery, by_baton = (_comparable(sent) for sent in published)
        assert by_celery["queue"] == "elsewhere"
        assert by_baton == by_celery

    def test_has_an_id_of_its_own_that_is_also_its_root(self, published):
        work.send_steps([7, 8])

        ids = [sent["message"].headers["id"] for sent in published]
        assert len(set(ids)) == 2
        assert [sent["message"].headers["root_id"] for sent in published] == ids
        assert [sent["message"].properties["correlation_id"] for sent in published] == ids


class TestTheQueuesDeclaration:
    def test_is_asked_for_until_the_connection_has_declared_the_queue(self):
        declared: set[int] = set()
        producer = SimpleNamespace(connection=SimpleNamespace(declared_entities=declared))

        first = publish.destination(work.EXECUTE_STEP_TASK, None, producer)
        declared.add(hash(first["queue"]))
        second = publish.destination(work.EXECUTE_STEP_TASK, None, producer)

        assert first["declare"] is None  # Celery's send_task_message declares it
        assert second["declare"] == []


@pytest.fixture
def acquired(monkeypatch) -> list[dict[str, Any]]:
    """The options of each producer taken from Celery's pool (a stand-in producer)."""
    asked: list[dict[str, Any]] = []

    def acquire(**options):
        asked.append(options)
        return nullcontext()

    monkeypatch.setattr(current_app, "_acquire_producer", acquire)
    return asked


class TestTheProducer:
    def test_is_acquired_with_the_pools_timeout_as_celery_acquires_it(self, acquired):
        with publish.producer():
            pass
        assert acquired == [{"timeout": current_app.conf.broker_pool_acquire_timeout}]

    def test_is_acquired_with_a_timeout_a_test_changed_since(self, acquired, settings):
        with publish.producer():
            pass
        settings.CELERY_BROKER_POOL_ACQUIRE_TIMEOUT = 7
        with publish.producer():
            pass
        assert acquired[-1] == {"timeout": 7}
