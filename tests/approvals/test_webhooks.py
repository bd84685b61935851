"""Operators register webhook endpoints; run and task events become one delivery run per
subscribed endpoint, in the transaction that made the event."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from approvals import human_tasks
from approvals.models import WebhookDelivery, WebhookEndpoint
from approvals.notify import webhooks
from approvals.notify.webhook_delivery import DELIVERY_TYPE
from approvals.states import WebhookEvent
from bench.measure import Counts, counting
from workflows import engine
from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db

ALL_EVENTS = [
    "run.started",
    "run.ended",
    "run.failed",
    "task.opened",
    "task.decided",
    "task.escalated",
]


@pytest.fixture
def register(olga):
    def make(event_types=ALL_EVENTS, url="https://hooks.example.com/baton"):
        return webhooks.register_endpoint(
            url=url, event_types=event_types, by=olga, now=timezone.now()
        )

    return make


def delivered_types(endpoint) -> list[str]:
    return sorted(endpoint.deliveries.values_list("event_type", flat=True))


class TestRegisterEndpoint:
    def test_an_endpoint_gets_a_standard_webhooks_secret_and_its_event_types(self, register):
        endpoint = register(event_types=["task.opened", "run.started"])

        assert endpoint.secret.startswith("whsec_")
        assert endpoint.event_types == ["run.started", "task.opened"]
        assert endpoint.is_active

    def test_an_unknown_event_type_is_refused_with_the_choices(self, register):
        with pytest.raises(webhooks.InvalidEndpoint, match=r"Unknown event type run\.paused"):
            register(event_types=["run.paused"])

    def test_no_event_type_is_refused(self, register):
        with pytest.raises(webhooks.InvalidEndpoint, match="at least one"):
            register(event_types=[])

    def test_a_url_that_is_not_http_is_refused(self, register):
        with pytest.raises(webhooks.InvalidEndpoint, match="not an http"):
            register(url="file:///etc/passwd")


class TestRunEvents:
    def test_a_run_that_succeeds_tells_of_its_start_and_its_end(
        self, register, start, drive, order_input
    ):
        endpoint = register()

        run = drive(start("order", order_input()))

        assert run.state == "succeeded"
        assert delivered_types(endpoint) == ["run.ended", "run.started"]
        ended = endpoint.deliveries.get(event_type="run.ended")
        assert ended.payload["type"] == "run.ended"
        assert ended.payload["data"]["run_id"] == str(run.pk)
        assert ended.payload["data"]["state"] == "succeeded"

    def test_a_run_that_is_undone_tells_that_it_failed(self, register, start, drive, order_input):
        endpoint = register(event_types=["run.failed", "run.ended"])

        run = drive(start("order", order_input(simulate={"payment": "decline"})))

        assert run.state in ("compensated", "failed")
        assert delivered_types(endpoint) == ["run.failed"]

    def test_each_delivery_is_its_own_delivery_run_and_tells_of_nothing_itself(
        self, register, start, order_input
    ):
        endpoint = register()

        start("order", order_input())

        delivery = endpoint.deliveries.get()
        assert delivery.run.workflow_type == DELIVERY_TYPE
        assert delivery.run.input == {"delivery_id": str(delivery.pk)}
        assert WorkflowRun.objects.filter(workflow_type=DELIVERY_TYPE).count() == 1

    def test_an_endpoint_hears_only_what_it_subscribed_to_while_it_is_active(
        self, register, start, drive, order_input
    ):
        only_ends = register(event_types=["run.ended"])
        switched_off = register()
        webhooks.update_endpoint(endpoint_id=switched_off.pk, is_active=False)

        drive(start("order", order_input()))

        assert delivered_types(only_ends) == ["run.ended"]
        assert delivered_types(switched_off) == []

    def test_without_endpoints_nothing_is_written(self, start, drive, order_input):
        drive(start("order", order_input()))

        assert WebhookDelivery.objects.count() == 0
        assert not WorkflowRun.objects.filter(workflow_type=DELIVERY_TYPE).exists()

    def test_an_event_whose_transaction_rolls_back_sends_nothing(
        self, register, start, order_input
    ):
        register()

        def start_then_fail():
            with transaction.atomic():
                start("order", order_input())
                raise RuntimeError("the caller's transaction fails after the start")

        with pytest.raises(RuntimeError):
            start_then_fail()

        assert WebhookDelivery.objects.count() == 0
        assert not WorkflowRun.objects.filter(workflow_type=DELIVERY_TYPE).exists()


class TestTaskEvents:
    def test_a_task_tells_when_it_opens_and_when_it_is_decided(
        self, register, start_expense, carol
    ):
        endpoint = register(event_types=["task.opened", "task.decided"])
        run = start_expense()
        task = run.human_tasks.get()

        human_tasks.approve_human_task(task_id=task.pk, user=carol, channel="inbox")

        assert delivered_types(endpoint) == ["task.decided", "task.opened"]
        decided = endpoint.deliveries.get(event_type="task.decided").payload["data"]
        assert decided["task_id"] == str(task.pk)
        assert decided["outcome"] == "approved"
        assert decided["decided_by"] == "carol"

    def test_an_escalated_task_tells_of_its_escalation(self, register, manager_task):
        endpoint = register(event_types=["task.escalated"])

        human_tasks.fire_due_human_tasks(now=manager_task.escalate_at)

        [delivery] = endpoint.deliveries.all()
        assert delivery.payload["data"]["escalation_level"] == 1


class TestRedeliver:
    def test_a_redelivery_keeps_the_message_id_and_starts_a_new_delivery_run(
        self, register, start, order_input
    ):
        endpoint = register(event_types=["run.started"])
        start("order", order_input())
        delivery = endpoint.deliveries.get()
        first_run, message_id = delivery.run_id, delivery.message_id

        again = webhooks.redeliver(delivery_id=delivery.pk)

        assert again.message_id == message_id
        assert again.run_id != first_run
        assert again.run.workflow_type == DELIVERY_TYPE


class TestRotateSecret:
    def test_the_old_secret_signs_beside_the_new_one_for_the_overlap(self, register, settings):
        settings.BATON_WEBHOOKS_SECRET_OVERLAP_HOURS = 24
        endpoint = register()
        old, now = endpoint.secret, timezone.now()

        rotated = webhooks.rotate_secret(endpoint_id=endpoint.pk, now=now)

        assert rotated.secret.startswith("whsec_")
        assert rotated.secret != old
        assert rotated.signing_secrets(now) == [rotated.secret, old]
        assert rotated.signing_secrets(now + timedelta(hours=23)) == [rotated.secret, old]
        assert rotated.signing_secrets(now + timedelta(hours=24)) == [rotated.secret]

    def test_with_no_overlap_only_the_new_secret_signs(self, register, settings):
        settings.BATON_WEBHOOKS_SECRET_OVERLAP_HOURS = 0
        endpoint = register()

        rotated = webhooks.rotate_secret(endpoint_id=endpoint.pk, now=timezone.now())

        assert (rotated.previous_secret, rotated.previous_secret_until) == ("", None)
        assert rotated.signing_secrets(timezone.now()) == [rotated.secret]


class TestDeleteEndpoint:
    def test_it_cancels_the_deliveries_still_trying_and_hears_nothing_more(
        self, register, start, drive, order_input
    ):
        endpoint = register(event_types=["run.started"])
        start("order", order_input())
        [trying] = endpoint.deliveries.all()

        deleted = webhooks.delete_endpoint(endpoint_id=endpoint.pk, now=timezone.now())
        afterwards = webhooks.emit(event_type=WebhookEvent.RUN_STARTED, data={}, now=timezone.now())

        run = drive(WorkflowRun.objects.get(pk=trying.run_id))
        assert deleted == ("https://hooks.example.com/baton", 1)
        assert run.state == "cancelled"
        assert not WebhookEndpoint.objects.exists()
        assert not WebhookDelivery.objects.exists()
        assert afterwards == []

    def test_deliveries_that_ended_are_not_cancelled_again(
        self, register, start, drive, order_input
    ):
        endpoint = register(event_types=["run.started"])
        start("order", order_input())
        delivery_run = WorkflowRun.objects.get(pk=endpoint.deliveries.get().run_id)
        engine.cancel_run(run_id=delivery_run.pk)
        drive(delivery_run)

        deleted = webhooks.delete_endpoint(endpoint_id=endpoint.pk, now=timezone.now())

        assert deleted.cancelled_deliveries == 0


class TestSubscriptionsRemembered:
    def test_an_event_nobody_subscribes_to_costs_no_statement(
        self, django_assert_num_queries, register
    ):
        register(event_types=["task.decided"])
        webhooks.emit(event_type=WebhookEvent.RUN_STARTED, data={}, now=timezone.now())

        with django_assert_num_queries(0):
            webhooks.emit(event_type=WebhookEvent.RUN_STARTED, data={}, now=timezone.now())

    def test_an_endpoint_another_process_registered_is_heard_after_the_next_read(
        self, settings, monkeypatch
    ):
        settings.BATON_WEBHOOKS_REFRESH_SECONDS = 10
        endpoint = WebhookEndpoint.objects.create(
            url="https://hooks.example.com/", event_types=["run.started"], created_at=timezone.now()
        )
        unheard = webhooks.emit(event_type=WebhookEvent.RUN_STARTED, data={}, now=timezone.now())

        later = webhooks.monotonic() + 10
        monkeypatch.setattr(webhooks, "monotonic", lambda: later)
        heard = webhooks.emit(event_type=WebhookEvent.RUN_STARTED, data={}, now=timezone.now())

        assert unheard == []
        assert [delivery.endpoint for delivery in heard] == [endpoint]


@pytest.mark.django_db(transaction=True)
class TestWhatWebhooksCostAStep:
    """A step's statements and commits, counted as the engine's own cost tests count them,
    with no endpoint and with one subscribed to every event: steps emit no event, so
    webhooks cost a step nothing; a run's start and end pay for the deliveries they make."""

    def _middle_step(self, start, order_input) -> Counts:
        run = start("order", order_input())
        engine.execute_step(step_id=run.steps.get().pk)
        middle = run.steps.get(node="reserve_inventory").pk
        with counting() as counts:
            engine.execute_step(step_id=middle)
        return counts

    def test_a_step_costs_the_same_with_an_endpoint_subscribed_to_everything(
        self, start, order_input, register
    ):
        alone = self._middle_step(start, order_input)
        register()
        webhooks.emit(event_type=WebhookEvent.TASK_OPENED, data={}, now=timezone.now())

        heard = self._middle_step(start, order_input)

        assert (heard.statements, heard.commits) == (alone.statements, alone.commits)

    def test_a_start_heard_by_an_endpoint_makes_its_delivery_in_the_same_commit(
        self, start, order_input, register
    ):
        with counting() as alone:
            start("order", order_input())
        register(event_types=["run.started"])
        webhooks.emit(event_type=WebhookEvent.TASK_OPENED, data={}, now=timezone.now())

        with counting() as heard:
            start("order", order_input())

        assert heard.commits == alone.commits
        assert heard.statements > alone.statements
        assert WebhookDelivery.objects.count() == 1
