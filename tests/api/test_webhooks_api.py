"""Operators register webhook endpoints, read their delivery log and redeliver through the
REST API; anyone else is refused, and bad input is a 422 that says what is wrong."""

from __future__ import annotations

import pytest

from approvals.models import WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def registered(operator_api):
    response = operator_api.post(
        "/webhooks/endpoints",
        {"url": "https://hooks.example.com/baton", "event_types": ["run.started"]},
    )
    assert response.status_code == 201
    return response.json()


class TestRegisterEndpoint:
    def test_an_operator_registers_an_endpoint_and_is_given_its_secret(self, registered):
        assert registered["secret"].startswith("whsec_")
        assert registered["event_types"] == ["run.started"]
        assert WebhookEndpoint.objects.get().url == "https://hooks.example.com/baton"

    def test_an_unknown_event_type_is_422(self, operator_api):
        response = operator_api.post(
            "/webhooks/endpoints", {"url": "https://a.example.com/", "event_types": ["run.paused"]}
        )

        assert response.status_code == 422

    def test_a_url_that_is_not_http_is_422_saying_so(self, operator_api):
        response = operator_api.post(
            "/webhooks/endpoints", {"url": "ftp://a.example.com/", "event_types": ["run.ended"]}
        )

        assert response.status_code == 422
        assert "not an http(s) URL" in response.json()["detail"]

    def test_someone_who_may_not_operate_runs_is_refused(self, api_as):
        response = api_as("alice").post(
            "/webhooks/endpoints", {"url": "https://a.example.com/", "event_types": ["run.ended"]}
        )

        assert response.status_code == 403
        assert not WebhookEndpoint.objects.exists()


class TestDeliveryLog:
    def test_the_log_lists_each_delivery_and_a_redelivery_keeps_its_message_id(
        self, operator_api, registered, start, order_input
    ):
        start("order", order_input())

        log = operator_api.get(f"/webhooks/endpoints/{registered['id']}/deliveries").json()
        [delivery] = log
        again = operator_api.post(f"/webhooks/deliveries/{delivery['id']}/redeliver")

        assert (delivery["event_type"], delivery["status"], delivery["attempts"]) == (
            "run.started",
            "pending",
            0,
        )
        assert delivery["payload"]["type"] == "run.started"
        assert again.status_code == 202
        assert again.json()["message_id"] == delivery["message_id"]
        assert again.json()["delivery_run"] != delivery["delivery_run"]

    def test_an_unknown_endpoint_is_404(self, operator_api):
        response = operator_api.get(
            "/webhooks/endpoints/00000000-0000-0000-0000-000000000000/deliveries"
        )

        assert response.status_code == 404

    def test_an_endpoint_is_switched_off(self, operator_api, registered):
        response = operator_api.client.patch(
            f"/api/v1/webhooks/endpoints/{registered['id']}",
            {"is_active": False},
            content_type="application/json",
            headers=operator_api.headers,
        )

        assert (response.status_code, response.json()["is_active"]) == (200, False)


class TestRotateSecret:
    def test_the_answer_holds_the_new_secret_and_how_long_the_old_one_signs(
        self, operator_api, registered
    ):
        response = operator_api.post(f"/webhooks/endpoints/{registered['id']}/rotate-secret")

        body = response.json()
        endpoint = WebhookEndpoint.objects.get()
        assert response.status_code == 200
        assert body["secret"] == endpoint.secret != registered["secret"]
        assert endpoint.previous_secret == registered["secret"]
        assert body["previous_secret_until"] is not None

    def test_an_unknown_endpoint_is_404(self, operator_api):
        response = operator_api.post(
            "/webhooks/endpoints/00000000-0000-0000-0000-000000000000/rotate-secret"
        )

        assert response.status_code == 404


class TestDeleteEndpoint:
    def test_the_endpoint_goes_and_its_deliveries_still_trying_are_cancelled(
        self, operator_api, registered, start, order_input
    ):
        start("order", order_input())
        delivery_run = WebhookEndpoint.objects.get().deliveries.get().run

        response = operator_api.client.delete(
            f"/api/v1/webhooks/endpoints/{registered['id']}", headers=operator_api.headers
        )

        delivery_run.refresh_from_db()
        assert (response.status_code, response.json()) == (200, {"cancelled_deliveries": 1})
        assert not WebhookEndpoint.objects.exists()
        assert delivery_run.state in ("cancelling", "cancelled")

    def test_an_unknown_endpoint_is_404_and_someone_else_is_refused(
        self, operator_api, api_as, registered
    ):
        unknown = operator_api.client.delete(
            "/api/v1/webhooks/endpoints/00000000-0000-0000-0000-000000000000",
            headers=operator_api.headers,
        )
        alice = api_as("alice")
        refused = alice.client.delete(
            f"/api/v1/webhooks/endpoints/{registered['id']}", headers=alice.headers
        )

        assert (unknown.status_code, refused.status_code) == (404, 403)
        assert WebhookEndpoint.objects.exists()
