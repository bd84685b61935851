"""Outbound webhooks with real workers and a real receiver over HTTP: every event arrives,
signed, under one message id, through a receiver's errors and a worker's death."""

from __future__ import annotations

from collections import Counter

import pytest
from django.utils import timezone

from approvals.models import WebhookDelivery
from approvals.notify import webhooks
from tests.e2e.conftest import wait_until
from tests.webhook_receiver import receiving
from workflows.states import RunState

pytestmark = pytest.mark.e2e


class TestDeliveriesSurviveFailures:
    def test_each_event_arrives_verified_under_one_id_despite_500s_and_a_killed_worker(
        self, workers, start, finished, order_input, olga
    ):
        # The first two requests are answered 500; the third is verified, then its
        # answer is held while the workers are SIGKILLed, so its attempt never records.
        with receiving(fail_first=2, hold=3) as receiver:
            endpoint = webhooks.register_endpoint(
                url=receiver.url,
                event_types=["run.started", "run.ended"],
                by=olga,
                now=timezone.now(),
            )
            receiver.secret = endpoint.secret

            run = finished(start("order", order_input()), RunState.SUCCEEDED, timeout=60)
            wait_until(lambda: receiver.requests >= 3, timeout=60, what="a third request")
            for name in ("worker-a", "worker-b"):
                workers.kill_worker(name)
            workers.ensure_workers(("worker-a", "worker-b"))
            receiver.release.set()
            wait_until(
                lambda: WebhookDelivery.objects.filter(delivered_at__isnull=False).count() == 2,
                timeout=90,
                what="both deliveries to be recorded as delivered",
            )

        deliveries = {d.event_type: d for d in WebhookDelivery.objects.select_related("run")}
        distinct = receiver.distinct()
        assert receiver.bad_signatures == 0
        assert sorted(message.payload["type"] for message in distinct.values()) == [
            "run.ended",
            "run.started",
        ]
        assert set(distinct) == {delivery.message_id for delivery in deliveries.values()}
        assert all(m.payload["data"]["run_id"] == str(run.pk) for m in distinct.values())
        # The held message (the first to pass) was sent again after the crash, under the
        # same id. The other repeats only if the kill caught it between its request and
        # its record (the machine's timing): at least once, at most once more, each.
        held = receiver.verified[0]
        repeats = Counter(message.message_id for message in receiver.verified)
        assert repeats[held.message_id] == 2
        assert sorted(repeats.values()) in ([1, 2], [2, 2])
        # Five attempts in all: two 500s, the killed one (whose answer was never
        # recorded in the log) and two that succeeded.
        assert sum(delivery.attempts for delivery in deliveries.values()) == 4
        # Each step attempt is one the log recorded, or one the kill cut short: the held
        # one, and the other delivery's too when the kill caught it between its claim and
        # its request (how the two interleave is the machine's timing, not a promise).
        steps = [step for d in deliveries.values() for step in d.run.steps.all()]
        assert 5 <= sum(step.attempt for step in steps) <= 6
        wait_until(
            lambda: all(
                d.run.state == RunState.SUCCEEDED
                for d in WebhookDelivery.objects.select_related("run")
            ),
            timeout=30,
            what="both delivery runs to succeed",
        )
