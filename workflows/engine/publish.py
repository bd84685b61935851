"""Step messages for the broker, built for a fraction of what `send_task` costs.

A step's message is only a hint ("look at step 42"): the row says whether the step
still needs doing. It needs none of what Celery's `send_task` works out for a
general task, so it is built directly, and published through Celery's own
`send_task_message`.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from celery import current_app
from celery.app.amqp import task_message
from celery.utils.nodenames import anon_nodename
from celery.utils.objects import FallbackContext
from django.core.signals import setting_changed
from django.dispatch import receiver


def producer() -> Any:
    """A producer from Celery's pool for one batch of messages, released when the block
    ends, as `current_app.producer_or_acquire()` gives it.

    That reads the pool's acquire timeout through the app's layered configuration on
    every call: as long as building a message. The timeout is read once per app here
    (and again after a test changes settings), as the routes are (`destination`)."""
    global _acquire_timeout
    app = current_app._get_current_object()
    if _acquire_timeout[0] is not app:
        _acquire_timeout = (app, app.conf.broker_pool_acquire_timeout)
    # Celery's own acquire (private, as producer_or_acquire calls it): a full pool becomes
    # Celery's OperationalError naming the pool's limit, not kombu's LimitExceeded.
    return FallbackContext(None, app._acquire_producer, timeout=_acquire_timeout[1])


# The pool's acquire timeout, for the app it was read from.
_acquire_timeout: tuple[Any, float | None] = (None, None)


@receiver(setting_changed)
def _forget_acquire_timeout(**kwargs: Any) -> None:
    """Settings change in tests only; Celery reads Django's settings live, so read the
    timeout again."""
    global _acquire_timeout
    _acquire_timeout = (None, None)


def message(name: str, args: list[Any]) -> Any:
    """Celery's task message (protocol 2) for `name(*args)`, as `send_task` builds it.

    `send_task` spends most of its time (some 0.3 ms of 0.45 a message) on what a
    step's message never needs: the task's options read through Django's settings,
    the router, a safe repr of the arguments. This builds the same headers and body
    directly; publishing stays Celery's (`send_task_message`: the queue's exchange and
    routing key, the retry policy, the publish signals)."""
    task_id = str(uuid.uuid4())
    app = current_app._get_current_object()
    parent = app.current_worker_task
    request = parent.request if parent is not None else None
    headers = {
        "lang": "py",
        "task": name,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": (request.root_id or request.id) if request else task_id,
        "parent_id": request.id if request else None,
        "argsrepr": repr(args),
        "kwargsrepr": "{}",
        "origin": _origin(),
        "ignore_result": None,  # the task's own setting, as send_task leaves it
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
    }
    body = (args, {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None})
    properties = {"correlation_id": task_id, "reply_to": app.thread_oid}
    return task_message(headers, properties, body, None)


def destination(name: str, queue_name: str | None, producer: Any) -> dict[str, Any]:
    """The routing options of `send_task_message` for a message of task `name` to
    `queue_name` (None: where the task's route sends it), declaring the queue only if the
    producer's connection has not yet.

    The route is Celery's router's answer for the task's name (`task_routes`, else the
    default queue), worked out once per process: a step's arguments are only ids, so a
    route can only go by the task's name. Celery asks for the queue's declaration with
    every message; kombu then skips a queue the connection declared already, but only
    after copying it, a third of a message's cost. A reconnect forgets what was
    declared, so it is declared again."""
    options = _route(current_app._get_current_object().amqp.router, name, queue_name)
    target = options.get("queue")  # none where a route names only an exchange
    declared = producer.connection.declared_entities
    cached = (
        target is not None
        and target.can_cache_declaration
        and declared is not None
        and hash(target) in declared
    )
    return {**options, "declare": [] if cached else None}


# The routes worked out, for the router they came from (a new router starts afresh).
_routes: tuple[Any, dict[tuple[str, str | None], dict[str, Any]]] = (None, {})


# Options `send_task` takes out of the task's own before publishing (they go in the
# message's headers, which `message` writes: a step task sets none of them).
_IN_THE_MESSAGE = ("time_limit", "soft_time_limit", "expires", "ignore_result")


def _route(router: Any, name: str, queue_name: str | None) -> dict[str, Any]:
    """The publish options `send_task` would give a message of task `name` sent to
    `queue_name`: the registered task's own options (its serializer, say) under the
    queue asked for, then routed by Celery's router."""
    global _routes
    if _routes[0] is not router:
        _routes = (router, {})
    found = _routes[1]
    if (name, queue_name) not in found:
        task = current_app.tasks.get(name)
        own = task._get_exec_options() if task is not None else {}
        options = {
            key: value
            for key, value in own.items()
            if value is not None and key not in _IN_THE_MESSAGE
        }
        if queue_name:
            options["queue"] = queue_name
        found[name, queue_name] = router.route(options, name, (), {}, task)
    return found[name, queue_name]


_origins: dict[int, str] = {}


def _origin() -> str:
    """The `origin` header Celery gives a message: this host's name and process id."""
    pid = os.getpid()
    if pid not in _origins:
        _origins.clear()
        _origins[pid] = anon_nodename()
    return _origins[pid]
