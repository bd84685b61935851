"""A delivery is signed per Standard Webhooks, refuses internal targets unless allowed, and
records each attempt in the endpoint's log; its retries are the engine's."""

from __future__ import annotations

import socket

import pytest
from django.utils import timezone
from standardwebhooks import Webhook, WebhookVerificationError

from approvals.models import WebhookEndpoint, new_webhook_secret
from approvals.notify import webhooks
from approvals.notify.webhook_delivery import (
    RefusedAddress,
    is_public_address,
    resolve_target,
    signed_headers,
)
from approvals.states import WebhookEvent
from tests.webhook_receiver import receiving

BODY = '{"data":{"run_id":"42"},"timestamp":"2026-12-04T10:00:00+00:00","type":"run.started"}'


class TestSignedHeaders:
    def test_the_standard_webhooks_library_verifies_the_signature(self):
        secret = new_webhook_secret()

        headers = signed_headers(secrets=[secret], message_id="msg_1", at=timezone.now(), body=BODY)

        assert headers["webhook-id"] == "msg_1"
        assert headers["webhook-signature"].startswith("v1,")
        assert Webhook(secret).verify(BODY, headers) == {
            "data": {"run_id": "42"},
            "timestamp": "2026-12-04T10:00:00+00:00",
            "type": "run.started",
        }

    def test_another_secret_or_a_changed_body_does_not_verify(self):
        secret = new_webhook_secret()
        headers = signed_headers(secrets=[secret], message_id="msg_1", at=timezone.now(), body=BODY)

        with pytest.raises(WebhookVerificationError):
            Webhook(new_webhook_secret()).verify(BODY, headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(BODY.replace("42", "43"), headers)

    def test_while_a_rotation_overlaps_a_receiver_with_either_secret_verifies(self):
        new, old = new_webhook_secret(), new_webhook_secret()

        headers = signed_headers(
            secrets=[new, old], message_id="msg_1", at=timezone.now(), body=BODY
        )

        assert len(headers["webhook-signature"].split(" ")) == 2
        assert Webhook(new).verify(BODY, headers)["type"] == "run.started"
        assert Webhook(old).verify(BODY, headers)["type"] == "run.started"
        with pytest.raises(WebhookVerificationError):
            Webhook(new_webhook_secret()).verify(BODY, headers)


class TestInternalTargetsAreRefused:
    @pytest.mark.parametrize(
        "address",
        [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.9",
            "192.168.1.1",
            "169.254.169.254",
            "::1",
            "fe80::1",
            "fd00::1",
            "0.0.0.0",
            "::ffff:127.0.0.1",
            "100.64.0.1",
            "224.0.0.1",
        ],
    )
    def test_a_private_loopback_or_link_local_address_is_not_public(self, address):
        assert not is_public_address(address)

    def test_a_public_address_is(self):
        assert is_public_address("93.184.215.14")

    def test_a_url_on_loopback_is_refused_in_production(self):
        with pytest.raises(RefusedAddress, match=r"127\.0\.0\.1.*BATON_WEBHOOKS_ALLOW_PRIVATE"):
            resolve_target("http://127.0.0.1:8080/hook", allow_private=False)

    def test_a_name_with_any_internal_address_among_its_answers_is_refused(self, monkeypatch):
        answers = [("93.184.215.14", 443), ("10.0.0.7", 443)]
        monkeypatch.setattr(
            socket,
            "getaddrinfo",
            lambda *args, **kwargs: [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", a) for a in answers
            ],
        )

        with pytest.raises(RefusedAddress, match=r"10\.0\.0\.7"):
            resolve_target("https://hooks.example.com/baton", allow_private=False)

    def test_the_setting_allows_loopback_for_tests_and_private_networks(self):
        assert resolve_target("http://127.0.0.1:8080/hook", allow_private=True) == "127.0.0.1"

    def test_a_scheme_other_than_http_is_refused(self):
        with pytest.raises(RefusedAddress, match="not an http"):
            resolve_target("gopher://127.0.0.1/", allow_private=True)


@pytest.mark.django_db
class TestDeliver:
    @pytest.fixture
    def endpoint_at(self, olga):
        def make(url):
            return webhooks.register_endpoint(
                url=url, event_types=["run.started"], by=olga, now=timezone.now()
            )

        return make

    def emit(self):
        [delivery] = webhooks.emit(
            event_type=WebhookEvent.RUN_STARTED, data={"run_id": "42"}, now=timezone.now()
        )
        return delivery

    def test_a_receiver_gets_the_signed_message_and_the_log_says_delivered(
        self, endpoint_at, drive
    ):
        with receiving() as receiver:
            receiver.secret = endpoint_at(receiver.url).secret
            delivery = self.emit()

            run = drive(delivery.run)

        delivery.refresh_from_db()
        [message] = receiver.verified
        assert message.message_id == delivery.message_id
        assert message.payload["data"] == {"run_id": "42"}
        assert run.state == "succeeded"
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
            "delivered",
            1,
            204,
        )

    def test_a_receiver_that_answers_500_is_tried_again_by_the_engine(self, endpoint_at, drive):
        with receiving(fail_first=1) as receiver:
            endpoint_at(receiver.url)
            delivery = self.emit()

            drive(delivery.run)

        delivery.refresh_from_db()
        step = delivery.run.steps.get()
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
            "pending",
            1,
            500,
        )
        assert step.state == "retry_wait"
        assert "answered 500" in step.last_error["message"]

    def test_after_a_rotation_the_receiver_still_verifies_with_the_old_secret(
        self, endpoint_at, drive
    ):
        with receiving() as receiver:
            endpoint = endpoint_at(receiver.url)
            receiver.secret = endpoint.secret  # the receiver has not switched yet
            rotated = webhooks.rotate_secret(endpoint_id=endpoint.pk, now=timezone.now())
            delivery = self.emit()

            run = drive(delivery.run)

        assert rotated.secret != receiver.secret
        assert (run.state, len(receiver.verified), receiver.bad_signatures) == ("succeeded", 1, 0)

    def test_a_delivery_whose_endpoint_was_deleted_gives_up_at_once(self, endpoint_at, drive):
        delivery = None
        with receiving() as receiver:
            endpoint = endpoint_at(receiver.url)
            delivery = self.emit()
            run = delivery.run
            WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()  # as if deleted mid-attempt

            run = drive(run)

        step = run.steps.get()
        assert run.state == "failed"
        assert step.attempt == 1
        assert step.last_error["message"] == "The delivery's endpoint was deleted."
        assert receiver.requests == 0

    def test_a_loopback_target_fails_at_once_in_production(self, endpoint_at, drive, settings):
        settings.BATON_WEBHOOKS_ALLOW_PRIVATE = False
        endpoint_at("http://127.0.0.1:9/hook")
        delivery = self.emit()

        run = drive(delivery.run)

        delivery.refresh_from_db()
        assert run.state == "failed"
        assert delivery.status == "failed"
        assert delivery.attempts == 1
        assert "private or internal address" in delivery.last_response
