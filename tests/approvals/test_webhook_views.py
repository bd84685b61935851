"""The console's webhook pages as olga (staff operator) and vic (staff who may only view
runs) see them: register an endpoint, read its delivery log, redeliver, switch it off."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from approvals.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga_client(operator) -> Client:
    operator.is_staff = True
    operator.save()
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture
def vic_client(people) -> Client:
    vic = User.objects.create_user("vic", is_staff=True)
    vic.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    client = Client()
    client.force_login(vic)
    return client


def register(client: Client, **form):
    data = {"url": "https://hooks.example.com/baton", "event_types": ["run.started"], **form}
    return client.post("/console/webhooks/", data)


class TestRegister:
    def test_an_operator_registers_an_endpoint_and_sees_its_secret(self, olga_client):
        response = register(olga_client)

        endpoint = WebhookEndpoint.objects.get()
        assert response.status_code == 302
        assert response["Location"] == f"/console/webhooks/{endpoint.pk}/"
        page = olga_client.get(response["Location"]).content.decode()
        assert endpoint.secret in page
        assert "Nothing was sent to this endpoint yet." in page

    def test_no_event_type_is_refused_on_the_form_with_what_was_typed(self, olga_client):
        response = register(olga_client, event_types=[])

        assert response.status_code == 422
        assert "Choose at least one event type." in response.content.decode()
        assert "https://hooks.example.com/baton" in response.content.decode()
        assert not WebhookEndpoint.objects.exists()

    def test_a_viewer_who_may_not_operate_runs_is_refused(self, vic_client):
        assert vic_client.get("/console/webhooks/").status_code == 403
        assert register(vic_client).status_code == 403


class TestDeliveryLog:
    def test_the_log_shows_a_delivery_and_redelivering_starts_a_new_run(
        self, olga_client, start, order_input
    ):
        register(olga_client)
        start("order", order_input())
        delivery = WebhookDelivery.objects.get()
        first_run = delivery.run_id

        page = olga_client.get(f"/console/webhooks/{delivery.endpoint_id}/").content.decode()
        response = olga_client.post(f"/console/webhooks/deliveries/{delivery.pk}/redeliver/")

        assert delivery.message_id in page
        assert "pending" in page
        assert response.status_code == 302
        delivery.refresh_from_db()
        assert delivery.run_id != first_run

    def test_an_endpoint_switched_off_says_so(self, olga_client):
        register(olga_client)
        endpoint = WebhookEndpoint.objects.get()

        olga_client.post(f"/console/webhooks/{endpoint.pk}/", {"is_active": "false"})

        endpoint.refresh_from_db()
        assert not endpoint.is_active
        page = olga_client.get(f"/console/webhooks/{endpoint.pk}/").content.decode()
        assert "Switched off" in page


class TestRotateAndDelete:
    def test_rotating_shows_the_new_secret_and_says_how_long_the_old_one_signs(self, olga_client):
        register(olga_client)
        endpoint = WebhookEndpoint.objects.get()
        old = endpoint.secret

        response = olga_client.post(f"/console/webhooks/{endpoint.pk}/rotate-secret/")

        endpoint.refresh_from_db()
        page = olga_client.get(response["Location"]).content.decode()
        assert response.status_code == 302
        assert endpoint.secret != old
        assert endpoint.secret in page
        assert old not in page
        assert "also signed with the previous secret until" in page

    def test_deleting_removes_the_endpoint_and_goes_back_to_the_list(self, olga_client):
        register(olga_client)
        endpoint = WebhookEndpoint.objects.get()

        response = olga_client.post(f"/console/webhooks/{endpoint.pk}/delete/")

        page = olga_client.get(response["Location"]).content.decode()
        assert response["Location"] == "/console/webhooks/"
        assert "Deleted https://hooks.example.com/baton." in page
        assert not WebhookEndpoint.objects.exists()

    def test_someone_who_may_only_view_runs_can_do_neither(self, olga_client, vic_client):
        register(olga_client)
        endpoint = WebhookEndpoint.objects.get()
        secret = endpoint.secret

        rotate = vic_client.post(f"/console/webhooks/{endpoint.pk}/rotate-secret/")
        delete = vic_client.post(f"/console/webhooks/{endpoint.pk}/delete/")

        endpoint.refresh_from_db()
        assert (rotate.status_code, delete.status_code) == (403, 403)
        assert endpoint.secret == secret

    def test_an_unknown_endpoint_is_404(self, olga_client):
        missing = "00000000-0000-0000-0000-000000000000"

        rotate = olga_client.post(f"/console/webhooks/{missing}/rotate-secret/")
        delete = olga_client.post(f"/console/webhooks/{missing}/delete/")

        assert (rotate.status_code, delete.status_code) == (404, 404)
